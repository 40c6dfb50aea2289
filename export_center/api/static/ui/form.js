// The "New export" dialog, built from GET /api/v1/export-types. The page checks what it
// can before sending (incomplete dates, the date range) and shows every mistake at once;
// the API still judges, and its 422 answers are shown at the field they name, in the
// page's language.

import { $, h } from './dom.js';
import * as i18n from './i18n.js';
import { ApiError, Unreachable, call } from './api.js';
import { FileChoices, optionTarget } from './choices.js';
import { Preview } from './preview.js';

const { t } = i18n;
const LAST_TYPE = 'ec.lastType';

// Common zones, with the names people use for them.
const ZONES = [
  ['UTC', 'UTC', '协调世界时'],
  ['Asia/Shanghai', 'China (Beijing time)', '北京时间'],
  ['Asia/Hong_Kong', 'Hong Kong', '香港时间'],
  ['Asia/Taipei', 'Taipei', '台北时间'],
  ['Asia/Tokyo', 'Tokyo', '东京时间'],
  ['Asia/Seoul', 'Seoul', '首尔时间'],
  ['Asia/Singapore', 'Singapore', '新加坡时间'],
  ['Asia/Bangkok', 'Bangkok', '曼谷时间'],
  ['Asia/Kolkata', 'India', '印度时间'],
  ['Asia/Dubai', 'Dubai', '迪拜时间'],
  ['Europe/Moscow', 'Moscow', '莫斯科时间'],
  ['Europe/Berlin', 'Berlin', '柏林时间'],
  ['Europe/Paris', 'Paris', '巴黎时间'],
  ['Europe/London', 'London', '伦敦时间'],
  ['America/New_York', 'New York', '纽约时间'],
  ['America/Chicago', 'Chicago', '芝加哥时间'],
  ['America/Denver', 'Denver', '丹佛时间'],
  ['America/Los_Angeles', 'Los Angeles', '洛杉矶时间'],
  ['America/Sao_Paulo', 'São Paulo', '圣保罗时间'],
  ['Australia/Sydney', 'Sydney', '悉尼时间'],
];

function uuid() {
  if (globalThis.crypto?.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16)); // plain http on a LAN address
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, '0')).join('');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** "UTC+8" for a zone now (empty when the browser cannot tell). */
function offset(zone) {
  try {
    const part = new Intl.DateTimeFormat('en', { timeZone: zone, timeZoneName: 'shortOffset' })
      .formatToParts(new Date()).find((p) => p.type === 'timeZoneName');
    return part ? part.value.replace('GMT', 'UTC').replace(/^UTC$/, 'UTC±0') : '';
  } catch {
    return '';
  }
}

function zoneLabel(zone) {
  const known = ZONES.find(([z]) => z === zone);
  const name = known ? known[i18n.locale === 'zh-CN' ? 2 : 1] : zone;
  const off = offset(zone);
  if (zone === 'UTC') return i18n.locale === 'zh-CN' ? `${name}（UTC）` : 'UTC';
  const bits = known ? [off, zone] : [off];
  return i18n.locale === 'zh-CN' ? `${name}（${bits.filter(Boolean).join('，')}）` : `${name} (${bits.filter(Boolean).join(', ')})`;
}

/** The text and, only for a code the page does not know, the server's sentence;
 * `vars` fill the text's placeholders (`{column}` of UNKNOWN_COLUMN). */
export function describe(error, vars) {
  if (error instanceof Unreachable) {
    return { text: t(error.reason === 'network' ? 'offline' : `offline.${error.reason}`), detail: null };
  }
  if (!(error instanceof ApiError)) return { text: t('err.5xx'), detail: null };
  const key = i18n.errorKey(error.code, error.field);
  let text = t(key || (error.status >= 500 ? 'err.5xx' : 'err.4xx'), vars);
  if (error.retryAt) text += ` ${t('tryAgainAt', { time: i18n.time(error.retryAt) })}`;
  return { text, detail: key ? null : error.detail };
}

/** The error message, with the server's sentence as a secondary line when there is one. */
export function errorNodes({ text, detail }) {
  return [h('span', {}, text), detail ? h('span', { class: 'detail', lang: 'en' }, t('detail', { message: detail })) : null].filter(Boolean);
}

