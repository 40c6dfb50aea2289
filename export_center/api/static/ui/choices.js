// The file choices of the "New export" dialog: the formats of the type, the column picker
// (choose, reorder, rename, select all / none) and the file options (heading language,
// CSV encoding, delimiter, heading row, line ending, compression, split).
//
// The columns come from GET /api/v1/export-types/{type}. An older export center has no
// such endpoint: the picker and the options then stay hidden and the create body is the
// one it knows (exportType, format, taskName, parameters, timeZone).

import { $, h } from './dom.js';
import * as i18n from './i18n.js';
import { call } from './api.js';
import './files_i18n.js';

const { t } = i18n;

/** The formats, in the order the dialog offers them. */
export const FORMATS = ['xlsx', 'csv', 'jsonl', 'parquet'];
const GZIP_FORMATS = ['csv', 'jsonl'];
const OLD_FORMATS = ['csv', 'xlsx']; // what a server without file options writes
const ENCODINGS = ['utf-8-bom', 'utf-8', 'gb18030'];
const DELIMITERS = [[',', 'comma'], [';', 'semicolon'], ['\t', 'tab'], ['|', 'pipe']];
const LINE_ENDINGS = ['crlf', 'lf'];
const COMPRESSIONS = ['none', 'gzip', 'zip'];
const LANGUAGES = ['en', 'zh-CN'];
/** Rows per file offered first: a full Excel sheet holds 1,048,575 rows under its heading. */
export const DEFAULT_SPLIT_ROWS = 1000000;

/** The id of the page's field that a create/preview error's `field` names, or null. */
export function optionTarget(field) {
  if (!field) return null;
  if (field === 'columns' || /^columns\[\d+\]/.test(field)) return 'c-columns';
  const ids = {
    'options.language': 'c-language',
    'options.encoding': 'c-encoding',
    'options.delimiter': 'c-delimiter',
    'options.header': 'c-header',
    'options.lineEnding': 'c-line-ending',
    'options.compression': 'c-compression',
  };
  if (ids[field]) return ids[field];
  if (field.startsWith('options.split')) return 'c-split-rows';
  return null;
}

export class FileChoices {
  /** @param {HTMLFormElement} form the create form (its inputs raise input/change events) */
  constructor(form) {
    this.form = form;
    this.details = new Map(); // exportType -> the answer of GET /export-types/{type}, or null
    this.detail = null; // the chosen type's answer (null: an older server, or not known)
    this.columns = []; // [{key, title, titles, type, chosen, rename}] in output order
    this.language = ''; // '' follows the page
    $('c-columns-all').addEventListener('click', () => this.chooseAll(true));
    $('c-columns-none').addEventListener('click', () => this.chooseAll(false));
    $('c-split').addEventListener('change', () => this.sync());
    $('c-language').addEventListener('change', (e) => { this.language = e.target.value; this.relabelColumns(); });
    $('c-format-choices').addEventListener('change', () => this.sync());
  }

  /** The format radios of `spec` (its `formats`, else the four), keeping the choice. */
  formats(spec, keep) {
    const offered = Array.isArray(spec?.formats) && spec.formats.length ? spec.formats : FORMATS;
    const list = [...FORMATS.filter((f) => offered.includes(f)), ...offered.filter((f) => !FORMATS.includes(f))];
    const current = keep || this.format();
    const chosen = list.includes(current) ? current : list[0];
    $('c-format-choices').replaceChildren(...list.map((value) => h(
      'label',
      {},
      h('input', { type: 'radio', name: 'format', value, checked: value === chosen, defaultChecked: value === list[0] }),
      ' ',
      h('span', { dataset: { t: `format.${value}` } }, i18n.has(`format.${value}`) ? t(`format.${value}`) : value),
    )));
    this.sync();
  }

  format() {
    return this.form.querySelector('input[name="format"]:checked')?.value || 'xlsx';
  }

