// What the buttons of a task row do (cancel, retry, start over, download, copy the link),
// what the page says when an export it watched ends, and after a create. The list's
// state and the page's other parts are handed over once by app.js (wire).

import { h } from './dom.js';
import * as i18n from './i18n.js';
import * as api from './api.js';
import { ACTIVE, cancelledBy, failureText, sharded } from './tasks.js';
import { confirmDialog, copied, notify, notifyError } from './messages.js';

const { t } = i18n;

// The page's state and parts (app.js): set by wire() before any button can be pressed.
let app;
let form;
let quota;
let alerts;
let renderList;
let refresh;
let unauthorized;
let setOffline;

/** Hand over the list's state (`app`), the create form, the quota line, the alerts and the
 * page's renderList(), refresh(), unauthorized(error) and setOffline(retry, reason). */
export function wire(page) {
  ({ app, form, quota, alerts, renderList, refresh, unauthorized, setOffline } = page);
}

export async function onAction(action, task, event) {
  if (action === 'download') return download(task, event);
  if (action === 'again') return form.open(task);
  const button = event.currentTarget;
  const name = task.taskName;
  if (button.dataset.busy) return;
  if (action === 'cancel' && task.state === 'running') {
    const done = i18n.number(task.processed || 0);
    const sure = await confirmDialog({
      title: t('confirmTitle', { name }),
      text: task.total ? t('confirmText', { done, total: i18n.number(task.total) }) : t('confirmTextSoFar', { done }),
      yes: t('confirmYes'),
      no: t('confirmKeep'),
    });
    if (!sure) return button.isConnected && button.focus();
  }
  if (action === 'restart') {
    const sure = await confirmDialog({
      title: t('restartTitle', { name }),
      text: t('restartText'),
      yes: t('restart'),
      no: t('restartKeep'),
    });
    if (!sure) return button.isConnected && button.focus();
  }
  if (button.dataset.busy) return;
  button.dataset.busy = '1';
  app.focusTask = task.taskId;
  if (button.isConnected) button.focus();
  button.setAttribute('aria-disabled', 'true'); // not `disabled`: that would drop the focus
  button.setAttribute('aria-busy', 'true');
  try {
    // Start over is the retry that drops a sharded export's finished parts.
    const path = action === 'restart' ? 'retry?fresh=true' : action;
    const { data } = await api.call(`/api/v1/exports/${encodeURIComponent(task.taskId)}/${path}`, { method: 'POST' });
    if (action === 'cancel') {
      if (data.state === 'cancelled') notify('ok', t('cancelledNow', { name }));
      else if (ACTIVE.has(data.state)) {
        app.cancelling.add(task.taskId);
        // Until the export ends: then "is cancelled" (or "finished first") replaces it.
        stopped(task.taskId);
        app.stopping.set(task.taskId, notify('ok', t('cancelling', { name }), null, { sticky: true }));
      }
    } else {
      const said = action === 'restart' ? 'restarted' : sharded(task) ? 'resumed' : 'retried';
      app.acted.add(task.taskId);
      notify('ok', t(said, { name }));
    }
    app.items = app.items.map((x) => (x.taskId === data.taskId ? data : x));
    renderList();
  } catch (error) {
    if (error instanceof api.ApiError && error.status === 401) return unauthorized(error);
    if (error instanceof api.Unreachable) setOffline(refresh, error.reason);
    if (!(action === 'cancel' && error.code === 'NOT_CANCELLABLE' && await finishedFirst(task))) notifyError(error);
  } finally {
    delete button.dataset.busy;
    button.removeAttribute('aria-disabled');
    button.removeAttribute('aria-busy');
  }
  refresh();
}

/** The signed link is followed by the browser; a stale one is renewed first. So the
 * button works until the file's retention ends ("Download until"), whatever the age of
 * the link it holds. */
export async function download(task, event) {
  const now = Date.now();
  if (task.expiresAt && Date.parse(task.expiresAt) <= now) {
    event.preventDefault();
    notify('error', t('err.FILE_EXPIRED'));
    return refresh();
  }
  if (!task.downloadExpiresAt || Date.parse(task.downloadExpiresAt) - now > 10000) return;
  event.preventDefault();
  notify('info', t('refreshingLink'));
  await downloadFresh(task);
}