export class CreateForm {
  /** @param {object} ctx `{typeTitle, onCreated(answer, body), onUnauthorized(error), onUnreachable(reason)}` */
  constructor(ctx) {
    this.ctx = ctx;
    this.types = [];
    this.dialog = $('create');
    this.form = $('create-form');
    this.select = $('c-type');
    this.submitButton = $('create-submit');
    this.pending = null;
    this.busy = false;
    this.shown = new Map(); // field id -> whose error it shows: 'page' or 'server'
    this.form.addEventListener('submit', (event) => this.submit(event));
    $('create-close').addEventListener('click', () => this.dialog.close());
    this.select.addEventListener('change', () => this.build());
    for (const kind of ['input', 'change']) this.form.addEventListener(kind, (event) => this.edited(event));
    this.choices = new FileChoices(this.form);
    this.preview = new Preview({
      body: () => this.previewBody(),
      check: () => this.checked(),
      spec: () => this.type(),
      describe: (error) => describe(error, this.errorVars(error)),
      showError: (error) => { this.showError(describe(error, this.errorVars(error)), error); return true; },
      choices: this.choices,
      hasFormat: (format) => Boolean(this.form.querySelector(`input[name="format"][value="${format}"]`)),
      fix: (kind, value) => this.fix(kind, value),
      onUnauthorized: (error) => ctx.onUnauthorized(error),
    });
  }

  setTypes(types) {
    this.types = types;
    this.relabel();
  }

  type() {
    return this.types.find((x) => x.exportType === this.select.value) || this.types[0];
  }

  relabel() {
    const current = this.select.value;
    this.select.replaceChildren(...this.types.map((x) => h('option', { value: x.exportType }, this.ctx.typeTitle(x.exportType))));
    if (current) this.select.value = current;
    this.zones($('c-tz').value);
    if (this.dialog.open) {
      const values = this.values();
      this.build();
      this.fill(values);
      this.preview.relabel();
    }
  }

  /** The zone choice: common zones, this browser's, and `keep` (an earlier export's). */
  zones(keep) {
    const list = ZONES.map(([zone]) => zone);
    for (const zone of [i18n.browserZone, keep]) if (zone && !list.includes(zone)) list.push(zone);
    const select = $('c-tz');
    select.replaceChildren(...list.map((zone) => h('option', { value: zone }, zoneLabel(zone))));
    select.value = keep || i18n.browserZone;
  }

  /** Open the form, empty or filled from an earlier export ("export again"). */
  open(prefill) {
    this.pending = null;
    this.form.reset();
    this.clearErrors();
    this.choices.reset();
    this.preview.clear();
    let last = prefill?.exportType;
    try { last ||= localStorage.getItem(LAST_TYPE); } catch { /* storage off */ }
    if (last && this.types.some((x) => x.exportType === last)) this.select.value = last;
    this.build();
    this.zones(prefill?.timeZone || i18n.browserZone);
    if (prefill) {
      this.fill(prefill.parameters || {});
      // A name the page made up follows the new filters; a name a person gave is kept.
      if (!this.madeUp(prefill.taskName)) $('c-name').value = prefill.taskName || '';
      const radio = this.form.querySelector(`input[name="format"][value="${prefill.format}"]`);
      if (radio) radio.checked = true;
      this.choices.restore(prefill.columns, prefill.options);
    }
    this.placeholder();
    this.dialog.showModal();
    this.select.focus();
  }

  /** Parameter fields of the chosen type. */
  build() {
    const spec = this.type();
    if (!spec) return;
    const range = spec.dateRange || [];
    const fields = spec.parameters.map((p) => this.field(p));
    $('c-param-fields').replaceChildren(...fields);
    $('c-params').hidden = !fields.length;
    $('c-range-hint').hidden = !range.length;
    $('c-type-hint').textContent = t('maxRows', { n: i18n.number(spec.maxRows) });
    this.choices.formats(spec);
    this.choices.load(spec);
    if (range.length === 2) {
      const [from, to] = range.map((name) => $(`c-param-${name}`));
      // The date-range rule, shown by the pickers. Only the other field changes:
      // resetting min/max of the field being typed in loses keystrokes.
      // Nor is a half-typed date touched: a new min/max would wipe what was typed so far.
      from.addEventListener('input', () => { if (!to.validity.badInput) to.min = from.value; });
      to.addEventListener('input', () => { if (!from.validity.badInput) from.max = to.value; });
    }
    for (const id of [...this.shown.keys()]) if (!$(id)) this.shown.delete(id);
    this.placeholder();
  }

  field(p) {
    const id = `c-param-${p.name}`;
    const label = i18n.locale === 'zh-CN' ? p.titleZh : p.title;
    const common = { id, name: p.name, 'aria-describedby': `${id}-error`, required: p.required };
    let control;
    if (p.type === 'date') control = h('input', { ...common, type: 'date' });
    else if (p.type === 'enum' || p.type === 'boolean') {
      const values = p.type === 'enum' ? p.values.map((v) => [v, i18n.valueTitle(p, v)]) : [['true', t('yes')], ['false', t('no')]];
      control = h('select', common, p.required ? null : h('option', { value: '' }, t('anyValue')), values.map(([v, text]) => h('option', { value: v }, text)));
    } else if (p.type === 'integer') control = h('input', { ...common, type: 'number', step: '1', inputmode: 'numeric' });
    else control = h('input', { ...common, maxlength: '256' });
    return h(
      'div',
      { class: 'field' },
      h('label', { for: id }, label, p.required ? h('span', { class: 'req' }, t('requiredMark')) : null),
      control,
      h('p', { class: 'error', id: `${id}-error`, hidden: true }),
    );
  }

