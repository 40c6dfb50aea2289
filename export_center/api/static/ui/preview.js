// The preview of the "New export" dialog: POST /api/v1/exports/preview with the create
// body answers, without creating anything, the row estimate, the bytes, the files and
// sheets, the first rows as they will be written and warnings with codes. Each warning
// comes with its one-click fixes: XLSX_SHEETS and SPLIT_SUGGESTED "Switch to CSV" and
// "Split into files of N rows"; OVER_ROW_CAP and OVER_SIZE_CAP "Narrow the date range";
// TOO_MANY_PARTS "Split into files of N rows" with the fewest rows per file that fit.

import { $, h } from './dom.js';
import * as i18n from './i18n.js';
import { ApiError, Unreachable, call } from './api.js';
import { DEFAULT_SPLIT_ROWS } from './choices.js';
import './files_i18n.js';

const { t } = i18n;

/** Rows per file for a split fix: the server's suggestion (a SPLIT_SUGGESTED warning's
 * `suggestedMaxRowsPerFile`) when it gives one, else a full sheet's worth (two parts for
 * a smaller file); never more than the type's row cap. */
export function splitRows(preview, maxRows) {
  const suggested = (preview?.warnings || []).map((w) => Number(w?.suggestedMaxRowsPerFile)).find((n) => Number.isInteger(n) && n > 0);
  if (suggested) return maxRows ? Math.min(suggested, maxRows) : suggested;
  const rows = Number(preview?.estimatedRows) || 0;
  let n = DEFAULT_SPLIT_ROWS;
  if (rows && rows <= n) n = Math.max(1, Math.ceil(rows / 2)); // a small file: two parts
  return maxRows ? Math.min(n, maxRows) : n;
}

const FIXES = {
  XLSX_SHEETS: ['csv', 'split'],
  SPLIT_SUGGESTED: ['csv', 'split'],
  OVER_ROW_CAP: ['narrow'],
  OVER_SIZE_CAP: ['narrow'],
  TOO_MANY_PARTS: ['split'],
};

export class Preview {
  /** @param {object} ctx `{body(), check(), spec(), describe(error), choices, fix(kind, value), onUnauthorized(error)}` */
  constructor(ctx) {
    this.ctx = ctx;
    this.box = $('c-preview');
    this.content = $('c-preview-body');
    this.button = $('create-preview');
    this.shown = null; // the body the preview shows (JSON), to tell when it is stale
    this.data = null; // the answer it shows (drawn again in the other language)
    this.seq = 0;
    this.button.addEventListener('click', () => this.run());
  }

  clear() {
    this.seq += 1;
    this.shown = null;
    this.data = null;
    this.box.hidden = true;
    this.content.replaceChildren();
    this.box.classList.remove('is-stale');
  }

  /** The page's language changed: the preview shown is drawn again in it. */
  relabel() {
    if (this.data && !this.box.hidden) {
      const stale = this.box.classList.contains('is-stale');
      this.render(this.data);
      if (stale) this.edited();
    }
  }

  /** A line under the preview (what a fix did, what to do next). */
  note(text) {
    if (this.box.hidden) return;
    $('c-preview-note')?.remove();
    this.content.append(h('p', { class: 'notice', id: 'c-preview-note', role: 'status' }, text));
  }

  /** The form changed: a shown preview says it is out of date. */
  edited() {
    if (!this.shown || this.box.hidden) return;
    const stale = JSON.stringify(this.ctx.body()) !== this.shown;
    this.box.classList.toggle('is-stale', stale);
    $('c-preview-stale')?.toggleAttribute('hidden', !stale);
  }

