// The task table: one row per export, patched in place on each refresh (focus and
// open details survive a poll), shown as cards on a narrow screen (CSS).

import { h, icon } from './dom.js';
import * as i18n from './i18n.js';
import { rejectedText } from './approvals_i18n.js';

const { t } = i18n;

export const ACTIVE = new Set(['queued', 'running']);
export const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired', 'rejected']);

/** Runs in parts (day windows, checkpointed): a retry resumes, "Start over" does not. */
export function sharded(task) {
  return task.shardsTotal != null;
}

/** The actions a user may take on `task` now (no Retry where a retry meets the same end).
 * `restart` is the retry of a sharded export that starts every part from zero. */
export function actionsOf(task, canCreate) {
  const list = [];
  if (task.state === 'succeeded' && task.downloadUrl) list.push('download');
  if (ACTIVE.has(task.state) || task.state === 'awaiting_approval') list.push('cancel');
  if (task.state === 'failed' && task.retryable !== false) {
    list.push('retry');
    if (sharded(task)) list.push('restart');
  }
  if (TERMINAL.has(task.state) && canCreate(task.exportType)) list.push('again');
  return list;
}

/** Queued again after a failed attempt: the automatic retry is pending. */
export function retryPending(task) {
  return task.state === 'queued' && Boolean(task.error);
}

function cause(task) {
  const code = task.error?.code;
  return t(i18n.has(`cause.${code}`) ? `cause.${code}` : 'cause.default');
}

function retryClock(task) {
  const at = task.nextRetryAt ? Date.parse(task.nextRetryAt) : NaN;
  return Number.isFinite(at) && at > Date.now() ? i18n.time(new Date(at)) : null;
}

/** Who cancelled `task`, as `viewer` (a user id) reads it. */
export function cancelledBy(task, viewer) {
  const by = task.cancelledBy;
  if (!by) return t('cancelledNote');
  if (by.user && by.user === viewer && by.role !== 'operator') return t('cancelledByYou');
  if (by.role === 'owner') return t('cancelledByOwner', { user: by.user });
  if (by.role === 'administrator') return t('cancelledByAdmin', { user: by.user });
  if (by.role === 'operator') return t('cancelledByOperator');
  return t('cancelledNote');
}

/** "17:50" today, a date and time on another day (when a retry by hand was asked for). */
function shortWhen(iso) {
  const at = new Date(iso);
  const today = new Date();
  return at.toDateString() === today.toDateString() ? i18n.clock(at) : i18n.dateTimeShort(iso);
}

/** What to tell the user about a task beyond its state: `{kind, text, detail}` or null.
 * The server's own sentence is shown (as a detail) only for a code the page does not know.
 * `viewer` is the signed-in user id (a cancel of their own reads "You cancelled"). */
export function explain(task, spec, viewer) {
  if (task.state === 'succeeded') {
    // A cancel that lost the race: the export had finished; its file is there.
    const race = task.cancelRequested ? `${t('raceNote')} ` : '';
    if (task.warning) return { kind: 'warning', text: `${race}${t('warning')}`, detail: task.warning };
    if (race) return { kind: 'info', text: race.trim() };
    return task.processed === 0 ? { kind: 'info', text: t('zeroRows') } : null;
  }
  if (task.state === 'expired') return { kind: 'info', text: t('expiredNote') };
  if (task.state === 'cancelled') return { kind: 'info', text: cancelledBy(task, viewer) };
  if (task.state === 'awaiting_approval') return { kind: 'info', text: t('awaitingNote') };
  if (task.state === 'rejected') return { kind: 'error', text: rejectedText(task), detail: null };
  const error = task.error;
  if (!error) return null;
  if (task.state !== 'failed') {
    const time = retryClock(task);
    const vars = { n: i18n.number(task.attempts), max: i18n.number(task.maxAttempts || task.attempts), cause: cause(task), time };
    return { kind: 'warning', text: t(time ? 'retryingNote' : 'retryingNowNote', vars) };
  }
  const known = error.code && i18n.has(`fail.${error.code}`);
  const text = failureText(task, spec);
  // A retry by hand ran and failed again: say so, or the row looks as if nothing happened.
  const said = task.lastRetry ? t('failedAgain', { time: shortWhen(task.lastRetry.at), why: text }) : text;
  return { kind: 'error', text: said, detail: known || error.code === 'ROW_LIMIT_EXCEEDED' ? null : error.message };
}

