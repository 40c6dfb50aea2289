// The "New export" dialog, built from GET /api/v1/export-types. The API is the one
// judge of the input: its 422 answers are shown at the field they name.

import { $, h } from './dom.js';
import * as i18n from './i18n.js';
import { ApiError, Unreachable, call } from './api.js';

const { t } = i18n;
const LAST_TYPE = 'ec.lastType';

function uuid() {
  if (globalThis.crypto?.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16)); // plain http on a LAN address
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, '0')).join('');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** The text and the server's sentence for an API error (`{text, detail}`). */
export function describe(error) {
  if (error instanceof Unreachable) return { text: t('offline'), detail: null };
  if (!(error instanceof ApiError)) return { text: t('err.5xx'), detail: null };
  let text = error.code && i18n.has(`err.${error.code}`)
    ? t(`err.${error.code}`)
    : t(error.status >= 500 ? 'err.5xx' : 'err.4xx');
  if (error.retryAt) text += ` ${t('tryAgainAt', { time: i18n.time(error.retryAt) })}`;
  return { text, detail: error.detail };
}

export class CreateForm {
  /** @param {object} ctx `{typeTitle, onCreated(answer, body), onUnauthorized(error), onUnreachable()}` */
  constructor(ctx) {
    this.ctx = ctx;
    this.types = [];
    this.dialog = $('create');
    this.form = $('create-form');
    this.select = $('c-type');
    this.submitButton = $('create-submit');
    this.pending = null;
    this.busy = false;
    this.form.addEventListener('submit', (event) => this.submit(event));
    $('create-close').addEventListener('click', () => this.dialog.close());
    this.select.addEventListener('change', () => this.build());
    this.form.addEventListener('input', () => this.placeholder());
    const zones = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
    $('zones').replaceChildren(...['UTC', ...zones].map((zone) => h('option', { value: zone })));
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
    if (this.dialog.open) {
      const values = this.values();
      this.build();
      this.fill(values);
    }
  }

  /** Open the form, empty or filled from an earlier export ("export again"). */
  open(prefill) {
    this.pending = null;
    this.clearErrors();
    this.form.reset();
    let last = prefill?.exportType;
    try { last ||= localStorage.getItem(LAST_TYPE); } catch { /* storage off */ }
    if (last && this.types.some((x) => x.exportType === last)) this.select.value = last;
    this.build();
    $('c-tz').value = prefill?.timeZone || i18n.browserZone;
    if (prefill) {
      this.fill(prefill.parameters || {});
      $('c-name').value = prefill.taskName || '';
      const radio = this.form.querySelector(`input[name="format"][value="${prefill.format}"]`);
      if (radio) radio.checked = true;
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
    for (const radio of this.form.querySelectorAll('input[name="format"]')) radio.disabled = !spec.formats.includes(radio.value);
    if (range.length === 2) {
      const [from, to] = range.map((name) => $(`c-param-${name}`));
      // The date-range rule, shown by the pickers (the API still judges). Only the other
      // field changes: resetting min/max of the field being typed in loses keystrokes.
      from.addEventListener('input', () => { to.min = from.value; });
      to.addEventListener('input', () => { from.max = to.value; });
    }
    this.placeholder();
  }

  field(p) {
    const id = `c-param-${p.name}`;
    const label = i18n.locale === 'zh-CN' ? p.titleZh : p.title;
    const common = { id, name: p.name, 'aria-describedby': `${id}-error`, required: p.required };
    let control;
    if (p.type === 'date') control = h('input', { ...common, type: 'date' });
    else if (p.type === 'enum' || p.type === 'boolean') {
      const values = p.type === 'enum' ? p.values.map((v) => [v, v]) : [['true', t('yes')], ['false', t('no')]];
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

  defaultName() {
    const spec = this.type();
    if (!spec) return '';
    const params = this.values();
    const range = (spec.dateRange || []).map((name) => params[name]).filter(Boolean);
    const when = range.length ? range.join(' – ') : i18n.date(new Date());
    return `${this.ctx.typeTitle(spec.exportType)} ${when}`;
  }

  placeholder() {
    $('c-name').placeholder = this.defaultName();
  }

  body() {
    const format = this.form.querySelector('input[name="format"]:checked');
    return {
      exportType: this.select.value,
      format: format ? format.value : 'xlsx',
      taskName: $('c-name').value.trim() || this.defaultName(),
      parameters: this.values(),
      timeZone: $('c-tz').value.trim() || i18n.browserZone,
    };
  }

  async submit(event) {
    event.preventDefault();
    if (this.busy) return; // a double click or a second Enter: one task
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
    this.clearErrors();
    try {
      const answer = await call('/api/v1/exports', { method: 'POST', body });
      this.pending = null;
      try { localStorage.setItem(LAST_TYPE, body.exportType); } catch { /* not remembered */ }
      this.dialog.close();
      this.ctx.onCreated(answer, body);
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) this.ctx.onUnauthorized(error);
      else this.showError(error);
      if (error instanceof Unreachable) this.ctx.onUnreachable();
    } finally {
      this.busy = false;
      this.submitButton.disabled = false;
      this.submitButton.textContent = t('create');
      this.form.removeAttribute('aria-busy');
    }
  }

  target(field) {
    if (!field) return null;
    if (field === 'exportType') return ['c-type', $('c-type')];
    if (field === 'taskName') return ['c-name', $('c-name')];
    if (field === 'timeZone') return ['c-tz', $('c-tz')];
    if (field === 'format') return ['c-format', this.form.querySelector('input[name="format"]:checked')];
    const match = /^parameters\.([^.[\]]+)/.exec(field);
    if (match && $(`c-param-${match[1]}`)) return [`c-param-${match[1]}`, $(`c-param-${match[1]}`)];
    return null;
  }

  showError(error) {
    const { text, detail } = describe(error);
    const target = error instanceof ApiError ? this.target(error.field) : null;
    const box = target ? $(`${target[0]}-error`) : $('create-error');
    box.replaceChildren(h('span', {}, text), detail ? h('span', { class: 'detail', lang: 'en' }, t('detail', { message: detail })) : null);
    box.hidden = false;
    if (target) {
      target[1].setAttribute('aria-invalid', 'true');
      const described = new Set((target[1].getAttribute('aria-describedby') || '').split(' ').filter(Boolean));
      described.add(`${target[0]}-error`);
      target[1].setAttribute('aria-describedby', [...described].join(' '));
      target[1].focus();
    } else {
      box.focus?.();
    }
  }

  clearErrors() {
    for (const box of this.form.querySelectorAll('.error')) {
      box.hidden = true;
      box.replaceChildren();
    }
    for (const el of this.form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  }
}