  /** Ask the server for the type's columns (once per type); builds the picker.
   *
   * Only a server that knows the file options is asked: one whose list answer has the
   * type's `columns` already, or whose formats go beyond CSV and Excel (JSON Lines and
   * Parquet came with columns and options). An older server is not sent a request it
   * would answer 404 to; its dialog stays as it was. */
  async load(spec) {
    const exportType = spec?.exportType;
    if (!exportType) return;
    if (!this.details.has(exportType)) {
      let answer = null;
      const formats = Array.isArray(spec.formats) ? spec.formats : [];
      if (Array.isArray(spec.columns)) answer = spec;
      else if (formats.some((f) => !OLD_FORMATS.includes(f))) {
        try {
          answer = (await call(`/api/v1/export-types/${encodeURIComponent(exportType)}`)).data;
        } catch {
          answer = null; // out of reach, or refused: the dialog works without
        }
      }
      this.details.set(exportType, answer && typeof answer === 'object' ? answer : null);
    }
    if ($('c-type').value !== exportType) return; // another type was chosen meanwhile
    this.detail = this.details.get(exportType);
    const declared = Array.isArray(this.detail?.columns) ? this.detail.columns : [];
    this.columns = declared.filter((c) => c && typeof c.key === 'string').map((c) => ({ ...c, chosen: true, rename: '' }));
    this.render();
    this.applyRestore();
  }

  /** Take the columns and options of an earlier export ("export again"): applied as
   * soon as its type's columns are known (now, or when `load` answers). */
  restore(columns, options) {
    this.pendingRestore = { columns: Array.isArray(columns) ? columns : [], options: options || {} };
    if (this.detail) this.applyRestore();
  }

  applyRestore() {
    const restore = this.pendingRestore;
    if (!restore || !this.detail) return;
    this.pendingRestore = null;
    const chosen = restore.columns.map((c) => (typeof c === 'string' ? { key: c } : c));
    if (chosen.length) {
      const order = chosen.map((c) => c.key);
      const declared = this.detail.columns.map((c) => c.key);
      for (const c of this.columns) {
        const at = order.indexOf(c.key);
        c.chosen = at >= 0;
        c.rename = at >= 0 ? chosen[at].title || '' : '';
      }
      // The chosen ones in their order, then the others in the declared order.
      const rank = (c) => (order.includes(c.key) ? order.indexOf(c.key) : order.length + declared.indexOf(c.key));
      this.columns.sort((a, b) => rank(a) - rank(b));
    }
    const o = restore.options;
    const set = (id, value) => { if (value !== undefined && value !== null && $(id)) $(id).value = String(value); };
    if (o.language) { this.language = o.language; set('c-language', o.language); }
    set('c-encoding', o.encoding);
    set('c-delimiter', o.delimiter);
    set('c-line-ending', o.lineEnding);
    set('c-compression', o.compression);
    if (typeof o.header === 'boolean') $('c-header').checked = o.header;
    const rows = o.split?.maxRowsPerFile;
    $('c-split').checked = Boolean(rows);
    if (rows) $('c-split-rows').value = String(rows);
    this.render();
  }

  /** Back to the defaults (a new dialog), keeping what the type answered. */
  reset() {
    this.language = '';
    this.pendingRestore = null;
    for (const c of this.columns) { c.chosen = true; c.rename = ''; }
    const declared = Array.isArray(this.detail?.columns) ? this.detail.columns.map((c) => c.key) : [];
    this.columns.sort((a, b) => declared.indexOf(a.key) - declared.indexOf(b.key));
    $('c-split').checked = false;
    $('c-split-rows').value = String(DEFAULT_SPLIT_ROWS);
    $('c-header').checked = true;
    this.render();
  }

  /** Whether the server knows the file options (it answered the type's detail). */
  get supported() {
    return Boolean(this.detail);
  }

  headerLanguage() {
    return this.language || i18n.locale;
  }

  titleOf(column, language = this.headerLanguage()) {
    const titles = column.titles && typeof column.titles === 'object' ? column.titles : {};
    return titles[language] || column.title || column.key;
  }