/** Why a failed export failed, in the page's sentence for its code. */
export function failureText(task, spec) {
  const code = task.error?.code;
  if (code === 'ROW_LIMIT_EXCEEDED') {
    return spec?.maxRows ? t('fail.ROW_LIMIT_EXCEEDED', { max: i18n.number(spec.maxRows) }) : t('fail.ROW_LIMIT_EXCEEDED.any');
  }
  return t(code && i18n.has(`fail.${code}`) ? `fail.${code}` : 'fail.default');
}

function badge(state) {
  return h('span', { class: `badge badge-${state}` }, icon(state), h('span', {}, t(`state.${state}`)));
}

function when(label, iso) {
  if (!iso) return null;
  return h('div', {}, h('dt', {}, label), h('dd', {}, h('time', { datetime: iso }, i18n.dateTime(iso))));
}

/** Parameters in a line a person reads: "1995-09-01 – 1995-09-30 · Order status: O". */
function summary(task, ctx) {
  const spec = ctx.typeOf(task.exportType);
  const params = { ...task.parameters };
  const parts = [];
  const range = spec?.dateRange;
  if (range) {
    const [a, b] = range.map((name) => params[name]);
    if (a && b) parts.push(`${a} – ${b}`);
    else if (a) parts.push(t('rangeFrom', { d: a }));
    else if (b) parts.push(t('rangeTo', { d: b }));
    for (const name of range) delete params[name];
  }
  // In the order the type declares its fields (the API sorts the keys).
  const order = (spec?.parameters || []).map((x) => x.name);
  const rank = (name) => (order.includes(name) ? order.indexOf(name) : order.length);
  for (const [name, value] of Object.entries(params).sort(([a], [b]) => rank(a) - rank(b))) {
    const p = spec?.parameters.find((x) => x.name === name);
    const label = p ? (i18n.locale === 'zh-CN' ? p.titleZh : p.title) : name;
    const shown = typeof value === 'boolean' ? t(value ? 'yes' : 'no') : i18n.valueTitle(p, value);
    parts.push(`${label}${i18n.locale === 'zh-CN' ? '：' : ': '}${shown}`);
  }
  if (!parts.length) parts.push(t('allData'));
  return parts.join(' · ');
}

function note(info) {
  if (!info) return null;
  return h(
    'div',
    { class: `note note-${info.kind}` },
    h('span', {}, info.text),
    info.detail
      ? h('details', {}, h('summary', {}, t('details')), h('p', { lang: 'en', class: 'detail' }, info.detail))
      : null,
  );
}

class Row {
  constructor(table, task) {
    this.table = table;
    this.tr = h('tr', { dataset: { taskId: task.taskId } });
    this.cells = {};
    this.sigs = {};
    this.task = null;
  }

  cell(name) {
    if (!this.cells[name]) this.cells[name] = h('td', { class: `c-${name}` });
    return this.cells[name];
  }

  /** Replace a cell's content only when what it shows changed. */
  patch(name, sig, build) {
    const td = this.cell(name);
    td.dataset.label = t(`col.${name}`);
    const key = `${i18n.locale}|${sig}`;
    if (this.sigs[name] === key) return td;
    this.sigs[name] = key;
    td.replaceChildren(...[build()].flat().filter(Boolean));
    return td;
  }

