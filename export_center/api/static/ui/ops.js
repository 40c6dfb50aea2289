// The operations view (admins only, loaded the first time one opens it): the outbox
// backlog and the automatic retries scheduled, quarantined commands, failures by type
// and the audit trail, all of the admin's tenant (every tenant for a platform operator),
// from GET /api/v1/admin/overview every few seconds while it is on screen. Exports are
// named as their users name them, with the id below. A retry asks for a reason, which
// the audit trail keeps (POST /api/v1/admin/tasks/{id}/retry), and may start a sharded
// export over instead of resuming it ("fresh"). The tables become cards on a phone
// (app.css), each cell with its column's name; the sentences the system writes in the
// audit trail are shown in the page's language.

import { $, h } from './dom.js';
import * as i18n from './i18n.js';
import * as api from './api.js';
import { describe, errorNodes } from './form.js';

const { t } = i18n;
const POLL_MS = 3000;

i18n.extend({
  'ops.title': 'Operations',
  'ops.intro.tenant': 'Figures, failures and actions of tenant {tenant}, updated every few seconds while this view is open.',
  'ops.intro.all': 'Figures, failures and actions of every tenant, updated every few seconds while this view is open.',
  'ops.updated': 'Updated at {time}',
  'ops.pending': 'Commands due and waiting to be sent',
  'ops.oldest': 'Longest wait of a due command',
  'ops.scheduled': 'Automatic retries scheduled',
  'ops.nextAt': 'next at {time}',
  'ops.maxAttempt': 'Most sends of one command',
  'ops.queueAge': 'Longest wait in the queue',
  'ops.none': '—',
  'ops.quarantined': 'Quarantined commands',
  'ops.quarantinedIntro': 'Commands the broker gave up on. Their exports failed; retry one once the cause is fixed.',
  'ops.noQuarantined': 'No command is quarantined.',
  'ops.failures': 'Failed exports in the last 24 hours',
  'ops.noFailures': 'No export failed in the last 24 hours.',
  'ops.byType': 'By type',
  'ops.audit': 'Recent actions',
  'ops.noAudit': 'Nothing has been done by hand or by the system yet.',
  'ops.col.task': 'Export',
  'ops.col.version': 'Dispatch version',
  'ops.col.when': 'When',
  'ops.col.reason': 'Reason',
  'ops.col.state': 'Export state',
  'ops.col.type': 'Type',
  'ops.col.owner': 'Requested by',
  'ops.col.failure': 'Failure',
  'ops.col.who': 'Who',
  'ops.col.what': 'What',
  'ops.col.actions': 'Actions',
  'ops.retryLabel': 'Retry export {task}',
  'ops.retryTitle': 'Retry export {task}',
  'ops.retryIntro': 'An export that runs in parts continues where it stopped; any other export runs again from the start. Say why: the reason is kept in the audit trail with your name.',
  'ops.fresh': 'Start over: discard the parts already exported and run every part again',
  'ops.freshHint': 'Choose this when the data or the rules changed since the failure. It makes no difference to an export that does not run in parts.',
  'ops.reason': 'Reason',
  'ops.reasonShort': 'Write why you retry it (at least 3 characters).',
  'ops.retrySubmit': 'Retry export',
  'ops.retried': 'Export {task} is queued again.',
  'ops.restarted': 'Export {task} is queued again and starts over from the beginning.',
  'ops.count': '{type}: {n} failed',
  'ops.what': '{action}: {outcome}',
  'ops.reason.resumed': '{done} of {total} parts done, {rows} rows kept',
  'ops.reason.restarted.plan_changed': 'The plan of parts changed since the checkpoints (for example the number of parts): every part starts again from zero.',
  'ops.reason.restarted.snapshot_expired': 'The data source no longer honours the snapshot of the checkpoints: every part starts again from zero.',
  'ops.reason.lease': 'The worker {worker} stopped renewing its lease while {phase}.',
  'ops.reason.dead': 'Message {message} was dead-lettered (schema version {version}).',
  'ops.phase.queued': 'waiting to start',
  'ops.phase.fetch': 'reading data',
  'ops.phase.render': 'writing the file',
  'ops.phase.store': 'saving the file',
  'actor.system': 'System ({name})',
  'actor.operator': '{name} (command line)',
  'action.dead_letter': 'Dead letter',
  'action.manual_retry': 'Retry',
  'action.manual_retry.fresh': 'Start over',
  'action.manual_cancel': 'Cancel',
  'action.lease_recovery': 'Lease recovered',
  'action.registry_reload': 'Export types reloaded',
  'action.resume': 'Resume',
  'action.hand_back': 'Handed back',
  'action.notification_dead': 'Notification given up',
  'action.notify_skipped': 'Notification not sent',
  'outcome.dead': 'not delivered after retrying',
  'outcome.no_address': 'no e-mail address known',
  'outcome.resumed': 'continued from the checkpoints',
  'outcome.restarted': 'started again from zero',
  'outcome.retry': 'to run again',
  'outcome.released': 'queued for another worker, no attempt spent',
  'outcome.quarantined': 'quarantined; the export failed',
  'outcome.stale': 'stale; nothing changed',
  'outcome.missing_properties': 'unreadable; nothing changed',
  'outcome.requeued': 'queued again',
  'outcome.cancelled': 'cancelled',
  'outcome.stop_requested': 'asked to stop',
  'outcome.failed': 'marked failed',
  'outcome.reloaded': 'reloaded',
  'outcome.refused': 'refused; the previous types stay',
  'action.link_revoke': 'Download links revoked',
  'action.approval_requested': 'Approval requested',
  'action.approval_decision': 'Approval decided',
  'outcome.revoked': 'revoked; the links answer 410',
  'outcome.awaiting': 'waiting for an approver',
  'outcome.approved': 'approved; the export is queued',
  'outcome.rejected': 'rejected',
  'outcome.expired': 'no decision in time; rejected',
}, {
  'ops.title': '运维',
  'ops.intro.tenant': '租户 {tenant} 的运行指标、失败任务和操作记录，打开此页面时每隔几秒自动刷新。',
  'ops.intro.all': '所有租户的运行指标、失败任务和操作记录，打开此页面时每隔几秒自动刷新。',
  'ops.updated': '更新于 {time}',
  'ops.pending': '已到期、待发送的指令',
  'ops.oldest': '到期指令最长已等待',
  'ops.scheduled': '已安排的自动重试',
  'ops.nextAt': '下一次 {time}',
  'ops.maxAttempt': '单条指令最多发送次数',
  'ops.queueAge': '排队最久的导出已等待',
  'ops.none': '—',
  'ops.quarantined': '已隔离的指令',
  'ops.quarantinedIntro': '消息队列放弃投递的指令，对应的导出已失败。排除原因后可以重试。',
  'ops.noQuarantined': '没有被隔离的指令。',
  'ops.failures': '最近 24 小时失败的导出',
  'ops.noFailures': '最近 24 小时没有失败的导出。',
  'ops.byType': '按类型统计',
  'ops.audit': '最近的操作记录',
  'ops.noAudit': '暂无人工或系统操作记录。',
  'ops.col.task': '导出任务',
  'ops.col.version': '派发版本',
  'ops.col.when': '时间',
  'ops.col.reason': '原因',
  'ops.col.state': '任务状态',
  'ops.col.type': '类型',
  'ops.col.owner': '创建人',
  'ops.col.failure': '失败原因',
  'ops.col.who': '操作人',
  'ops.col.what': '操作',
  'ops.col.actions': '操作',
  'ops.retryLabel': '重试导出任务 {task}',
  'ops.retryTitle': '重试导出任务 {task}',
  'ops.retryIntro': '分片导出会从中断处继续，其他导出从头重新执行。请填写原因，原因会连同你的账号记入操作记录。',
  'ops.fresh': '从头开始：丢弃已导出的分片，所有分片重新导出',
  'ops.freshHint': '失败后数据或规则有变化时请勾选。对未分片的导出没有影响。',
  'ops.reason': '原因',
  'ops.reasonShort': '请填写重试原因（至少 3 个字）。',
  'ops.retrySubmit': '重试导出',
  'ops.retried': '导出任务 {task} 已重新排队。',
  'ops.restarted': '导出任务 {task} 已重新排队，将从头开始导出。',
  'ops.count': '{type}：失败 {n} 个',
  'ops.what': '{action}：{outcome}',
  'ops.reason.resumed': '已完成 {done}/{total} 个分片，保留 {rows} 行',
  'ops.reason.restarted.plan_changed': '分片方案在断点写入后发生了变化（例如分片数），所有分片从头重新导出。',
  'ops.reason.restarted.snapshot_expired': '数据源不再接受断点对应的数据快照，所有分片从头重新导出。',
  'ops.reason.lease': '工作进程 {worker} 在{phase}时停止了续租。',
  'ops.reason.dead': '消息 {message} 已进入死信队列（结构版本 {version}）。',
  'ops.phase.queued': '等待开始',
  'ops.phase.fetch': '读取数据',
  'ops.phase.render': '生成文件',
  'ops.phase.store': '保存文件',
  'actor.system': '系统（{name}）',
  'actor.operator': '{name}（命令行）',
  'action.dead_letter': '死信处理',
  'action.manual_retry': '手动重试',
  'action.manual_retry.fresh': '从头开始',
  'action.manual_cancel': '手动取消',
  'action.lease_recovery': '回收租约',
  'action.registry_reload': '重新加载导出类型',
  'action.resume': '断点续传',
  'action.hand_back': '交还任务',
  'action.notification_dead': '通知已放弃发送',
  'action.notify_skipped': '通知未发送',
  'outcome.dead': '多次重试后仍未送达',
  'outcome.no_address': '没有可用的邮箱地址',
  'outcome.resumed': '已从断点继续',
  'outcome.restarted': '已从头重新开始',
  'outcome.retry': '将重新执行',
  'outcome.released': '已交给其他工作进程，不占用重试次数',
  'outcome.quarantined': '已隔离，导出标记为失败',
  'outcome.stale': '消息已过时，未做改动',
  'outcome.missing_properties': '消息无法识别，未做改动',
  'outcome.requeued': '已重新排队',
  'outcome.cancelled': '已取消',
  'outcome.stop_requested': '已请求停止',
  'outcome.failed': '已标记为失败',
  'outcome.reloaded': '已重新加载',
  'outcome.refused': '被拒绝，沿用原有的导出类型',
  'action.link_revoke': '撤销下载链接',
  'action.approval_requested': '提交审批',
  'action.approval_decision': '审批处理',
  'outcome.revoked': '已撤销，链接不再可用',
  'outcome.awaiting': '等待审批人处理',
  'outcome.approved': '已批准，导出已排队',
  'outcome.rejected': '已驳回',
  'outcome.expired': '超时未审批，已自动驳回',
});

