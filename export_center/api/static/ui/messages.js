// The page's messages: toasts, the confirmation dialog, the screen reader's live region,
// and the clipboard. Every view uses them; none of them keeps state of the list.

import { $, h, icon } from './dom.js';
import { t } from './i18n.js';
import { describe } from './form.js';

/** A toast; returns it. `action` `{label, onClick}` adds a button (the toast goes when it
 * is pressed), `extra` an element under the text; `sticky` toasts stay until dismissed. */
export function notify(kind, text, detail, { action, extra, sticky = kind === 'error' } = {}) {
  const box = $('toasts');
  const close = h('button', { type: 'button', class: 'icon-btn', 'aria-label': t('dismiss') }, icon('close'));
  const button = action
    ? h('button', { type: 'button', class: 'btn small primary toast-action' }, action.icon ? icon(action.icon) : null, action.label)
    : null;
  const toast = h(
    'div',
    { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' },
    h(
      'div',
      {},
      h('p', {}, text),
      detail ? h('p', { class: 'detail', lang: 'en' }, t('detail', { message: detail })) : null,
      extra || null,
      button,
    ),
    close,
  );
  close.addEventListener('click', () => toast.remove());
  button?.addEventListener('click', (event) => {
    toast.remove();
    action.onClick(event);
  });
  box.append(toast);
  while (box.children.length > 3) box.firstElementChild.remove();
  if (!sticky) setTimeout(() => toast.remove(), 8000);
  return toast;
}

export function notifyError(error) {
  const { text, detail } = describe(error);
  notify('error', text, detail);
}

/** A confirmation in the page's language (a <dialog>): resolves to true or false. */
export function confirmDialog({ title, text, yes, no }) {
  const dialog = $('confirm');
  $('confirm-title').textContent = title;
  $('confirm-text').textContent = text;
  $('confirm-yes').textContent = yes;
  $('confirm-no').textContent = no;
  dialog.returnValue = '';
  dialog.showModal();
  $('confirm-no').focus(); // the safe answer is the default one
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'yes'), { once: true });
  });
}

let announceTimer = 0;
export function announce(message) {
  const live = $('live');
  live.textContent = '';
  clearTimeout(announceTimer);
  announceTimer = setTimeout(() => { live.textContent = message; }, 50);
}

/** Put `text` on the clipboard (or, without the Clipboard API, the old way); true when done. */
export async function copied(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // No Clipboard API (a page on plain http from another host): the old way.
    const area = h('textarea', { class: 'sr-only', readonly: true }, text);
    document.body.append(area);
    area.select();
    let done = false;
    try { done = document.execCommand('copy'); } catch { done = false; }
    area.remove();
    return done;
  }
}