  render() {
    const picker = $('c-columns');
    picker.hidden = !this.columns.length;
    $('c-options').hidden = !this.supported;
    this.selects();
    const items = this.columns.map((c, i) => this.item(c, i));
    $('c-column-list').replaceChildren(...items);
    this.count();
    this.sync();
  }

  item(column, index) {
    const name = this.titleOf(column);
    const id = `c-col-${index}`;
    const last = this.columns.length - 1;
    const arrow = (step) => h('button', {
      type: 'button',
      class: 'btn small icon-only',
      dataset: { move: String(step), key: column.key },
      'aria-label': t(step < 0 ? 'moveUpLabel' : 'moveDownLabel', { name }),
      title: t(step < 0 ? 'moveUp' : 'moveDown'),
      'aria-disabled': (step < 0 ? index === 0 : index === last) ? 'true' : null,
      onclick: (event) => this.move(column.key, step, event.currentTarget),
    }, step < 0 ? '↑' : '↓');
    return h(
      'li',
      { class: `column-item${column.chosen ? '' : ' is-off'}`, dataset: { key: column.key } },
      h('input', {
        type: 'checkbox',
        id,
        checked: column.chosen,
        'aria-label': t('chooseLabel', { name }),
        onchange: (event) => { column.chosen = event.target.checked; event.target.closest('li').classList.toggle('is-off', !column.chosen); this.count(); },
      }),
      h('input', {
        type: 'text',
        class: 'column-title',
        value: column.rename,
        placeholder: name,
        maxlength: '100',
        'aria-label': t('renameLabel', { name }),
        oninput: (event) => { column.rename = event.target.value; },
      }),
      h('span', { class: 'sub column-type' }, i18n.has(`type.${column.type}`) ? t(`type.${column.type}`) : ''),
      h('span', { class: 'column-moves' }, arrow(-1), arrow(1)),
    );
  }

  /** Move `key` one place up (-1) or down (+1); the focus stays on the pressed arrow. */
  move(key, step, button) {
    const from = this.columns.findIndex((c) => c.key === key);
    const to = from + step;
    if (from < 0 || to < 0 || to >= this.columns.length) return;
    const [column] = this.columns.splice(from, 1);
    this.columns.splice(to, 0, column);
    const focusStep = button?.dataset.move;
    this.render();
    // Keep the arrow under the keyboard (at an end too: aria-disabled keeps it focusable,
    // so a further Enter does nothing instead of moving the column back).
    const item = $('c-column-list').querySelector(`li[data-key="${CSS.escape(key)}"]`);
    item?.querySelector(`button[data-move="${focusStep}"]`)?.focus();
    this.announce(t('movedTo', { name: this.titleOf(column), n: i18n.number(to + 1), total: i18n.number(this.columns.length) }));
    this.form.dispatchEvent(new Event('change', { bubbles: true }));
  }

  announce(text) {
    const live = $('live');
    if (live) live.textContent = text;
  }

  chooseAll(on) {
    for (const c of this.columns) c.chosen = on;
    for (const box of $('c-column-list').querySelectorAll('input[type="checkbox"]')) {
      box.checked = on;
      box.closest('li').classList.toggle('is-off', !on);
    }
    this.count();
    this.form.dispatchEvent(new Event('change', { bubbles: true }));
  }

  count() {
    const n = this.columns.filter((c) => c.chosen).length;
    $('c-columns-count').textContent = t('columnsCount', { n: i18n.number(n), total: i18n.number(this.columns.length) });
  }

  /** Titles follow the heading language (the page's, unless one was chosen). */
  relabelColumns() {
    this.render();
  }