  update(task) {
    const ctx = this.table.ctx;
    const name = task.taskName;
    this.task = task;
    this.tr.className = `state-${task.state}`;
    const info = explain(task, ctx.typeOf(task.exportType), ctx.viewer?.());
    const params = summary(task, ctx);
    const stopping = ACTIVE.has(task.state) && ctx.isCancelling(task.taskId);
    const waiting = retryPending(task);
    // Attempts are worth a word only when there was more than one (a manual retry starts
    // a new run: its count starts again at 1). A task waiting for its automatic retry says
    // which attempt failed, why and when it goes on once, in its note.
    const attempt = task.attempts > 1 && !waiting
      ? t('attemptOf', { n: i18n.number(task.attempts), max: i18n.number(Math.max(task.maxAttempts || 0, task.attempts)) })
      : null;
    const cells = [
      this.patch('task', JSON.stringify([name, params, info]), () => [
        h('span', { class: 'task-name' }, name),
        name.includes(params) ? null : h('span', { class: 'params' }, params),
        note(info),
      ]),
    ];
    if (ctx.showOwner) cells.push(this.patch('owner', task.owner, () => task.owner));
    let phase = null;
    if (stopping) phase = t('stopping');
    else if (task.state === 'running') phase = t(`phase.${task.phase}`);
    else if (waiting) phase = t('waitingRetry');
    cells.push(
      this.patch('type', task.exportType + task.format, () => [
        h('span', {}, ctx.typeTitle(task.exportType)),
        h('span', { class: 'tag' }, task.format.toUpperCase()),
      ]),
      this.patch('state', JSON.stringify([task.state, phase, attempt]), () => [
        badge(task.state),
        phase ? h('span', { class: 'phase' }, phase) : null,
        attempt ? h('span', { class: 'sub attempt' }, attempt) : null,
      ]),
      this.progress(task),
      this.patch('times', JSON.stringify([task.state, task.requestedAt, task.startedAt, task.finishedAt, task.attempts]), () => {
        // A queued task shows no start: the one it holds is of an attempt that failed.
        const started = task.state === 'queued' ? null : task.startedAt;
        const label = task.attempts > 1 ? t('startedAttempt', { n: i18n.number(task.attempts) }) : t('started');
        return h('dl', { class: 'times' }, when(t('requested'), task.requestedAt), when(label, started), when(t('finished'), task.finishedAt));
      }),
      this.patch('file', JSON.stringify([task.state, task.sizeBytes, task.expiresAt, Boolean(task.downloadUrl)]), () => this.file(task)),
      this.actions(task),
    );
    const copy = this.cells.file.querySelector('[data-action="copy"]');
    if (copy) copy.title = task.downloadExpiresAt ? t('copyLinkHint', { time: i18n.dateTimeShort(task.downloadExpiresAt) }) : '';
    if (this.tr.children.length !== cells.length || cells.some((td, i) => this.tr.children[i] !== td)) {
      this.tr.replaceChildren(...cells);
    }
  }

  progress(task) {
    const td = this.cell('progress');
    td.dataset.label = t('col.progress');
    const known = task.total != null && task.total > 0;
    const mode = `${i18n.locale}|${task.state}|${known}|${task.error ? 1 : 0}`;
    if (td.dataset.mode !== mode) {
      td.dataset.mode = mode;
      const showBar = task.state === 'running' || task.state === 'succeeded' || (task.state === 'cancelled' && known);
      this.bar = showBar ? h('progress', { max: 1, 'aria-label': t('progressOf', { name: task.taskName }) }) : null;
      this.pct = h('span', { class: 'pct' });
      this.line1 = h('span', { class: 'rows' });
      this.shards = h('span', { class: 'shards' });
      this.line2 = h('span', { class: 'sub' });
      td.replaceChildren(...[this.bar && h('div', { class: 'bar' }, this.bar, this.pct), this.line1, this.shards, this.line2].filter(Boolean));
    }
    const done = i18n.number(task.processed || 0);
    const total = known ? i18n.number(task.total) : null;
    let fraction = null;
    if (task.state === 'succeeded') fraction = 1;
    else if ((task.state === 'running' || task.state === 'cancelled') && known) {
      fraction = Math.min(1, Math.floor((task.processed / task.total) * 100) / 100);
    }
    if (task.state === 'running' && !task.processed && task.shardsDone > 0) fraction = null; // resuming
    if (this.bar) {
      if (fraction == null) this.bar.removeAttribute('value');
      else this.bar.value = fraction;
    }
    this.pct.textContent = fraction == null ? '' : i18n.percent(fraction);
    let line1 = '';
    let line2 = '';
    let parts = '';
    if (retryPending(task)) {
      // Said once, in the row's note (which attempt failed, why, and when it goes on).
    } else if (task.state === 'queued') {
      line1 = t('waiting');
    } else if (task.state === 'running') {
      // A resumed export with finished parts and no row written yet by this attempt:
      // "0 rows so far" next to "3 of 16 parts done" would read as starting from zero.
      const resuming = !task.processed && task.shardsDone > 0;
      if (!resuming) line1 = known ? t('rowsOf', { done, total }) : t('rowsSoFar', { done });
      // "Parts", not "days": a long range puts several days in one part, and one part
      // alone (a single day, or no dates) is not worth a line.
      if (task.shardsTotal > 1) {
        parts = t('shardsOf', { done: i18n.number(task.shardsDone || 0), total: i18n.number(task.shardsTotal) });
      }
      const bits = [];
      if (task.rowsPerSecond != null) bits.push(t('rate', { rate: i18n.number(Math.round(task.rowsPerSecond)) }));
      if (task.etaSeconds != null) bits.push(t('eta', { eta: i18n.duration(task.etaSeconds) }));
      line2 = bits.join(' · ');
    } else if (task.state === 'succeeded' || task.state === 'expired') {
      line1 = t('rowsDone', { done });
    } else if (task.state === 'cancelled' && task.processed > 0) {
      line1 = known ? t('stoppedAt', { done, total }) : t('stoppedAfter', { done });
    } // failed: the count is of the last progress write, not where it stopped
    this.line1.textContent = line1;
    this.shards.textContent = parts;
    this.shards.hidden = !parts;
    this.line2.textContent = line2;
    this.line2.hidden = !line2;
    // Nothing to show (a failed task, a waiting retry): a phone card drops the label too.
    td.classList.toggle('is-empty', !this.bar && !line1 && !parts && !line2);
    return td;
  }