  values() {
    const out = {};
    const spec = this.type();
    for (const p of spec?.parameters || []) {
      const el = $(`c-param-${p.name}`);
      const raw = el ? el.value.trim() : '';
      if (!raw) continue;
      if (p.type === 'integer') out[p.name] = /^-?\d+$/.test(raw) ? Number(raw) : raw;
      else if (p.type === 'boolean') out[p.name] = raw === 'true';
      else out[p.name] = raw;
    }
    return out;
  }

  fill(parameters) {
    for (const [name, value] of Object.entries(parameters)) {
      const el = $(`c-param-${name}`);
      if (el) el.value = String(value);
    }
    for (const el of $('c-param-fields').querySelectorAll('input')) el.dispatchEvent(new Event('input'));
  }

  /** The name the page gives an export left unnamed: the type and its dates. */
  defaultName(spec = this.type(), params = this.values(), title = this.ctx.typeTitle(spec?.exportType)) {
    if (!spec) return '';
    const [from, to] = (spec.dateRange || []).map((name) => params[name]);
    if (from && to) return `${title} ${from} – ${to}`;
    if (from) return `${title} ${t('rangeFrom', { d: from })}`;
    if (to) return `${title} ${t('rangeTo', { d: to })}`;
    if (spec.dateRange) return t('nameAllDates', { title });
    return `${title} ${i18n.date(new Date())}`;
  }

  /** Whether `name` is the one the page would make for the export in the form. */
  madeUp(name) {
    const spec = this.type();
    return !name || (spec && [spec.title, spec.titleZh].some((title) => name === this.defaultName(spec, this.values(), title)));
  }

  placeholder() {
    $('c-name').placeholder = this.defaultName();
  }

  body() {
    const format = this.form.querySelector('input[name="format"]:checked')?.value || 'xlsx';
    return {
      exportType: this.select.value,
      format,
      taskName: $('c-name').value.trim() || this.defaultName(),
      parameters: this.values(),
      timeZone: $('c-tz').value || i18n.browserZone,
      ...this.choices.body(format),
    };
  }

  /** The create body as the preview takes it (no name: it names no task). */
  previewBody() {
    const { taskName, ...body } = this.body();
    return body;
  }

  /** What the page can tell is wrong before sending: `Map(fieldId -> text)`. */
  check() {
    const problems = new Map();
    const spec = this.type();
    for (const p of spec?.parameters || []) {
      const el = $(`c-param-${p.name}`);
      if (!el) continue;
      if (el.validity?.badInput) problems.set(el.id, t(p.type === 'date' ? 'incompleteDate' : 'err.INVALID_VALUE'));
      else if (p.required && !el.value.trim()) problems.set(el.id, t('required'));
    }
    const [a, b] = (spec?.dateRange || []).map((name) => $(`c-param-${name}`));
    if (a && b && a.value && b.value && a.value > b.value && !problems.has(a.id)) problems.set(a.id, t('err.INVALID_DATE_RANGE'));
    for (const [id, text] of this.choices.check(spec?.maxRows)) problems.set(id, text);
    return problems;
  }

  /** Check the form as it is and show every problem (focus on the first): ok or not. */
  checked() {
    this.clearErrors();
    const problems = this.check();
    if (!problems.size) return true;
    for (const [id, text] of problems) this.showAt(id, { text }, 'page');
    this.focusAt([...problems.keys()][0]);
    return false;
  }

  /** A preview's one-click fix: switch to CSV, split, or narrow the date range. */
  fix(kind, value) {
    if (kind === 'csv') {
      this.choices.choose('csv');
      this.choices.announce(t('fixedCsv'));
      this.edited({ target: this.form.querySelector('input[name="format"]:checked') });
      return this.preview.run();
    }
    if (kind === 'split') {
      this.choices.splitInto(value);
      this.choices.announce(t('fixedSplit', { n: i18n.number(value) }));
      this.edited({ target: $('c-split-rows') });
      return this.preview.run();
    }
    const [from] = this.type()?.dateRange || [];
    const field = from ? $(`c-param-${from}`) : null;
    this.preview.note(t('fixedNarrow'));
    field?.focus();
    return undefined;
  }