  /** The option lists, in the page's language (values kept). */
  selects() {
    const fill = (id, values, label) => {
      const select = $(id);
      const keep = select.value;
      select.replaceChildren(...values.map(([value, key]) => h('option', { value }, label(key))));
      if (values.some(([value]) => value === keep)) select.value = keep;
    };
    const pageLanguage = t(`language.${i18n.locale}`);
    fill('c-language', [['', 'follow'], ...LANGUAGES.map((l) => [l, l])], (k) => (k === 'follow' ? t('languageFollow', { lang: pageLanguage }) : t(`language.${k}`)));
    $('c-language').value = this.language;
    fill('c-encoding', ENCODINGS.map((e) => [e, e]), (k) => t(`encoding.${k}`));
    fill('c-delimiter', DELIMITERS, (k) => t(`delimiter.${k}`));
    fill('c-line-ending', LINE_ENDINGS.map((e) => [e, e]), (k) => t(`lineEnding.${k}`));
    fill('c-compression', COMPRESSIONS.map((c) => [c, c]), (k) => t(`compression.${k}`));
  }

  /** Show what applies to the chosen format: CSV options for CSV only, gzip for one
   * CSV or JSON Lines file. A choice that no longer applies goes back to its default. */
  sync() {
    const format = this.format();
    const csv = format === 'csv';
    $('c-csv-options').hidden = !csv;
    const split = $('c-split').checked;
    $('c-split-rows').disabled = !split;
    const gzipOk = GZIP_FORMATS.includes(format) && !split;
    const compression = $('c-compression');
    const gzip = compression.querySelector('option[value="gzip"]');
    if (gzip) gzip.disabled = !gzipOk;
    if (!gzipOk && compression.value === 'gzip') compression.value = split ? 'zip' : 'none';
  }

  /** The columns to send: null when every column is chosen in the declared order with
   * no rename (the server's default), else keys or `{key, title}`. */
  chosenColumns() {
    if (!this.columns.length) return null;
    const declared = (this.detail?.columns || []).map((c) => c.key);
    const same = this.columns.every((c, i) => c.chosen && !c.rename.trim() && c.key === declared[i]);
    if (same) return null;
    return this.columns.filter((c) => c.chosen).map((c) => (c.rename.trim() ? { key: c.key, title: c.rename.trim() } : c.key));
  }

  /** `{columns?, options?}` to add to the create body (nothing for an older server). */
  body(format) {
    if (!this.supported) return {};
    const out = {};
    const columns = this.chosenColumns();
    if (columns) out.columns = columns;
    const options = { language: this.headerLanguage(), compression: $('c-compression').value || 'none' };
    if (format === 'csv') {
      options.encoding = $('c-encoding').value;
      options.delimiter = $('c-delimiter').value;
      options.header = $('c-header').checked;
      options.lineEnding = $('c-line-ending').value;
    }
    if ($('c-split').checked) {
      const raw = $('c-split-rows').value.trim();
      options.split = { maxRowsPerFile: /^\d+$/.test(raw) ? Number(raw) : raw };
    }
    out.options = options;
    return out;
  }

  /** The key of the column at `index` of the columns sent (for an error naming it). */
  sentColumn(index) {
    const sent = this.chosenColumns() || this.columns.map((c) => c.key);
    const item = sent[index];
    const key = typeof item === 'string' ? item : item?.key;
    const column = this.columns.find((c) => c.key === key);
    return column ? this.titleOf(column, i18n.locale) : key || '';
  }

  /** What the page can tell is wrong here before sending: `Map(fieldId -> text)`. */
  check(maxRows) {
    const problems = new Map();
    if (!$('c-columns').hidden && !this.columns.some((c) => c.chosen)) problems.set('c-columns', t('noColumns'));
    if (this.supported && $('c-split').checked) {
      const raw = $('c-split-rows').value.trim();
      const n = Number(raw);
      if (!/^\d+$/.test(raw) || n < 1 || (maxRows && n > maxRows)) problems.set('c-split-rows', t('err.INVALID_SPLIT'));
    }
    return problems;
  }

  /** Turn on split with `rows` per file (a preview's one-click fix). */
  splitInto(rows) {
    $('c-split').checked = true;
    $('c-split-rows').value = String(rows);
    this.sync();
  }

  /** Choose `format` (a preview's one-click fix). */
  choose(format) {
    const radio = this.form.querySelector(`input[name="format"][value="${format}"]`);
    if (radio && !radio.disabled) radio.checked = true;
    this.sync();
    return Boolean(radio);
  }
}