  file(task) {
    // An expired file's downloads stay on record: its owner and admins may still look.
    if (task.state === 'expired') return [h('span', { class: 'sub' }, t('fileDeleted')), this.downloadsButton(task)];
    if (task.state !== 'succeeded') return h('span', { class: 'sub', 'aria-label': t('noFileLabel') }, t('noFile'));
    // "Download until" is the file's retention: the Download button renews its link. A
    // copied link has its own, shorter life, which Copy link says (its title, its toast).
    const ctx = this.table.ctx;
    return [
      h('span', {}, i18n.bytes(task.sizeBytes)),
      task.expiresAt ? h('span', { class: 'sub' }, t('availableUntil', { date: i18n.dateTimeShort(task.expiresAt) })) : null,
      ctx.onCopy && task.downloadUrl
        ? h('button', {
          type: 'button',
          class: 'btn ghost small copy-link',
          dataset: { action: 'copy' },
          'aria-label': t('copyLinkLabel', { name: task.taskName }),
          onclick: (event) => ctx.onCopy(this.task, event),
        }, t('copyLink'))
        : null,
      ctx.onManifest
        ? h('button', {
          type: 'button',
          class: 'btn ghost small manifest-link',
          dataset: { action: 'manifest' },
          'aria-label': t('manifestLabel', { name: task.taskName }),
          onclick: (event) => ctx.onManifest(this.task, event),
        }, t('manifest'))
        : null,
      this.downloadsButton(task),
    ];
  }

  downloadsButton(task) {
    const ctx = this.table.ctx;
    if (!ctx.onDownloads) return null;
    return h('button', {
      type: 'button',
      class: 'btn ghost small downloads-link',
      dataset: { action: 'downloads' },
      'aria-label': t('downloadsLabel', { name: task.taskName }),
      onclick: (event) => ctx.onDownloads(this.task, event),
    }, t('downloadsButton'));
  }

  actions(task) {
    const ctx = this.table.ctx;
    const stopping = ctx.isCancelling(task.taskId);
    const list = actionsOf(task, ctx.canCreate).filter((action) => !(stopping && action === 'cancel'));
    const unlikely = list.includes('retry') && task.retryUnlikelyToHelp;
    const hintId = `retry-hint-${task.taskId}`;
    const td = this.patch('actions', `${list.join(',')}|${unlikely}`, () => [
      h('div', { class: 'actions' }, list.map((action) => this.button(action, unlikely ? hintId : null))),
      unlikely ? h('p', { class: 'sub retry-hint', id: hintId }, t('retryUnlikely')) : null,
    ]);
    const link = td.querySelector('a[data-action="download"]');
    if (link) link.href = ctx.linkOf(task.downloadUrl); // renewed on each refresh
    return td;
  }

  /** Put the focus on this row's state (after the button that had it went away). */
  focusState() {
    const td = this.cells.state;
    if (!td) return;
    td.setAttribute('tabindex', '-1');
    td.focus();
  }