  async run() {
    if (!this.ctx.check()) return;
    const body = this.ctx.body();
    const seq = ++this.seq;
    this.button.disabled = true;
    this.button.textContent = t('previewing');
    this.box.setAttribute('aria-busy', 'true');
    try {
      const { data } = await call('/api/v1/exports/preview', { method: 'POST', body });
      if (seq !== this.seq) return;
      this.shown = JSON.stringify(body);
      this.render(data || {});
    } catch (error) {
      if (seq !== this.seq) return;
      if (error instanceof ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      this.failed(error);
    } finally {
      if (seq === this.seq) {
        this.button.disabled = false;
        this.button.textContent = t('preview');
        this.box.removeAttribute('aria-busy');
      }
    }
  }

  failed(error) {
    this.shown = null;
    this.data = null;
    this.box.hidden = false;
    this.box.classList.remove('is-stale');
    // An older export center has no preview: 404 NOT_FOUND or 405.
    const older = error instanceof ApiError && (error.status === 405 || (error.status === 404 && error.code !== 'UNKNOWN_EXPORT_TYPE'));
    if (older) return this.content.replaceChildren(h('p', { class: 'notice', id: 'c-preview-message' }, t('previewUnavailable')));
    if (error instanceof ApiError && error.status === 422 && this.ctx.showError(error)) {
      // The error is shown at its field; the preview region says it too, briefly.
      return this.content.replaceChildren(h('p', { class: 'error', id: 'c-preview-message' }, t('previewFailed', { why: this.ctx.describe(error).text })));
    }
    const why = error instanceof Unreachable ? t('offline') : this.ctx.describe(error).text;
    this.content.replaceChildren(h('p', { class: 'error', id: 'c-preview-message' }, t('previewFailed', { why })));
  }

  render(data) {
    this.data = data;
    const spec = this.ctx.spec();
    const files = Number(data.files) || 1;
    const sheets = Number(data.sheets) || 0;
    const facts = [
      t('previewSummary', { rows: i18n.number(Number(data.estimatedRows) || 0), bytes: i18n.bytes(Number(data.estimatedBytes) || 0) }),
      files > 1 ? t('previewFiles', { n: i18n.number(files) }) : t('previewOneFile'),
      sheets > 1 ? t('previewSheets', { n: i18n.number(sheets) }) : null,
    ].filter(Boolean);
    const warnings = Array.isArray(data.warnings) ? data.warnings : [];
    this.box.hidden = false;
    this.box.classList.remove('is-stale');
    this.content.replaceChildren(...[
      h('p', { class: 'preview-facts', id: 'c-preview-facts' }, facts.join(i18n.locale === 'zh-CN' ? '，' : ' · ')),
      warnings.length ? h('ul', { class: 'preview-warnings', id: 'c-preview-warnings' }, warnings.map((w) => this.warning(w, data, spec))) : null,
      this.sample(data),
      h('p', { class: 'hint', id: 'c-preview-stale', hidden: true }, t('previewStale')),
    ].filter(Boolean));
  }

  warning(w, data, spec) {
    const code = typeof w?.code === 'string' ? w.code : '';
    const vars = {
      sheets: i18n.number(Number(data.sheets) || 0),
      rows: i18n.number(Number(data.estimatedRows) || 0),
      max: spec?.maxRows ? i18n.number(spec.maxRows) : '',
      bytes: i18n.bytes(Number(data.estimatedBytes) || 0),
    };
    let key = i18n.has(`warn.${code}`) ? `warn.${code}` : 'warn.default';
    if (code === 'OVER_ROW_CAP' && !spec?.maxRows) key = 'warn.OVER_ROW_CAP.any';
    const known = key !== 'warn.default';
    const fixes = (FIXES[code] || []).map((kind) => this.fixButton(kind, data, spec)).filter(Boolean);
    return h(
      'li',
      { class: 'preview-warning', dataset: { code } },
      h('p', {}, t(key, vars)),
      known ? null : h('p', { class: 'detail', lang: 'en' }, t('detail', { message: String(w?.message || code) })),
      fixes.length ? h('div', { class: 'fixes' }, fixes) : null,
    );
  }

  fixButton(kind, data, spec) {
    const format = this.ctx.choices.format();
    if (kind === 'csv') {
      if (format === 'csv' || !this.ctx.hasFormat('csv')) return null;
      return h('button', { type: 'button', class: 'btn small primary', dataset: { fix: 'csv' }, onclick: () => this.ctx.fix('csv') }, t('fixCsv'));
    }
    if (kind === 'split') {
      if (!this.ctx.choices.supported) return null;
      const n = splitRows(data, spec?.maxRows);
      return h('button', { type: 'button', class: 'btn small primary', dataset: { fix: 'split', rows: String(n) }, onclick: () => this.ctx.fix('split', n) }, t('fixSplit', { n: i18n.number(n) }));
    }
    if (kind === 'narrow') {
      if (!(spec?.dateRange || []).length) return null;
      return h('button', { type: 'button', class: 'btn small primary', dataset: { fix: 'narrow' }, onclick: () => this.ctx.fix('narrow') }, t('fixNarrow'));
    }
    return null;
  }

  sample(data) {
    const columns = Array.isArray(data.columns) ? data.columns : [];
    const rows = Array.isArray(data.sampleRows) ? data.sampleRows : [];
    if (!columns.length) return null;
    if (!rows.length) return h('p', { class: 'hint', id: 'c-preview-empty' }, t('previewNoRows'));
    return h(
      'div',
      { class: 'table-wrap preview-table' },
      h(
        'table',
        { class: 'sample', id: 'c-preview-sample' },
        h('caption', {}, t('previewSample')),
        h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', title: c.key }, String(c.title ?? c.key))))),
        h('tbody', {}, rows.map((row) => h('tr', {}, (Array.isArray(row) ? row : []).map((cell) => h('td', {}, cell == null ? '' : String(cell)))))),
      ),
    );
  }
}
