// Text of the page in English and Chinese, and locale-aware formatting (Intl).
// The language is remembered in localStorage ("ec.lang"); the first visit follows the
// browser's languages. Error codes of the API map to sentences here (errorKey), so the
// Chinese page never shows the server's English.

import { EN } from './strings_en.js';
import { ZH } from './strings_zh.js';

const STRINGS = { en: EN, 'zh-CN': ZH };
const KEY = 'ec.lang';

function initial() {
  try {
    const saved = localStorage.getItem(KEY);
    if (saved && STRINGS[saved]) return saved;
  } catch { /* storage may be off: follow the browser */ }
  for (const lang of navigator.languages || [navigator.language]) {
    if (/^zh\b/i.test(lang)) return 'zh-CN';
    if (/^en\b/i.test(lang)) return 'en';
  }
  return 'en';
}

export let locale = initial();

/** Switch the language and remember it. */
export function setLocale(next) {
  locale = STRINGS[next] ? next : 'en';
  try { localStorage.setItem(KEY, locale); } catch { /* not remembered */ }
  document.documentElement.lang = locale;
}

/** The text of `key` with `{name}` placeholders filled from `vars`. */
export function t(key, vars) {
  const text = STRINGS[locale][key] ?? EN[key] ?? key;
  return vars ? text.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m)) : text;
}

/** Whether `key` has a text (used for codes the page may not know). */
export function has(key) {
  return key in EN;
}

/** What people read for an enum value of parameter `p` (the registry's value titles). */
export function valueTitle(p, value) {
  const titles = locale === 'zh-CN' ? p?.valueTitlesZh : p?.valueTitles;
  return titles?.[value] ?? String(value);
}

/** Add texts (a view loaded later brings its own). */
export function extend(en, zh) {
  Object.assign(EN, en);
  Object.assign(ZH, zh);
}

/** The keys of `keys` that lack a text in English or in Chinese (for the tests). */
export function lacking(keys) {
  return keys.filter((key) => !(key in EN) || !(key in ZH));
}

// Codes only a stale page or a bug can cause: one sentence says to reload.
const PAGE_CODES = new Set(['REPEATED_PARAMETER', 'MALFORMED_JSON', 'BODY_REQUIRED', 'INVALID_BODY',
  'DUPLICATE_KEY', 'REPEATED_HEADER', 'UNSUPPORTED_MEDIA_TYPE', 'UNKNOWN_FIELD', 'INVALID_TYPE',
  'IDEMPOTENCY_KEY_MISMATCH', 'INVALID_IDEMPOTENCY_KEY', 'PARAMETERS_TOO_DEEP', 'INVALID_STATE',
  'INVALID_CURSOR', 'METHOD_NOT_ALLOWED', 'HTTP_ERROR']);

/** The text key of an API error `code` at `field` (most specific first), or null. */
export function errorKey(code, field) {
  if (!code) return null;
  if (PAGE_CODES.has(code)) return 'err.PAGE';
  const group = field && field.startsWith('parameters.') ? 'parameters' : field;
  for (const key of [`err.${code}.${field}`, `err.${code}.${group}`, `err.${code}`]) {
    if (key in EN) return key;
  }
  return null;
}

/** Fill every element with a `data-t` attribute. */
export function translatePage(root = document) {
  document.documentElement.lang = locale;
  for (const el of root.querySelectorAll('[data-t]')) el.textContent = t(el.dataset.t);
  for (const el of root.querySelectorAll('[data-t-label]')) el.setAttribute('aria-label', t(el.dataset.tLabel));
}

const cache = new Map();
function cached(kind, options, make) {
  const key = `${locale}|${kind}|${JSON.stringify(options)}`;
  if (!cache.has(key)) cache.set(key, make());
  return cache.get(key);
}

export function number(value, options = {}) {
  return cached('n', options, () => new Intl.NumberFormat(locale, options)).format(value);
}

export function percent(fraction) {
  return number(fraction, { style: 'percent', maximumFractionDigits: 0 });
}

const DAY = { year: 'numeric', month: 'numeric', day: 'numeric' }; // 4-digit years

/** A date-time in the browser's time zone (`iso` is UTC ISO 8601). */
export function dateTime(iso) {
  if (!iso) return '';
  const options = { ...DAY, hour: 'numeric', minute: '2-digit', second: '2-digit' };
  return cached('dt', options, () => new Intl.DateTimeFormat(locale, options)).format(new Date(iso));
}

/** A date-time without seconds (far-away moments: when a file expires). */
export function dateTimeShort(iso) {
  if (!iso) return '';
  const options = { ...DAY, hour: 'numeric', minute: '2-digit' };
  return cached('ds', options, () => new Intl.DateTimeFormat(locale, options)).format(new Date(iso));
}

export function date(value) {
  const options = { dateStyle: 'medium' };
  return cached('d', options, () => new Intl.DateTimeFormat(locale, options)).format(value);
}

/** Hours and minutes ("17:50", "5:50 PM"): a moment of today. */
export function clock(date) {
  const options = { hour: 'numeric', minute: '2-digit' };
  return cached('c', options, () => new Intl.DateTimeFormat(locale, options)).format(date);
}

export function time(date) {
  const options = { timeStyle: 'medium' };
  return cached('t', options, () => new Intl.DateTimeFormat(locale, options)).format(date);
}

export function bytes(count) {
  if (count == null) return '';
  const units = ['byte', 'kilobyte', 'megabyte', 'gigabyte'];
  let value = count;
  let i = 0;
  while (value >= 1000 && i < units.length - 1) { value /= 1000; i += 1; }
  // Bytes in full ("135 bytes", "135字节"): the short form of the unit is "byte" in English.
  return number(value, { style: 'unit', unit: units[i], unitDisplay: i ? 'short' : 'long', maximumFractionDigits: i ? 1 : 0 });
}

/** A duration in seconds as "1 min 5 sec" / "1分钟5秒". */
export function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  const unit = (value, name) => number(value, { style: 'unit', unit: name, unitDisplay: 'short' });
  const parts = s < 60 ? [unit(s, 'second')]
    : s < 3600 ? [unit(Math.floor(s / 60), 'minute'), s % 60 ? unit(s % 60, 'second') : '']
      : [unit(Math.floor(s / 3600), 'hour'), unit(Math.floor((s % 3600) / 60), 'minute')];
  return parts.filter(Boolean).join(locale === 'zh-CN' ? '' : ' ');
}

/** The browser's IANA time zone. */
export const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