  button(action, hintId) {
    const ctx = this.table.ctx;
    // A sharded export's Retry resumes: its name and tooltip say so (the row's actions
    // list has `restart` then, so the cell is rebuilt when that changes).
    const resumes = action === 'retry' && sharded(this.task);
    const label = t(resumes ? 'retryResumeLabel' : `${action}Label`, { name: this.task.taskName });
    const onclick = (event) => ctx.onAction(action, this.task, event);
    if (action === 'download') {
      return h('a', { class: 'btn primary', dataset: { action }, download: '', rel: 'noreferrer', 'aria-label': label, onclick }, icon('download'), h('span', {}, t('download')));
    }
    const kind = action === 'cancel' ? 'btn danger' : 'btn';
    const title = resumes ? t('retryResume') : action === 'restart' ? t('restartHint') : null;
    const hint = hintId && (action === 'retry' || action === 'restart') ? hintId : null;
    return h('button', { type: 'button', class: kind, dataset: { action }, 'aria-label': label, 'aria-describedby': hint, title, onclick }, t(action));
  }
}

export class TaskTable {
  /**
   * @param {object} ctx `{showOwner, typeOf, typeTitle, canCreate, isCancelling, linkOf, onAction,
   *   announce, viewer, onCopy, onFinished, isNew}`
   */
  constructor(head, body, ctx) {
    this.head = head;
    this.body = body;
    this.ctx = ctx;
    this.rows = new Map();
    this.watch = new Map(); // taskId -> {state, quarter}: what was last announced
  }

  columns() {
    const names = ['task', ...(this.ctx.showOwner ? ['owner'] : []), 'type', 'state', 'progress', 'times', 'file', 'actions'];
    const key = `${i18n.locale}|${names}`;
    if (this.headKey === key) return;
    this.headKey = key;
    this.head.replaceChildren(...names.map((name) => h('th', { scope: 'col', class: `c-${name}` }, t(`col.${name}`))));
  }

  /** Show `items` in this order, reusing rows; announce what changed since last time. */
  render(items, { announce = true } = {}) {
    this.columns();
    const seen = new Set();
    const messages = [];
    items.forEach((task, index) => {
      seen.add(task.taskId);
      let row = this.rows.get(task.taskId);
      if (!row) {
        row = new Row(this, task);
        this.rows.set(task.taskId, row);
      }
      row.update(task);
      if (this.body.children[index] !== row.tr) this.body.insertBefore(row.tr, this.body.children[index] || null);
      const message = this.change(task, announce);
      if (announce && message) messages.push(message);
    });
    for (const [id, row] of this.rows) {
      if (!seen.has(id)) {
        row.tr.remove();
        this.rows.delete(id);
      }
    }
    if (messages.length) this.ctx.announce(messages.join(' '));
  }

  /** A state change or a new quarter of progress is worth one polite announcement. An
   * export that ended is first offered to `ctx.onFinished(task)` (toasts, the tab title, a
   * notification); when it says it told the user, the announcement is not repeated. An
   * export created in this tab that is already over when first seen ended too. */
  change(task, live) {
    const quarter = task.state === 'running' && task.total ? Math.floor((task.processed / task.total) * 4) : 0;
    const before = this.watch.get(task.taskId);
    this.watch.set(task.taskId, { state: task.state, quarter });
    const ended = TERMINAL.has(task.state) && (before ? !TERMINAL.has(before.state) : this.ctx.isNew?.(task.taskId));
    if (live && ended && this.ctx.onFinished?.(task)) return null;
    if (!before) return null;
    const name = task.taskName;
    if (before.state !== task.state) {
      const key = { succeeded: 'announceDone', failed: 'announceFailed', cancelled: 'announceCancelled', running: 'announceRunning' }[task.state];
      return key ? t(key, { name }) : null;
    }
    if (task.state === 'running' && quarter > before.quarter && quarter < 4) {
      return t('announceProgress', { name, pct: i18n.percent(quarter / 4) });
    }
    return null;
  }

  /** Language changed: rebuild every cell. */
  relabel() {
    for (const row of this.rows.values()) {
      row.sigs = {};
      if (row.cells.progress) delete row.cells.progress.dataset.mode;
    }
  }

  clear() {
    this.rows.clear();
    this.watch.clear();
    this.body.replaceChildren();
  }
}