function maybe(key, fallback) {
  return i18n.has(key) ? t(key) : fallback;
}

function failText(code) {
  if (code === 'ROW_LIMIT_EXCEEDED') return t('fail.ROW_LIMIT_EXCEEDED.any');
  return maybe(`fail.${code}`, t('fail.default'));
}

function actor(name) {
  const user = /^user:[^/]*\/(.+)$/.exec(name);
  if (user) return user[1];
  const [kind, rest] = name.split(/:(.*)/s);
  if (kind === 'system') return t('actor.system', { name: rest });
  if (kind === 'operator') return t('actor.operator', { name: rest });
  return name;
}

/** What an audit row did; a retry that dropped the checkpoints says so. */
function actionText(a) {
  const fresh = a.action === 'manual_retry' && a.details?.fresh === true;
  return fresh ? t('action.manual_retry.fresh') : maybe(`action.${a.action}`, a.action);
}

function when(iso) {
  return iso ? h('time', { datetime: iso }, i18n.dateTime(iso)) : t('ops.none');
}

/** A clock time, with the date when it is not today (when a retry is due). */
function soon(iso) {
  const at = new Date(iso);
  const today = new Date().toDateString() === at.toDateString();
  return today ? new Intl.DateTimeFormat(i18n.locale, { hour: 'numeric', minute: '2-digit' }).format(at) : i18n.dateTimeShort(iso);
}

