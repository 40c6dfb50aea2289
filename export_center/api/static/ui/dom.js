// Tiny DOM helpers: elements are built with properties, never from HTML strings, so no
// server text can become markup.

/** `h('button', {class: 'btn', onclick}, 'Text', child)`. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value == null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key in el && typeof value !== 'string') el[key] = value;
    else el.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child == null || child === false || child === '') continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export const $ = (id) => document.getElementById(id);

/** The JSON value this browser keeps under `key` (localStorage), or null when there is
 * none, it does not parse, or storage is refused. */
export function stored(key) {
  try { return JSON.parse(localStorage.getItem(key) || 'null'); } catch { return null; }
}

const SVG = 'http://www.w3.org/2000/svg';
const PATHS = {
  queued: 'M12 7v5l3 2M21 12a9 9 0 1 1-18 0 9 9 0 0 1 18 0Z',
  running: 'M21 12a9 9 0 1 1-6.2-8.56M21 4v5h-5',
  succeeded: 'M20 6 9 17l-5-5',
  failed: 'M12 8v5m0 3.5v.5M10.3 3.9 1.8 18a2 2 0 0 0 1.7 3h17a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0Z',
  cancelled: 'M5.6 5.6l12.8 12.8M21 12a9 9 0 1 1-18 0 9 9 0 0 1 18 0Z',
  expired: 'M6 2h12M6 22h12M7 2v4l5 6-5 6v4M17 2v4l-5 6 5 6v4',
  awaiting_approval: 'M12 7v5l3 2M21 12a9 9 0 1 1-18 0 9 9 0 0 1 18 0Z',
  rejected: 'M5.6 5.6l12.8 12.8M21 12a9 9 0 1 1-18 0 9 9 0 0 1 18 0Z',
  download: 'M12 3v12m0 0-5-5m5 5 5-5M4 21h16',
  close: 'M6 6l12 12M18 6 6 18',
};

/** An inline SVG icon (decorative: the text next to it carries the meaning). */
export function icon(name) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  svg.setAttribute('class', `icon icon-${name}`);
  const path = document.createElementNS(SVG, 'path');
  path.setAttribute('d', PATHS[name] || '');
  svg.append(path);
  return svg;
}
