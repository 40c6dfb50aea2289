// The manifest of a succeeded export (GET /api/v1/exports/{taskId}/manifest): its files
// with rows, bytes and SHA-256, the ZIP archive when there is one, the control totals and
// the signature; and "Verify a file": the SHA-256 of a local file, computed in the
// browser with crypto.subtle.digest (the file is never uploaded), compared with every
// file and the archive of the manifest.

import { $, h } from './dom.js';
import * as i18n from './i18n.js';
import { ApiError, call } from './api.js';
import './files_i18n.js';

const { t } = i18n;

/** Lowercase hex SHA-256 of `buffer` (an ArrayBuffer); rejects where crypto.subtle is
 * missing (a page on plain http from another host: not a secure context). */
export async function sha256Hex(buffer) {
  if (!globalThis.crypto?.subtle) throw new Error('no-crypto');
  const digest = await crypto.subtle.digest('SHA-256', buffer);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** What of `manifest` a file with hash `hex` is: `{kind: 'file'|'archive', name}` or null. */
export function matchOf(manifest, hex) {
  const wanted = String(hex).toLowerCase();
  const file = (manifest?.files || []).find((f) => String(f?.sha256 || '').toLowerCase() === wanted);
  if (file) return { kind: 'file', name: file.name };
  const archive = manifest?.archive;
  if (archive && String(archive.sha256 || '').toLowerCase() === wanted) return { kind: 'archive', name: archive.name };
  return null;
}

export class ManifestView {
  /** @param {object} ctx `{describe(error), onUnauthorized(error), typeTitle(code)}` */
  constructor(ctx) {
    this.ctx = ctx;
    this.dialog = $('manifest');
    this.body = $('manifest-body');
    this.task = null;
    this.manifest = null;
    this.seq = 0;
    this.opener = null;
    $('manifest-close').addEventListener('click', () => this.dialog.close());
    this.dialog.addEventListener('close', () => { if (this.opener?.isConnected) this.opener.focus(); });
    $('verify-file').addEventListener('change', (event) => this.verify(event.target.files?.[0]));
  }

  /** Open the manifest of `task` (a succeeded export); `opener` gets the focus back. */
  async open(task, opener) {
    this.task = task;
    this.manifest = null;
    this.opener = opener || null;
    const seq = ++this.seq;
    $('manifest-title').textContent = t('manifestTitle', { name: task.taskName });
    $('verify').hidden = true;
    $('verify-file').value = '';
    this.result(null);
    this.body.replaceChildren(h('p', { class: 'hint' }, t('manifestLoading')));
    if (!this.dialog.open) this.dialog.showModal();
    try {
      const { data } = await call(`/api/v1/exports/${encodeURIComponent(task.taskId)}/manifest`);
      if (seq !== this.seq) return;
      this.manifest = data || {};
      this.render();
    } catch (error) {
      if (seq !== this.seq) return;
      if (error instanceof ApiError && error.status === 401) {
        this.dialog.close();
        return this.ctx.onUnauthorized(error);
      }
      // An older export center answers 404 NOT_FOUND (no such route): say it plainly.
      const older = error instanceof ApiError && error.status === 404 && error.code !== 'MANIFEST_NOT_FOUND' && error.code !== 'TASK_NOT_FOUND';
      const text = older ? t('manifestUnavailable') : this.ctx.describe(error).text;
      this.body.replaceChildren(h('p', { class: 'notice', id: 'manifest-message' }, text));
    }
  }

  /** The language changed while the dialog is open: draw it again. */
  relabel() {
    if (!this.dialog.open || !this.task) return;
    $('manifest-title').textContent = t('manifestTitle', { name: this.task.taskName });
    if (this.manifest) this.render();
    if (this.said) this.result(this.said);
  }

  render() {
    const m = this.manifest;
    const files = Array.isArray(m.files) ? m.files : [];
    const titles = new Map((m.columns || []).map((c) => [c.key, c.title || c.key]));
    this.body.replaceChildren(...[
      h('p', { class: 'hint' }, t('manifestIntro')),
      h('p', { id: 'manifest-rows' }, t('manifestRows', { n: i18n.number(Number(m.totalRows) || 0) })),
      h('h3', {}, t('manifestFiles')),
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'manifest-files', id: 'manifest-files' },
          h('thead', {}, h('tr', {}, ['name', 'rows', 'bytes', 'sha256'].map((c) => h('th', { scope: 'col' }, t(`mcol.${c}`))))),
          h('tbody', {}, files.map((f) => h(
            'tr',
            { dataset: { name: String(f.name) } },
            h('td', { class: 'm-name' }, String(f.name)),
            h('td', { class: 'm-rows num' }, i18n.number(Number(f.rows) || 0)),
            h('td', { class: 'm-bytes num', title: `${f.bytes}` }, i18n.bytes(Number(f.bytes) || 0)),
            h('td', { class: 'm-sha' }, h('code', { class: 'sha', translate: 'no' }, String(f.sha256 || ''))),
          ))),
        ),
      ),
      m.archive
        ? h('p', { id: 'manifest-archive' }, t('manifestArchive', { name: m.archive.name, bytes: i18n.bytes(Number(m.archive.bytes) || 0), sha: m.archive.sha256 }))
        : null,
      this.totals(m.controlTotals, titles),
      h(
        'dl',
        { class: 'manifest-facts' },
        m.signature ? [h('dt', {}, t('signature')), h('dd', { id: 'manifest-signature' }, t('signatureText', { alg: m.signature.alg, keyId: m.signature.keyId }))] : null,
        m.snapshotToken ? [h('dt', {}, t('snapshot')), h('dd', {}, h('code', { class: 'sha' }, String(m.snapshotToken)))] : null,
      ),
    ].flat().filter(Boolean));
    $('verify').hidden = false;
  }

  totals(control, titles) {
    if (!control || typeof control !== 'object') return null;
    const columns = control.columns && typeof control.columns === 'object' ? Object.entries(control.columns) : [];
    return [
      h('h3', {}, t('controlTotals')),
      h('p', { id: 'manifest-row-count' }, t('totalsRowCount', { n: i18n.number(Number(control.rowCount) || 0) })),
      columns.length
        ? h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'manifest-totals', id: 'manifest-totals' },
            h('thead', {}, h('tr', {}, ['column', 'total', 'min', 'max'].map((c) => h('th', { scope: 'col' }, t(`tcol.${c}`))))),
            // Sums are exact decimals sent as strings: shown as sent, never through a float.
            h('tbody', {}, columns.map(([key, v]) => h(
              'tr',
              { dataset: { key } },
              h('th', { scope: 'row' }, titles.get(key) || key),
              h('td', { class: 'num' }, v?.sum != null ? String(v.sum) : ''),
              h('td', {}, v?.min != null ? String(v.min) : ''),
              h('td', {}, v?.max != null ? String(v.max) : ''),
            ))),
          ),
        )
        : null,
    ];
  }

  /** The line under "Verify a file": `said` is `{kind, text}` or null (hidden). */
  result(said) {
    this.said = said;
    const box = $('verify-result');
    box.hidden = !said;
    box.className = `verify-result${said ? ` is-${said.kind}` : ''}`;
    box.textContent = said ? said.text() : '';
  }

  async verify(file) {
    if (!file || !this.manifest) return this.result(null);
    const seq = this.seq;
    this.result({ kind: 'busy', text: () => t('verifying', { name: file.name }) });
    let hex;
    try {
      hex = await sha256Hex(await file.arrayBuffer());
    } catch (error) {
      if (seq !== this.seq) return undefined;
      const text = error?.message === 'no-crypto' ? () => t('verifyNoCrypto') : () => t('verifyFailed', { why: String(error?.message || error) });
      return this.result({ kind: 'bad', text });
    }
    if (seq !== this.seq) return undefined;
    const match = matchOf(this.manifest, hex);
    if (!match) return this.result({ kind: 'bad', text: () => t('verifyNoMatch', { file: file.name }) });
    const key = match.kind === 'archive' ? 'verifyMatchArchive' : 'verifyMatch';
    return this.result({ kind: 'ok', text: () => t(key, { file: file.name, name: match.name }) });
  }
}