// The sentences the system writes in the audit trail (English, from the server), read
// back from the entry's details, or from the sentence itself for entries written
// before the details carried them.
const RESUMED = /^(\d+) of (\d+) shards done, ([\d,]+) rows kept$/;
const LEASE = /^the worker (\S+) stopped renewing its lease during (\w+)$/;
const DEAD = /^message (\S+) dead-lettered \(schemaVersion ([^)]+)\)$/;

/** What an audit entry's (or a dead letter's) reason says, in the page's language:
 * `{text, lang}`; a sentence the page does not know stays as written (English when the
 * system wrote it). */
function reasonOf(action, outcome, reason, details, actorName) {
  const d = details || {};
  const text = reason || '';
  if (action === 'resume' && outcome === 'resumed') {
    const m = RESUMED.exec(text);
    const [done, total, rows] = d.shardsDone != null ? [d.shardsDone, d.shardsTotal, d.rowsKept] : m ? [m[1], m[2], m[3].replace(/,/g, '')] : [];
    if (done != null) return { text: t('ops.reason.resumed', { done: i18n.number(+done), total: i18n.number(+total), rows: i18n.number(+rows) }) };
  }
  if (action === 'resume' && outcome === 'restarted') {
    const cause = d.cause || (/\(410\)/.test(text) ? 'snapshot_expired' : /shard plan changed/.test(text) ? 'plan_changed' : '');
    if (i18n.has(`ops.reason.restarted.${cause}`)) return { text: t(`ops.reason.restarted.${cause}`) };
  }
  const lease = action === 'lease_recovery' && LEASE.exec(text);
  if (lease) return { text: t('ops.reason.lease', { worker: lease[1], phase: maybe(`ops.phase.${lease[2]}`, lease[2]) }) };
  const dead = action === 'dead_letter' && DEAD.exec(text);
  if (dead) return { text: t('ops.reason.dead', { message: dead[1], version: dead[2] }) };
  return { text, lang: /^system:/.test(actorName || '') ? 'en' : null };
}