  /** Placeholders of an error's text: the column an error of `columns[i]` names. */
  errorVars(error) {
    const match = /^columns\[(\d+)\]/.exec(error?.field || '');
    return match ? { column: this.choices.sentColumn(Number(match[1])) } : undefined;
  }

  /** Focus the control that `id` (a field id of the form) stands for. */
  focusAt(id) {
    if (id === 'c-format') return this.form.querySelector('input[name="format"]:checked')?.focus();
    if (id === 'c-columns') return $('c-column-list').querySelector('input')?.focus();
    return $(id)?.focus();
  }

  /** A field changed: its server error is stale, and the page's own check runs again. */
  edited(event) {
    if (event.target === this.select) return;
    if (event.target.id === 'c-name' || event.target.closest?.('#c-params')) this.placeholder();
    this.preview.edited();
    if (!this.shown.size) return;
    const id = this.fieldOf(event.target);
    const problems = this.check();
    for (const [shown, kind] of [...this.shown]) {
      if (problems.has(shown) && (kind === 'page' || shown === id)) this.showAt(shown, { text: problems.get(shown) }, 'page');
      else if (kind === 'page' || shown === id) this.clearAt(shown);
    }
  }

  async submit(event) {
    event.preventDefault();
    if (this.busy) return; // a double click or a second Enter: one task
    if (!this.checked()) return;
    const body = this.body();
    const fingerprint = JSON.stringify(body);
    // One idempotency key per submission; the same content sent again after a lost
    // answer keeps its key, so the server answers with the task it already made.
    if (this.pending?.fingerprint !== fingerprint) this.pending = { fingerprint, requestId: uuid() };
    body.requestId = this.pending.requestId;
    this.busy = true;
    this.submitButton.disabled = true;
    this.submitButton.textContent = t('creating');
    this.form.setAttribute('aria-busy', 'true');
    try {
      const answer = await call('/api/v1/exports', { method: 'POST', body });
      this.pending = null;
      try { localStorage.setItem(LAST_TYPE, body.exportType); } catch { /* not remembered */ }
      this.dialog.close();
      this.ctx.onCreated(answer, body);
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) this.ctx.onUnauthorized(error);
      else if (error instanceof Unreachable) {
        this.showError({ text: t(error.reason === 'network' ? 'createOffline' : `createOffline.${error.reason}`) });
        this.ctx.onUnreachable(error.reason);
      } else this.showError(describe(error, this.errorVars(error)), error);
    } finally {
      this.busy = false;
      this.submitButton.disabled = false;
      this.submitButton.textContent = t('create');
      this.form.removeAttribute('aria-busy');
    }
  }

  target(field) {
    if (!field) return null;
    if (field === 'exportType') return 'c-type';
    if (field === 'taskName') return 'c-name';
    if (field === 'timeZone') return 'c-tz';
    if (field === 'format') return 'c-format';
    const option = optionTarget(field);
    if (option) return option;
    const match = /^parameters\.([^.[\]]+)/.exec(field);
    return match && $(`c-param-${match[1]}`) ? `c-param-${match[1]}` : null;
  }

  /** The field id whose error an edit of `el` makes stale. */
  fieldOf(el) {
    if (el?.name === 'format') return 'c-format';
    if (el?.closest?.('#c-columns')) return 'c-columns';
    if (el?.id === 'c-split') return 'c-split-rows';
    return el?.id;
  }

  /** An error of the server: at its field when the page has one, else above the form. */
  showError(message, error) {
    const id = error instanceof ApiError ? this.target(error.field) : null;
    if (id) {
      this.showAt(id, message, 'server');
      this.focusAt(id);
    } else {
      const box = $('create-error');
      box.replaceChildren(...errorNodes(message));
      box.hidden = false;
    }
  }

  showAt(id, message, kind) {
    const box = $(`${id}-error`);
    box.replaceChildren(...errorNodes(message));
    box.hidden = false;
    this.shown.set(id, kind);
    const input = id === 'c-format' ? null : $(id);
    if (!input) return;
    input.setAttribute('aria-invalid', 'true');
    const described = new Set((input.getAttribute('aria-describedby') || '').split(' ').filter(Boolean));
    described.add(`${id}-error`);
    input.setAttribute('aria-describedby', [...described].join(' '));
  }

  clearAt(id) {
    const box = $(`${id}-error`);
    if (box) {
      box.hidden = true;
      box.replaceChildren();
    }
    $(id)?.removeAttribute('aria-invalid');
    this.shown.delete(id);
  }

  clearErrors() {
    for (const box of this.form.querySelectorAll('.error')) {
      box.hidden = true;
      box.replaceChildren();
    }
    for (const el of this.form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    this.shown.clear();
  }
}
