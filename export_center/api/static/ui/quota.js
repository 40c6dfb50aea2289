// The caller's daily quota, above the list: "3 of 100 exports left today" / "今日还可导出
// 3 次（共 100 次）", and the rows quota alike; hidden when no quota applies
// (GET /api/v1/me/quota: limit null). Asked for when the page opens, after each create
// and when an export ends (its rows count then).

import { $ } from './dom.js';
import * as i18n from './i18n.js';
import { ApiError, Unreachable, call } from './api.js';

const { t } = i18n;

i18n.extend(
  {
    quotaTasks: '{left} of {limit} exports left today',
    quotaRows: '{left} of {limit} rows left today',
    quotaJoin: ' · ',
    quotaResets: 'The daily quota starts again at {time}.',
    'err.QUOTA_EXCEEDED': 'You have used up today’s export quota, so no export was created.',
    // The operations view's audit list (an operator changed a tenant's or user's quota).
    'action.quota_override': 'Daily quota changed',
    'outcome.set': 'new limits set',
    'outcome.cleared': 'back to the defaults',
  },
  {
    quotaTasks: '今日还可导出 {left} 次（共 {limit} 次）',
    quotaRows: '今日还可导出 {left} 行（共 {limit} 行）',
    quotaJoin: '；',
    quotaResets: '每日额度将于 {time} 重置。',
    'err.QUOTA_EXCEEDED': '今日导出额度已用完，本次未创建导出。',
    'action.quota_override': '调整每日导出额度',
    'outcome.set': '已设置新额度',
    'outcome.cleared': '已恢复默认额度',
  },
);

export class QuotaLine {
  constructor(element = $('quota-line')) {
    this.el = element;
    this.data = null;
  }

  /** Ask the server again; a failed answer hides the line (the list shows the outage). */
  async load() {
    try {
      this.data = (await call('/api/v1/me/quota')).data;
    } catch (error) {
      if (!(error instanceof ApiError || error instanceof Unreachable)) throw error;
      this.data = null;
    }
    this.render();
  }

  /** Write the line in the page's language. */
  render() {
    const quota = this.data;
    const parts = [];
    let out = false;
    for (const [key, figure] of [['quotaTasks', quota?.tasks], ['quotaRows', quota?.rows]]) {
      if (!figure || figure.limit === null) continue;
      parts.push(t(key, { left: i18n.number(figure.remaining), limit: i18n.number(figure.limit) }));
      out ||= figure.remaining === 0;
    }
    this.el.hidden = parts.length === 0;
    this.el.textContent = parts.join(t('quotaJoin'));
    this.el.classList.toggle('quota-out', out);
    const resets = parts.length ? Date.parse(quota.tasks.resetsAt) : Number.NaN;
    if (Number.isFinite(resets)) this.el.title = t('quotaResets', { time: i18n.time(new Date(resets)) });
  }
}