/** A table cell: its column's name (the label of a phone card) and one block of content. */
function cell(column, props, ...children) {
  const { class: extra, ...rest } = props || {};
  return h('td', { class: `c-${column}${extra ? ` ${extra}` : ''}`, dataset: { label: t(`ops.col.${column}`) }, ...rest }, h('div', { class: 'cell' }, ...children));
}

/** The export as its user named it, and its id (what operators search with). */
function exportCell(taskId, taskName) {
  return cell('task', {}, taskName ? h('span', { class: 'task-name' }, taskName) : null, h('span', { class: 'mono task-id' }, taskId || ''));
}

function table(columns, rows) {
  return h(
    'div',
    { class: 'table-wrap' },
    h('table', { class: 'ops-table' }, h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: `c-${c}` }, t(`ops.col.${c}`))))), h('tbody', {}, rows)),
  );
}

export class OpsView {
  /** @param {object} ctx `{notify, notifyError, unauthorized, onUnreachable, setOnline, typeTitle}` */
  constructor(ctx) {
    this.ctx = ctx;
    this.root = $('ops');
    this.timer = 0;
    this.running = false;
    this.seq = 0;
    this.data = null;
    this.retrying = null; // the task id the reason dialog is for
    this.dialog = this.buildDialog();
    this.relabel();
  }

  buildDialog() {
    const dialog = h(
      'dialog',
      { id: 'ops-retry', 'aria-labelledby': 'ops-retry-title' },
      h(
        'form',
        { id: 'ops-retry-form', class: 'dialog-form', novalidate: true },
        h('h2', { id: 'ops-retry-title' }),
        h('p', { class: 'hint', id: 'ops-retry-intro' }),
        h('div', { class: 'field' },
          h('label', { for: 'ops-reason', id: 'ops-reason-label' }),
          h('textarea', { id: 'ops-reason', rows: 3, maxlength: 500, 'aria-describedby': 'ops-reason-error' }),
          h('p', { class: 'error', id: 'ops-reason-error', hidden: true })),
        h('div', { class: 'field radios' },
          h('label', {}, h('input', { type: 'checkbox', id: 'ops-fresh', 'aria-describedby': 'ops-fresh-hint' }), h('span', { id: 'ops-fresh-label' })),
          h('p', { class: 'hint', id: 'ops-fresh-hint' })),
        h('div', { class: 'form-actions' },
          h('button', { type: 'button', class: 'btn', id: 'ops-retry-close', onclick: () => dialog.close() }),
          h('button', { type: 'submit', class: 'btn primary', id: 'ops-retry-submit' })),
      ),
    );
    dialog.querySelector('form').addEventListener('submit', (event) => this.submitRetry(event));
    document.body.append(dialog);
    dialog.querySelector('textarea').addEventListener('input', (event) => {
      if (event.target.value.trim().length >= 3) this.reasonError('');
    });
    return dialog;
  }

