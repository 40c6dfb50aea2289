// The Approvals view: the exports of the approver's tenant waiting for their decision
// (why each needs approval, who asked, until when), approve, or reject with a reason the
// requester reads. Shown to holders of an approver permission (GET /api/v1/approvals
// answers canApprove).
//
// API: GET /api/v1/approvals; POST /api/v1/approvals/{taskId}/approve | reject {reason}.

import { $, h } from './dom.js';
import * as i18n from './i18n.js';
import * as api from './api.js';
import './approvals_i18n.js';

const { t } = i18n;

/** One matched approval rule, in the page's language. */
export function ruleText(rule) {
  if (rule.rule === 'always') return t('ap.rule.always');
  if (rule.rule === 'rows_over') {
    const limit = i18n.number(rule.limit);
    return rule.estimate == null ? t('ap.rule.rowsUnknown', { limit }) : t('ap.rule.rows', { n: i18n.number(rule.estimate), limit });
  }
  return t('ap.rule.columns', { columns: (rule.columns || []).join(', ') });
}

export class ApprovalsView {
  /** @param {object} ctx `{typeTitle(code), notify(kind, text), notifyError(error), onUnauthorized(error), onDecided()}` */
  constructor(ctx) {
    this.ctx = ctx;
    this.items = null;
    this.rejecting = null; // the task id whose reason field is open
    this.busy = false;
  }

  async start() {
    await this.refresh();
  }

  stop() {}

  relabel() {
    this.render();
  }

  async guarded(work) {
    try {
      return await work();
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      this.ctx.notifyError(error);
      return undefined;
    }
  }

  async refresh() {
    await this.guarded(async () => {
      this.items = (await api.call('/api/v1/approvals')).data?.items || [];
    });
    this.render();
  }

  render() {
    const root = $('approvals');
    const head = h('div', { class: 'list-head' }, h('h1', { id: 'approvals-title', tabindex: '-1' }, t('approvalsTitle')));
    if (!this.items) return root.replaceChildren(head);
    if (!this.items.length) return root.replaceChildren(head, h('p', { class: 'empty', id: 'ap-none' }, t('ap.none')));
    const rows = this.items.map((item) => this.row(item));
    const table = h('table', { class: 'tasks approvals', id: 'ap-table' },
      h('thead', {}, h('tr', {}, ...['ap.task', 'ap.requester', 'ap.requestedAt', 'ap.why', 'ap.expires', 'ap.actions'].map((k) => h('th', { scope: 'col' }, t(k))))),
      h('tbody', {}, ...rows));
    return root.replaceChildren(head, table);
  }

  row(item) {
    const columns = item.columns.length ? t('ap.columns', { columns: item.columns.join(', ') }) : t('ap.allColumns');
    const rows = item.estimatedRows == null ? null : t('ap.rows', { n: i18n.number(item.estimatedRows) });
    const decision = this.rejecting === item.taskId ? this.reasonForm(item) : h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'btn small primary', dataset: { approve: item.taskId }, onclick: () => this.approve(item) }, t('ap.approve')),
      h('button', { type: 'button', class: 'btn small danger', dataset: { reject: item.taskId }, onclick: () => { this.rejecting = item.taskId; this.render(); $(`ap-reason-${item.taskId}`)?.focus(); } }, t('ap.reject')));
    return h('tr', { dataset: { task: item.taskId } },
      h('td', {}, h('div', {}, item.taskName), h('div', { class: 'sub' }, `${this.ctx.typeTitle(item.exportType)} · ${item.format.toUpperCase()}`), h('div', { class: 'sub' }, columns)),
      h('td', {}, item.requestedBy),
      h('td', {}, item.requestedAt ? i18n.dateTimeShort(item.requestedAt) : ''),
      h('td', {}, item.rules?.length ? h('div', {}, item.rules.map(ruleText).join(t('ap.sep'))) : h('div', { lang: 'en' }, (item.reasons || []).join('; ')), rows ? h('div', { class: 'sub' }, rows) : null),
      h('td', {}, item.expiresAt ? i18n.dateTimeShort(item.expiresAt) : ''),
      h('td', {}, decision));
  }

  reasonForm(item) {
    const id = `ap-reason-${item.taskId}`;
    return h('form', { class: 'reason', novalidate: true, onsubmit: (event) => { event.preventDefault(); this.reject(item); } },
      h('label', { for: id }, t('ap.reason')),
      h('textarea', { id, rows: '2', maxlength: '1000', required: true }),
      h('div', { class: 'actions' },
        h('button', { type: 'submit', class: 'btn small danger', dataset: { confirmReject: item.taskId } }, t('ap.confirmReject')),
        h('button', { type: 'button', class: 'btn small ghost', onclick: () => { this.rejecting = null; this.render(); } }, t('ap.cancel'))));
  }

  async decide(item, verb, body) {
    if (this.busy) return;
    this.busy = true;
    try {
      const done = await this.guarded(async () => {
        await api.call(`/api/v1/approvals/${encodeURIComponent(item.taskId)}/${verb}`, { method: 'POST', body });
        return true;
      });
      if (done) {
        this.rejecting = null;
        this.ctx.notify('success', t(verb === 'approve' ? 'ap.approved' : 'ap.rejected', { name: item.taskName }));
        this.ctx.onDecided?.();
      }
    } finally {
      this.busy = false;
    }
    await this.refresh();
  }

  approve(item) {
    return this.decide(item, 'approve', {});
  }

  reject(item) {
    const reason = $(`ap-reason-${item.taskId}`)?.value.trim() || '';
    if (!reason) {
      this.ctx.notify('error', t('err.REASON_REQUIRED'));
      $(`ap-reason-${item.taskId}`)?.focus();
      return undefined;
    }
    return this.decide(item, 'reject', { reason });
  }
}
