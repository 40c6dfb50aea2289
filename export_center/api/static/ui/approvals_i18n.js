// Texts of approvals and row ceilings (the Approvals view, the awaiting / rejected
// states of the list, the create's ROW_CEILING answer), in English and Chinese. Added to
// i18n.js's tables when this module loads.

import { extend, t } from './i18n.js';

const EN = {
  viewApprovals: 'Approvals',
  approvalsTitle: 'Exports waiting for your approval',
  'state.awaiting_approval': 'Awaiting approval',
  'state.rejected': 'Rejected',
  awaitingNote: 'Waiting for an approver. It starts as soon as someone approves it.',
  rejectedNote: 'Rejected by {user}: {reason}',
  rejectedNoteAny: 'The approval was refused.',
  'fail.APPROVAL_EXPIRED': 'No approver decided in time; the request expired. Export again to ask once more.',
  'err.ROW_CEILING': 'This export has more rows than you may export at once. Narrow the filters, or ask for a permission with a higher limit.',
  'err.SELF_APPROVAL': 'You cannot approve or reject your own export. Another approver must decide.',
  'err.NOT_AWAITING_APPROVAL': 'This export no longer waits for approval; someone decided already, or it expired.',
  'err.REASON_REQUIRED': 'Say why you reject it: the requester reads it.',
  'fail.ROW_CEILING': 'The export had more rows than your row limit, so it was stopped and no file was kept. Narrow the filters and export again.',
  'ap.none': 'Nothing is waiting for your approval.',
  'ap.rule.always': 'Every export of this type needs approval',
  'ap.rule.rows': 'About {n} rows, more than {limit}',
  'ap.rule.rowsUnknown': 'The row count is unknown (approval needed above {limit} rows)',
  'ap.rule.columns': 'It includes the column(s) {columns}',
  'ap.sep': '; ',
  'ap.task': 'Export',
  'ap.requester': 'Requested by',
  'ap.requestedAt': 'Asked',
  'ap.why': 'Why it needs approval',
  'ap.expires': 'Expires',
  'ap.rows': 'about {n} rows',
  'ap.columns': 'Columns: {columns}',
  'ap.allColumns': 'All columns',
  'ap.actions': 'Decision',
  'ap.approve': 'Approve',
  'ap.reject': 'Reject',
  'ap.reason': 'Reason for rejecting',
  'ap.confirmReject': 'Reject export',
  'ap.cancel': 'Keep waiting',
  'ap.approved': 'Approved: “{name}” is queued and starts now.',
  'ap.rejected': 'Rejected: “{name}”. The requester sees your reason.',
  'nd.ev.export.approved': 'My export was approved',
  'nd.ev.export.rejected': 'My export was not approved',
  'event.export.approved': 'An export was approved and is starting.',
  'event.export.rejected': 'An export was not approved.',
};

const ZH = {
  viewApprovals: '审批',
  approvalsTitle: '等待您审批的导出',
  'state.awaiting_approval': '待审批',
  'state.rejected': '已驳回',
  awaitingNote: '正在等待审批，审批通过后会立即开始导出。',
  rejectedNote: '已被 {user} 驳回：{reason}',
  rejectedNoteAny: '审批未通过。',
  'fail.APPROVAL_EXPIRED': '审批超时，无人处理，申请已失效。如仍需要，请重新发起导出。',
  'err.ROW_CEILING': '此次导出的行数超过了您单次可导出的上限。请缩小筛选范围，或申请上限更高的权限。',
  'err.SELF_APPROVAL': '不能审批自己发起的导出，需由其他审批人处理。',
  'err.NOT_AWAITING_APPROVAL': '该导出已不在待审批状态：可能已有人处理，或申请已过期。',
  'err.REASON_REQUIRED': '请填写驳回原因，申请人会看到。',
  'fail.ROW_CEILING': '导出行数超过了您的行数上限，任务已停止，未保留任何文件。请缩小筛选范围后重新导出。',
  'ap.none': '目前没有需要您审批的导出。',
  'ap.rule.always': '此类导出均需审批',
  'ap.rule.rows': '约 {n} 行，超过 {limit} 行',
  'ap.rule.rowsUnknown': '行数未知（超过 {limit} 行需审批）',
  'ap.rule.columns': '包含需审批的列：{columns}',
  'ap.sep': '；',
  'ap.task': '导出任务',
  'ap.requester': '申请人',
  'ap.requestedAt': '申请时间',
  'ap.why': '需要审批的原因',
  'ap.expires': '失效时间',
  'ap.rows': '约 {n} 行',
  'ap.columns': '导出列：{columns}',
  'ap.allColumns': '全部列',
  'ap.actions': '审批',
  'ap.approve': '通过',
  'ap.reject': '驳回',
  'ap.reason': '驳回原因',
  'ap.confirmReject': '确认驳回',
  'ap.cancel': '暂不处理',
  'ap.approved': '已通过：“{name}”已进入队列，马上开始导出。',
  'ap.rejected': '已驳回：“{name}”。申请人会看到您填写的原因。',
  'nd.ev.export.approved': '导出申请已通过',
  'nd.ev.export.rejected': '导出申请未通过',
  'event.export.approved': '有一个导出申请已通过，即将开始导出。',
  'event.export.rejected': '有一个导出申请未通过审批。',
};

extend(EN, ZH);

/** The sentence of a rejected task: who rejected it and why (the stored sentence is
 * "rejected by <user>: <reason>"), or the expiry's. */
export function rejectedText(task) {
  if (task.error?.code === 'APPROVAL_EXPIRED') return t('fail.APPROVAL_EXPIRED');
  const said = /^rejected by ([^:]+): ([\s\S]*)$/.exec(task.error?.message || '');
  return said ? t('rejectedNote', { user: said[1], reason: said[2] }) : t('rejectedNoteAny');
}

/** Every key of this module (the tests check both languages have them). */
export const APPROVAL_KEYS = Object.keys(EN);