/** Ask for the task again (a link signed now) and let the browser follow it. */
export async function downloadFresh(task) {
  try {
    const { data } = await api.call(`/api/v1/exports/${encodeURIComponent(task.taskId)}`);
    if (data.downloadUrl) {
      const link = h('a', { href: api.url(data.downloadUrl), download: '', rel: 'noreferrer', hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
    } else notify('error', t(data.state === 'expired' ? 'err.FILE_EXPIRED' : 'err.NO_FILE'));
  } catch (error) {
    if (error instanceof api.ApiError && error.status === 401) return unauthorized(error);
    notifyError(error);
  }
  refresh();
}

/** Copy the task's link and say how long it works (a copied link is a credential of its
 * own, valid until downloadExpiresAt; the page's button renews its link by itself). */
export async function copyLink(task) {
  let { downloadUrl: url, downloadExpiresAt: until } = task;
  if (!until || Date.parse(until) - Date.now() < 3600 * 1000) {
    try {
      ({ data: { downloadUrl: url, downloadExpiresAt: until } } = await api.call(`/api/v1/exports/${encodeURIComponent(task.taskId)}`));
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return unauthorized(error);
      return notifyError(error);
    }
    if (!url) return notify('error', t('err.NO_FILE'));
  }
  const href = api.url(url);
  if (await copied(href)) return notify('ok', t('linkCopied', { time: i18n.dateTimeShort(until) }), null, { sticky: true });
  const box = h('input', { class: 'copy-box', readonly: true, value: href, 'aria-label': t('copyLink'), onfocus: (e) => e.target.select() });
  notify('error', t('linkNotCopied'), null, { extra: box });
  box.focus();
}

/** A cancel refused because the export had just succeeded: tell the person who pressed
 * Cancel that the file is ready (true), instead of "it cannot be cancelled". */
async function finishedFirst(task) {
  try {
    const { data } = await api.call(`/api/v1/exports/${encodeURIComponent(task.taskId)}`);
    if (data.state !== 'succeeded') return false;
    app.cancelling.add(task.taskId); // finished() then says it lost the race
    app.items = app.items.map((x) => (x.taskId === data.taskId ? data : x));
    renderList();
    return true;
  } catch {
    return false;
  }
}

/** The "Stopping…" toast of `taskId` is over (the export ended, or a new one replaces it). */
export function stopped(taskId) {
  app.stopping.get(taskId)?.remove();
  app.stopping.delete(taskId);
}

/** An export ended while this page watched it: say so, with the next step. Returns true
 * when a toast told it (the table then does not announce it a second time). */
export function finished(task) {
  if (task.state === 'succeeded') quota.load(); // its rows count now
  const name = task.taskName;
  const cancelling = app.cancelling.has(task.taskId) || app.stopping.has(task.taskId);
  stopped(task.taskId);
  const mine = task.owner === app.me?.user || app.acted.has(task.taskId) || cancelling;
  const downloadIt = { label: t('download'), icon: 'download', onClick: () => downloadFresh(task) };
  if (task.state === 'succeeded' && mine) {
    // A cancel that lost the race tells the person who cancelled that the file is there.
    const text = cancelling ? t('raceToast', { name }) : t('doneToast', { name });
    notify('ok', text, null, { action: downloadIt, sticky: true });
    alerts.ended('ready', t('doneToast', { name }), t('notifyReadyBody'), `export-${task.taskId}`);
    return true;
  }
  if (task.state === 'failed' && mine) {
    const why = failureText(task, app.typesSeen.get(task.exportType));
    const again = Boolean(task.lastRetry);
    notify('error', t(again ? 'failedAgainToast' : 'failedToast', { name, why }));
    alerts.ended('failed', t(again ? 'failedAgainTitle' : 'failedTitle', { name }), why, `export-${task.taskId}`);
    return true;
  }
  if (task.state === 'cancelled') {
    if (cancelling) {
      notify('ok', t('cancelledNow', { name }));
      return true;
    }
    // Someone else stopped one of my exports: worth a word.
    if (mine && task.cancelledBy?.user !== app.me?.user) {
      notify('info', t('cancelledToast', { name, who: cancelledBy(task, app.me?.user) }));
      return true;
    }
  }
  return false;
}

export function created(answer, body) {
  const { status, data, headers } = answer;
  let text = t('created', { name: body.taskName });
  if (status === 200) text = t(headers.get('Duplicate-Of-Active-Task') ? 'duplicate' : 'replayed');
  else app.created.add(data.taskId);
  const f = app.filters;
  const hidden = (f.state && !f.state.split(',').includes(data.state))
    || (f.exportType && f.exportType !== body.exportType)
    || (f.owner && f.owner !== app.me.user);
  notify('ok', hidden ? `${text} ${t('hiddenByFilters')}` : text);
  quota.load();
  app.fresh = data.taskId;
  app.cursors = [null];
  app.page = 0;
  refresh();
}