  /** Language changed (or first build): the view's frame, then the last figures again. */
  relabel() {
    this.root.replaceChildren(
      h('div', { class: 'list-head' }, h('h1', { id: 'ops-title', tabindex: '-1' }, t('ops.title'))),
      h('p', { class: 'hint' }, h('span', { id: 'ops-scope' }), ' ', h('span', { id: 'ops-updated' })),
      h('dl', { class: 'figures', id: 'ops-figures' }),
      h('section', { 'aria-labelledby': 'ops-q-title' }, h('h2', { id: 'ops-q-title' }, t('ops.quarantined')), h('p', { class: 'hint' }, t('ops.quarantinedIntro')), h('div', { id: 'ops-quarantined' })),
      h('section', { 'aria-labelledby': 'ops-f-title' }, h('h2', { id: 'ops-f-title' }, t('ops.failures')), h('div', { id: 'ops-failures' })),
      h('section', { 'aria-labelledby': 'ops-a-title' }, h('h2', { id: 'ops-a-title' }, t('ops.audit')), h('div', { id: 'ops-audit' })),
    );
    $('ops-retry-close').textContent = t('close');
    $('ops-retry-submit').textContent = t('ops.retrySubmit');
    $('ops-reason-label').textContent = t('ops.reason');
    $('ops-retry-intro').textContent = t('ops.retryIntro');
    $('ops-fresh-label').textContent = t('ops.fresh');
    $('ops-fresh-hint').textContent = t('ops.freshHint');
    if (this.retrying) $('ops-retry-title').textContent = t('ops.retryTitle', { task: this.retrying });
    if (this.data) this.render(this.data);
  }

  start(focus) {
    this.running = true;
    if (focus) $('ops-title').focus();
    this.refresh();
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
    this.seq += 1; // an answer on its way is dropped
  }

  schedule() {
    clearTimeout(this.timer);
    if (this.running && !document.hidden) this.timer = setTimeout(() => this.refresh(), POLL_MS);
  }

  async refresh() {
    clearTimeout(this.timer);
    const seq = ++this.seq;
    try {
      const { data } = await api.call('/api/v1/admin/overview');
      if (seq !== this.seq) return;
      this.ctx.setOnline();
      this.data = data;
      this.render(data);
    } catch (error) {
      if (seq !== this.seq) return;
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.unauthorized(error);
      if (error instanceof api.Unreachable) this.ctx.onUnreachable(error.reason);
      else {
        this.ctx.notifyError(error);
        if (error instanceof api.ApiError && error.status < 500) return; // asking again would not help
      }
    }
    this.schedule();
  }

