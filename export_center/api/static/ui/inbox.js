// The notifications of the signed-in user: a bell in the top bar with the unread count,
// a panel listing the newest notifications (an export ready, failed, cancelled or about
// to expire; a schedule paused), live without a reload. Clicking one marks it read and
// opens its task in a small dialog, with a download button when the file is there.
//
// API: GET /api/v1/notifications?limit=N -> {items: [{id, type, createdAt, read, taskId,
// state, exportType, taskName, scheduleId, message, messageZh}], unreadCount};
// POST /api/v1/notifications/{id}/read; POST /api/v1/notifications/read-all. A server
// without them (404) hides the bell.

import { $, h, icon } from './dom.js';
import * as i18n from './i18n.js';
import * as api from './api.js';
import './inbox_i18n.js';

const { t } = i18n;

/** Seconds between two asks while the tab is visible, and while it is hidden. */
const POLL_SECONDS = 10;
const HIDDEN_POLL_SECONDS = 60;
const LIMIT = 20;

export class Inbox {
  /** @param {object} ctx `{typeTitle(code), download(task), onUnauthorized(error)}` */
  constructor(ctx) {
    this.ctx = ctx;
    this.toggle = $('inbox-toggle');
    this.badge = $('inbox-badge');
    this.panel = $('inbox');
    this.list = $('inbox-list');
    this.dialog = $('task-card');
    this.items = [];
    this.unread = 0;
    this.timer = 0;
    this.running = false;
    this.toggle.addEventListener('click', () => this.setOpen(this.panel.hidden));
    $('inbox-read-all').addEventListener('click', () => this.readAll());
    $('task-card-close').addEventListener('click', () => this.dialog.close());
    document.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && !this.panel.hidden) {
        this.setOpen(false);
        this.toggle.focus();
      }
    });
    document.addEventListener('click', (event) => {
      if (!this.panel.hidden && !this.panel.contains(event.target) && !this.toggle.contains(event.target)) this.setOpen(false);
    });
    document.addEventListener('visibilitychange', () => {
      if (this.running && !document.hidden) this.poll();
    });
  }

  /** Start asking (after sign-in). */
  start() {
    this.running = true;
    this.poll();
  }

  /** Stop asking and hide the bell (sign-out). */
  stop() {
    this.running = false;
    clearTimeout(this.timer);
    this.toggle.hidden = true;
    this.setOpen(false);
  }

  setOpen(open) {
    this.panel.hidden = !open;
    this.toggle.setAttribute('aria-expanded', String(open));
    if (open) {
      this.render();
      this.poll();
    }
  }

  async poll() {
    clearTimeout(this.timer);
    if (!this.running) return;
    try {
      const { data } = await api.call(`/api/v1/notifications?limit=${LIMIT}`);
      this.items = Array.isArray(data?.items) ? data.items : [];
      this.unread = Number(data?.unreadCount) || 0;
      this.toggle.hidden = false;
      this.render();
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 404) {
        this.toggle.hidden = true; // an export center without notifications
        return;
      }
      if (error instanceof api.ApiError && error.status === 401) {
        this.ctx.onUnauthorized(error);
        return;
      }
      // Offline or busy: the page's banner says so; ask again later.
    }
    const wait = document.hidden ? HIDDEN_POLL_SECONDS : POLL_SECONDS;
    this.timer = setTimeout(() => this.poll(), wait * 1000);
  }

  /** Draw the bell and, when open, the panel (also after a language switch). */
  render() {
    const n = this.unread;
    this.badge.hidden = n === 0;
    this.badge.textContent = n > 99 ? '99+' : String(n);
    this.toggle.setAttribute('aria-label', n ? t('inboxUnread', { n: i18n.number(n) }) : t('inbox'));
    this.toggle.title = this.toggle.getAttribute('aria-label');
    $('inbox-read-all').disabled = n === 0;
    if (this.panel.hidden) return;
    if (!this.items.length) {
      this.list.replaceChildren(h('li', { class: 'inbox-empty' }, t('inboxEmpty')));
      return;
    }
    this.list.replaceChildren(...this.items.map((item) => this.row(item)));
  }

  row(item) {
    const zh = i18n.locale === 'zh-CN';
    const text = (zh ? item.messageZh : item.message) || item.message || t(`event.${item.type}`);
    const state = typeof item.state === 'string' ? item.state : '';
    const kind = item.type === 'schedule.paused' ? 'failed' : state || 'queued';
    return h(
      'li',
      { class: `inbox-item${item.read ? '' : ' is-unread'}` },
      h(
        'button',
        {
          type: 'button',
          class: 'inbox-open',
          dataset: { id: String(item.id) },
          onclick: () => this.open(item),
        },
        icon(['succeeded', 'failed', 'cancelled', 'expired'].includes(kind) ? kind : 'queued'),
        h(
          'span',
          { class: 'inbox-text' },
          h('span', { class: 'inbox-message' }, text),
          h('span', { class: 'inbox-time sub' }, i18n.dateTimeShort(item.createdAt)),
        ),
        item.read ? null : h('span', { class: 'sr-only' }, t('inboxNew')),
      ),
    );
  }

  async open(item) {
    if (!item.read) {
      item.read = true;
      this.unread = Math.max(0, this.unread - 1);
      this.render();
      api.call(`/api/v1/notifications/${encodeURIComponent(item.id)}/read`, { method: 'POST' }).catch(() => {});
    }
    this.setOpen(false);
    if (item.taskId) await this.showTask(item.taskId);
  }

  async readAll() {
    try {
      await api.call('/api/v1/notifications/read-all', { method: 'POST' });
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
    }
    for (const item of this.items) item.read = true;
    this.unread = 0;
    this.render();
  }

  /** The task of a notification, in a dialog: name, state, rows, file, and Download. */
  async showTask(taskId) {
    const body = $('task-card-body');
    let task;
    try {
      ({ data: task } = await api.call(`/api/v1/exports/${encodeURIComponent(taskId)}`));
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      const gone = error instanceof api.ApiError && error.status === 404;
      body.replaceChildren(h('p', { class: 'notice' }, t(gone ? 'taskCardGone' : 'taskCardUnavailable')));
      $('task-card-title').textContent = t('taskCard');
      if (!this.dialog.open) this.dialog.showModal();
      return;
    }
    $('task-card-title').textContent = task.taskName || t('taskCard');
    const facts = [
      [t('exportType'), this.ctx.typeTitle(task.exportType)],
      [t('state'), t(`state.${task.state}`)],
      [t('taskCardRows'), i18n.number(Number(task.processed) || 0)],
      task.finishedAt ? [t('taskCardFinished'), i18n.dateTime(task.finishedAt)] : null,
      task.expiresAt ? [t('taskCardUntil'), i18n.dateTime(task.expiresAt)] : null,
      task.error?.message ? [t('taskCardError'), task.error.message] : null,
      task.scheduleId ? [t('taskCardSchedule'), String(task.scheduleId)] : null,
    ].filter(Boolean);
    const actions = [];
    if (task.state === 'succeeded' && task.downloadUrl) {
      actions.push(h('button', { type: 'button', class: 'btn primary', id: 'task-card-download', onclick: () => this.ctx.download(task) }, icon('download'), t('download')));
    }
    body.replaceChildren(
      h('dl', { class: 'manifest-facts' }, ...facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
      actions.length ? h('div', { class: 'form-actions' }, ...actions) : null,
    );
    if (!this.dialog.open) this.dialog.showModal();
  }
}
