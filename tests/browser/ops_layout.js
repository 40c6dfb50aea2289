// What a person sees of the operations tables (tests/browser/test_ops.py): every Latin
// word, number, time and id on one line (never broken in the middle); every cell at
// least `chars` characters of its font wide, or its text on one line (a short value
// such as "客户" may be narrow; a value squeezed onto several lines may not); in card
// mode every card inside the viewport with each cell's label beside its value; every
// button visible and not covered; the page never scrolls sideways. Returns the problems
// found.
({ chars, cards }) => {
  const out = [];
  const canvas = document.createElement('canvas').getContext('2d');
  const ch = (el) => { canvas.font = getComputedStyle(el).font; return canvas.measureText('0').width; };
  const word = /[A-Za-z0-9][A-Za-z0-9_.:\/,%]*/g;
  for (const table of document.querySelectorAll('#ops .ops-table')) {
    const head = table.querySelector('thead');
    if (cards !== (getComputedStyle(head).display === 'none')) out.push(`layout: cards=${!cards}`);
  }
  for (const tr of document.querySelectorAll('#ops .ops-table tbody tr')) {
    const card = tr.getBoundingClientRect();
    if (card.left < 0 || card.right > innerWidth) out.push(`row outside the viewport: ${card.left}-${card.right}`);
    for (const td of tr.querySelectorAll('td')) {
      const cell = td.querySelector('.cell') || td;
      if (!td.getClientRects().length) continue;
      const label = td.dataset.label;
      const box = cell.getBoundingClientRect();
      const all = document.createRange();
      all.selectNodeContents(cell);
      const lines = new Set([...all.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.bottom))).size;
      if (lines > 1 && box.width < chars * ch(cell)) out.push(`narrow ${label}: ${Math.round(box.width)}px, ${lines} lines`);
      if (cards && !td.matches('.c-task:first-child, .c-actions')) {
        const before = getComputedStyle(td, '::before').content;
        if (before !== JSON.stringify(label)) out.push(`no label ${label}: ${before}`);
        if (box.left - td.getBoundingClientRect().left < 80) out.push(`label over value ${label}`);
      }
      const texts = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      for (let node = texts.nextNode(); node; node = texts.nextNode()) {
        for (const m of node.data.matchAll(word)) {
          const range = document.createRange();
          range.setStart(node, m.index);
          range.setEnd(node, m.index + m[0].length);
          const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.bottom)));
          if (lines.size > 1) out.push(`broken in ${label}: ${m[0]}`);
        }
      }
    }
    for (const btn of tr.querySelectorAll('.btn')) {
      btn.scrollIntoView({ block: 'center' });
      const r = btn.getBoundingClientRect();
      const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
      if (r.left < 0 || r.right > innerWidth || !(hit === btn || btn.contains(hit))) out.push(`button hidden: ${btn.getAttribute('aria-label')}`);
    }
  }
  if (document.documentElement.scrollWidth > innerWidth) out.push(`page scrolls sideways: ${document.documentElement.scrollWidth}`);
  return out;
}