  render(data) {
    $('ops-scope').textContent = data.tenant == null ? t('ops.intro.all') : t('ops.intro.tenant', { tenant: data.tenant });
    $('ops-updated').textContent = t('ops.updated', { time: i18n.time(new Date()) });
    const seconds = (s) => (s > 0 ? i18n.duration(s) : t('ops.none'));
    const scheduled = [i18n.number(data.outboxScheduled ?? 0)];
    if (data.outboxScheduled && data.outboxNextScheduledAt) {
      scheduled.push(h('span', { class: 'figure-note' }, t('ops.nextAt', { time: soon(data.outboxNextScheduledAt) })));
    }
    const figures = [
      ['pending', 'ops.pending', i18n.number(data.outboxPending)],
      ['oldest', 'ops.oldest', data.outboxPending ? seconds(data.outboxOldestAgeSeconds) : t('ops.none')],
      ['scheduled', 'ops.scheduled', scheduled],
      ['max-attempt', 'ops.maxAttempt', i18n.number(data.outboxMaxAttempt)],
      ['queue-age', 'ops.queueAge', seconds(data.queueAgeSeconds)],
    ];
    $('ops-figures').replaceChildren(...figures.map(([id, label, value]) => h('div', { class: 'figure', id: `fig-${id}` }, h('dt', {}, t(label)), h('dd', {}, value))));
    $('ops-quarantined').replaceChildren(
      data.quarantined.length
        ? table(['task', 'version', 'when', 'reason', 'state', 'actions'], data.quarantined.map((q) => {
          const why = reasonOf('dead_letter', 'quarantined', q.reason, null, 'system:dlq-handler');
          return h(
            'tr',
            { dataset: { eventId: q.command.eventId } },
            exportCell(q.command.taskId, q.command.taskName),
            cell('version', {}, i18n.number(q.command.dispatchVersion)),
            cell('when', {}, when(q.quarantinedAt)),
            cell('reason', { class: 'reason', lang: why.lang }, why.text),
            cell('state', { class: 'task-state' }, maybe(`state.${q.taskState}`, q.taskState)),
            cell('actions', {}, q.taskState === 'failed' ? this.retryButton(q.command.taskId) : null),
          );
        }))
        : h('p', { class: 'empty-line' }, t('ops.noQuarantined')),
    );
    const byType = Object.entries(data.failuresByType);
    $('ops-failures').replaceChildren(
      ...(byType.length
        ? [
          h('ul', { class: 'by-type', 'aria-label': t('ops.byType') }, byType.map(([type, n]) => h('li', { dataset: { type } }, t('ops.count', { type: this.ctx.typeTitle(type), n: i18n.number(n) })))),
          table(['task', 'type', 'owner', 'when', 'failure', 'actions'], data.failed.map((task) => h(
            'tr',
            { dataset: { taskId: task.taskId } },
            exportCell(task.taskId, task.taskName),
            cell('type', {}, this.ctx.typeTitle(task.exportType)),
            cell('owner', {}, task.owner),
            cell('when', {}, when(task.finishedAt)),
            cell('failure', { class: 'failure' }, h('span', {}, failText(task.errorCode)), h('span', { class: 'detail mono', lang: 'en' }, task.error || '')),
            cell('actions', {}, task.state === 'failed' ? this.retryButton(task.taskId) : null),
          ))),
        ]
        : [h('p', { class: 'empty-line' }, t('ops.noFailures'))]),
    );
    $('ops-audit').replaceChildren(
      data.audit.length
        ? table(['when', 'who', 'what', 'task', 'reason'], data.audit.map((a) => {
          const why = reasonOf(a.action, a.outcome, a.reason, a.details, a.actor);
          return h(
            'tr',
            {},
            cell('when', {}, when(a.at)),
            cell('who', { title: a.actor }, actor(a.actor)),
            cell('what', {}, t('ops.what', { action: actionText(a), outcome: maybe(`outcome.${a.outcome}`, a.outcome) })),
            a.taskId ? exportCell(a.taskId, a.taskName) : cell('task', {}, t('ops.none')),
            cell('reason', { class: 'reason', lang: why.lang }, why.text),
          );
        }))
        : h('p', { class: 'empty-line' }, t('ops.noAudit')),
    );
  }

  retryButton(taskId) {
    return h('button', { type: 'button', class: 'btn', 'aria-label': t('ops.retryLabel', { task: taskId }), onclick: () => this.askRetry(taskId) }, t('retry'));
  }

  askRetry(taskId) {
    this.retrying = taskId;
    $('ops-retry-title').textContent = t('ops.retryTitle', { task: taskId });
    $('ops-reason').value = '';
    $('ops-fresh').checked = false; // resuming is the default, as everywhere
    this.reasonError('');
    this.dialog.showModal();
    $('ops-reason').focus();
  }

  reasonError(message) {
    const box = $('ops-reason-error');
    box.replaceChildren(...(message ? errorNodes(message) : []));
    box.hidden = !message;
    if (message) $('ops-reason').setAttribute('aria-invalid', 'true');
    else $('ops-reason').removeAttribute('aria-invalid');
  }

  async submitRetry(event) {
    event.preventDefault();
    const reason = $('ops-reason').value.trim();
    if (reason.length < 3) {
      this.reasonError({ text: t('ops.reasonShort') });
      return $('ops-reason').focus();
    }
    const task = this.retrying;
    const fresh = $('ops-fresh').checked;
    const submit = $('ops-retry-submit');
    if (submit.disabled) return;
    submit.disabled = true;
    try {
      await api.call(`/api/v1/admin/tasks/${encodeURIComponent(task)}/retry`, { method: 'POST', body: { reason, fresh } });
      this.dialog.close();
      this.ctx.notify('ok', t(fresh ? 'ops.restarted' : 'ops.retried', { task }));
      this.refresh();
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) {
        this.dialog.close();
        return this.ctx.unauthorized(error);
      }
      if (error instanceof api.ApiError && error.field === 'reason') this.reasonError(describe(error));
      else {
        this.dialog.close();
        this.ctx.notifyError(error);
        this.refresh();
      }
    } finally {
      submit.disabled = false;
    }
  }
}
