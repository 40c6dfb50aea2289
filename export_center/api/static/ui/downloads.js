// A task's downloads (GET /api/v1/exports/{taskId}/downloads), shown to its owner and to
// admins: when, who, how (signed in, download link, sent on to storage), from which
// address and program, which link, and the answer; and the revoke actions (POST
// /api/v1/exports/{taskId}/links/revoke): one link, or every link handed out so far.

import { h } from './dom.js';
import * as i18n from './i18n.js';
import { ApiError, call } from './api.js';
import './downloads_i18n.js';

const { t } = i18n;

/** What a download row's answer means to a person. */
export function statusText(item) {
  if (item.status === 200) return t('dstatus.ok');
  if (item.status === 206) return t('dstatus.part');
  if (item.status === 307) return t('dstatus.redirect');
  return t('dstatus.refused', { code: item.code || item.status });
}

export class DownloadsView {
  /** @param {object} ctx `{describe(error), onUnauthorized(error), onRevoked(task)}` */
  constructor(ctx) {
    this.ctx = ctx;
    this.task = null;
    this.items = null;
    this.said = null;
    this.seq = 0;
    this.opener = null;
    this.title = h('h2', { id: 'downloads-title' });
    this.body = h('div', { id: 'downloads-body' });
    this.message = h('p', { class: 'notice', id: 'downloads-message', role: 'status', hidden: true });
    this.revokeAllButton = h('button', { type: 'button', class: 'btn danger', id: 'revoke-all', onclick: () => this.revoke(null) });
    this.closeButton = h('button', { type: 'button', class: 'btn', id: 'downloads-close', onclick: () => this.dialog.close() });
    this.note = h('p', { class: 'hint', id: 'revoke-note' });
    this.dialog = h(
      'dialog',
      { id: 'downloads', class: 'manifest', 'aria-labelledby': 'downloads-title' },
      h('div', { class: 'dialog-head' }, this.title),
      this.message,
      this.body,
      this.note,
      h('div', { class: 'form-actions' }, this.revokeAllButton, this.closeButton),
    );
    this.dialog.addEventListener('close', () => { if (this.opener?.isConnected) this.opener.focus(); });
    document.body.append(this.dialog);
  }

  /** Open the downloads of `task`; `opener` gets the focus back. */
  async open(task, opener) {
    this.task = task;
    this.opener = opener || null;
    this.say(null);
    this.labels();
    if (!this.dialog.open) this.dialog.showModal();
    await this.load();
  }

  labels() {
    this.title.textContent = t('downloadsTitle', { name: this.task.taskName });
    this.revokeAllButton.textContent = t('revokeAll');
    this.closeButton.textContent = t('closeDialog');
    this.note.textContent = t('revokeNote');
  }

  async load() {
    const seq = ++this.seq;
    this.items = null;
    this.body.replaceChildren(h('p', { class: 'hint' }, t('downloadsLoading')));
    try {
      const { data } = await call(`/api/v1/exports/${encodeURIComponent(this.task.taskId)}/downloads`);
      if (seq !== this.seq) return;
      this.items = Array.isArray(data?.items) ? data.items : [];
      this.render();
    } catch (error) {
      if (seq !== this.seq) return;
      this.failed(error);
    }
  }

  failed(error) {
    if (error instanceof ApiError && error.status === 401) {
      this.dialog.close();
      this.ctx.onUnauthorized(error);
      return;
    }
    this.body.replaceChildren(h('p', { class: 'notice' }, this.ctx.describe(error).text));
  }

  /** The language changed while the dialog is open: draw it again. */
  relabel() {
    if (!this.dialog.open || !this.task) return;
    this.labels();
    if (this.items) this.render();
    if (this.said) this.say(this.said);
  }

  say(said) {
    this.said = said;
    this.message.hidden = !said;
    this.message.textContent = said ? said() : '';
  }

  render() {
    const items = this.items;
    if (!items.length) {
      this.body.replaceChildren(h('p', { class: 'hint', id: 'downloads-none' }, t('downloadsNone')));
      return;
    }
    const revoked = new Set(items.filter((i) => i.code === 'LINK_REVOKED').map((i) => i.linkId));
    const offered = new Set();
    const columns = ['at', 'user', 'type', 'address', 'link', 'status', 'agent', 'action'];
    this.body.replaceChildren(
      h('p', { class: 'hint' }, t('downloadsIntro')),
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'manifest-files', id: 'downloads-list' },
          h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, t(`dcol.${c}`))))),
          h('tbody', {}, items.map((item) => {
            // One revoke button per link (on its newest row), none once it is refused as revoked.
            const canRevoke = item.linkId && !revoked.has(item.linkId) && !offered.has(item.linkId);
            if (item.linkId) offered.add(item.linkId);
            return h(
              'tr',
              { dataset: { type: item.type, status: String(item.status), link: item.linkId || '' } },
              h('td', { class: 'd-at' }, i18n.dateTime(item.at)),
              h('td', { class: 'd-user' }, String(item.user)),
              h('td', { class: 'd-type' }, t(`dtype.${item.type}`)),
              h('td', { class: 'd-address' }, h('code', { translate: 'no' }, String(item.clientAddress))),
              h('td', { class: 'd-link' }, item.linkId ? h('code', { translate: 'no' }, item.linkId) : '–'),
              h('td', { class: 'd-status' }, statusText(item)),
              h('td', { class: 'd-agent' }, String(item.userAgent || '–')),
              h('td', { class: 'd-action' }, canRevoke
                ? h('button', {
                  type: 'button',
                  class: 'btn ghost small revoke-link',
                  dataset: { link: item.linkId },
                  'aria-label': t('revokeLinkLabel', { link: item.linkId }),
                  onclick: () => this.revoke(item.linkId),
                }, t('revokeLink'))
                : null),
            );
          })),
        ),
      ),
    );
  }

  /** Revoke one link (`linkId`) or, with null, every link of the task. */
  async revoke(linkId) {
    const task = this.task;
    try {
      await call(`/api/v1/exports/${encodeURIComponent(task.taskId)}/links/revoke`, {
        method: 'POST',
        body: linkId ? { linkId } : {},
      });
    } catch (error) {
      this.failed(error);
      return;
    }
    this.say(linkId ? () => t('revokedLink', { link: linkId }) : () => t('revokedAll', { name: task.taskName }));
    this.ctx.onRevoked?.(task);
    await this.load();
  }
}
