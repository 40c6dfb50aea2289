// The download center: sign-in, the task list with live progress, the views and the
// create form (a row's actions are in actions.js, toasts and dialogs in messages.js).
// Served by the export center itself (no build step); see README "Download center".

import { $, h, icon, stored } from './dom.js';
import * as i18n from './i18n.js';
import * as api from './api.js';
import { ACTIVE, TaskTable, cancelledBy, failureText, sharded } from './tasks.js';
import { CreateForm, describe } from './form.js';
import { Alerts } from './alerts.js';
import { Inbox } from './inbox.js';
import { QuotaLine } from './quota.js';
import { announce, confirmDialog, notify, notifyError } from './messages.js';
import { copyLink, created, downloadFresh, finished, onAction, stopped, wire } from './actions.js';
import { show, showSignIn, wire as wireSignIn } from './signin.js';
import './schedules_i18n.js'; // the Schedules tab is labelled before its view loads
import './notify_settings_i18n.js'; // so is the Notifications tab
import './approvals_i18n.js'; // so is the Approvals tab (shown to approvers)

const { t } = i18n;
const POLL_MS = 2000; // at most one list request every 2 s, only while something is active
// A hidden tab still asks, more slowly, so that the title and the notification come when
// an export ends while the person works elsewhere.
const HIDDEN_POLL_MS = 12000;
const WATCH_MS = 4000; // an admin's list: every 4 s, others' new exports show up by themselves
const OFFLINE_MAX_MS = 5000; // out of reach: ask again every 2, 4, then 5 s
const HOST = document.documentElement.dataset.auth === 'host'; // a proxy adds Authorization
const SIZE_KEY = 'ec.pageSize';
const FILTERS_KEY = 'ec.filters';
const STATES = ['awaiting_approval', 'queued', 'running', 'succeeded', 'failed', 'cancelled', 'expired', 'rejected'];

function savedFilters() {
  const saved = stored(FILTERS_KEY) || {};
  const text = (value) => (typeof value === 'string' ? value : '');
  // The owner filter is not kept: only some accounts may use it.
  return { state: STATES.includes(saved.state) ? saved.state : '', exportType: text(saved.exportType), owner: '' };
}

const app = {
  me: null,
  types: [],
  filters: savedFilters(),
  pageSize: [20, 50, 100].includes(stored(SIZE_KEY)) ? stored(SIZE_KEY) : 20,
  cursors: [null],
  page: 0,
  items: [],
  next: null,
  loaded: false,
  seq: 0,
  pollTimer: 0,
  offline: false,
  offlineDelay: 0,
  retry: null,
  expiryTimer: 0,
  skew: 0, // server clock minus this browser's clock, in ms
  devAvailable: false,
  method: 'dev', // how this tab signed in last: 'dev' or 'token'
  cancelling: new Set(),
  fresh: null,
  typesSeen: new Map(),
  owners: new Set(), // every owner the lists showed: the "Requested by" suggestions
  focusTask: null, // the row whose button had the focus when its action ran
  view: 'exports',
  created: new Set(), // exports created in this tab and not yet seen in the list
  acted: new Set(), // exports this tab retried: their end is news here, whoever owns them
  stopping: new Map(), // taskId -> its "Stopping…" toast, gone when the export ends
};

function setOffline(retry, reason = 'network') {
  app.offline = true;
  app.retry = retry;
  app.offlineDelay = Math.min(OFFLINE_MAX_MS, Math.max(POLL_MS, app.offlineDelay * 2));
  $('banner-text').textContent = t(reason === 'network' ? 'offline' : `offline.${reason}`);
  $('banner').hidden = false;
}

function setOnline() {
  if (!app.offline) return;
  app.offline = false;
  app.offlineDelay = 0;
  app.retry = null;
  $('banner').hidden = true;
}

// ---------------------------------------------------------------- sign-in (signin.js)

function signOut() {
  api.setToken(null);
  ops?.stop();
  showSignIn(t('signedOut'));
}

/** Any 401: back to sign-in, saying why. */
function unauthorized(error) {
  const hadToken = Boolean(api.token());
  api.setToken(null);
  const message = error.code === 'TOKEN_EXPIRED' ? t('expired') : describe(error).text;
  showSignIn(HOST && !hadToken ? t('hostFailed', { reason: message }) : message);
}

/** Milliseconds until the token expires, by the server's clock (its Date header). */
function tokenLeft(expiresAt) {
  return Date.parse(expiresAt) - (Date.now() + app.skew);
}

function scheduleExpiry(expiresAt) {
  clearTimeout(app.expiryTimer);
  if (!expiresAt) return;
  const left = tokenLeft(expiresAt);
  const expire = () => {
    if (api.token()) {
      api.setToken(null);
      showSignIn(t('expired'));
    } else enter(); // the host application's proxy may hold a fresh token by now
  };
  if (left > 0) app.expiryTimer = setTimeout(expire, Math.min(left, 2 ** 31 - 1));
  else if (api.token()) expire();
  else app.expiryTimer = setTimeout(enter, 15000); // host sign-in: ask again, not in a loop
}

function unreachableAt(retry, reason) {
  setOffline(retry, reason);
  clearTimeout(app.pollTimer);
  app.pollTimer = setTimeout(retry, app.offlineDelay);
}

/** Signed in (token, or the host's proxy): who am I, what may I create, my exports. */
async function enter() {
  let me;
  let types;
  // The list is asked for at the same time: one round trip less before the first row.
  const listing = api.call(listPath());
  listing.catch(() => {}); // a 401 or an outage is handled once, below
  // Whether the Approvals tab shows: false when it cannot be asked.
  const approver = api.call('/api/v1/approvals').then((a) => Boolean(a.data?.canApprove), () => false);
  try {
    const answers = await Promise.all([api.call('/api/v1/me'), api.call('/api/v1/export-types')]);
    [me, types] = answers.map((answer) => answer.data);
    const serverNow = Date.parse(answers[0].headers.get('Date') || '');
    app.skew = Number.isFinite(serverNow) ? serverNow - Date.now() : 0;
  } catch (error) {
    if (error instanceof api.Unreachable) return unreachableAt(enter, error.reason);
    if (!(error instanceof api.ApiError)) throw error;
    if (error.status === 401) return unauthorized(error);
    notifyError(error);
    return showSignIn();
  }
  setOnline();
  app.me = me;
  app.canApprove = await approver;
  app.types = types;
  for (const x of types) app.typesSeen.set(x.exportType, x);
  form.setTypes(types);
  scheduleExpiry(me.expiresAt);
  table.ctx.showOwner = me.seesAllOwners;
  app.cursors = [null];
  app.page = 0;
  renderChrome();
  show('center');
  inbox.start();
  quota.load();
  // A notification's link (e-mail, chat robot) opens the page at #task=<taskId>.
  const linked = /^#task=([A-Za-z0-9_-]{1,64})$/.exec(location.hash);
  if (linked) {
    if (history.replaceState) history.replaceState(null, '', location.pathname + location.search);
    inbox.showTask(linked[1]);
  }
  if ((me.isAdmin && location.hash === '#ops') || ['#schedules', '#notify', '#approvals'].includes(location.hash)) {
    listing.catch(() => {});
    return showView(location.hash.slice(1));
  }
  showView('exports', { focus: true, listing });
}

// ---------------------------------------------------------------- views

let ops = null; // the operations view (ops.js), loaded the first time an admin opens it
let schedules = null; // the schedules view (schedules.js), loaded the first time it opens
let notifySettings = null; // the notifications view (notify_settings.js), likewise
let approvalsView = null; // the approvals view (approvals.js), for approvers

const VIEWS = ['exports', 'schedules', 'notify', 'approvals', 'ops'];

/** Show the exports list, the schedules or (admins) the operations view; the others stop
 * asking. */
async function showView(name, { focus = true, listing } = {}) {
  const view = name === 'ops' && !app.me?.isAdmin ? 'exports' : VIEWS.includes(name) ? name : 'exports';
  app.view = view;
  for (const tab of document.querySelectorAll('#views [data-view]')) {
    tab.setAttribute('aria-current', tab.dataset.view === view ? 'page' : 'false');
  }
  $('exports-view').hidden = view !== 'exports';
  $('schedules').hidden = view !== 'schedules';
  $('notify-settings').hidden = view !== 'notify';
  $('approvals').hidden = view !== 'approvals';
  $('ops').hidden = view !== 'ops';
  if (history.replaceState) history.replaceState(null, '', view === 'exports' ? location.pathname + location.search : `#${view}`);
  if (view === 'exports') {
    ops?.stop();
    if (focus) {
      $('list-title').setAttribute('tabindex', '-1');
      $('list-title').focus();
    }
    return refresh(listing);
  }
  stopPolling();
  if (view === 'schedules') {
    ops?.stop();
    if (!schedules) {
      const module = await import('./schedules.js');
      schedules ||= new module.SchedulesView({
        types: () => app.types || [],
        typeTitle,
        notify,
        notifyError,
        confirm: confirmDialog,
        onUnauthorized: unauthorized,
        openTask: (taskId) => inbox.showTask(taskId),
      });
    }
    if (focus) {
      $('schedules-title').setAttribute('tabindex', '-1');
      $('schedules-title').focus();
    }
    return schedules.start();
  }
  if (view === 'approvals') {
    ops?.stop();
    const module = await import('./approvals.js');
    approvalsView ||= new module.ApprovalsView({ typeTitle, notify, notifyError, onUnauthorized: unauthorized, onDecided: () => refresh() });
    await approvalsView.start();
    if (focus) $('approvals-title')?.focus();
    return undefined;
  }
  if (view === 'notify') {
    ops?.stop();
    if (!notifySettings) {
      const module = await import('./notify_settings.js');
      notifySettings ||= new module.NotifySettingsView({
        me: () => app.me, notify, notifyError, confirm: confirmDialog, onUnauthorized: unauthorized,
      });
    }
    await notifySettings.start();
    if (focus) $('notify-title')?.focus();
    return undefined;
  }
  if (!ops) {
    const module = await import('./ops.js');
    ops = new module.OpsView({ notify, notifyError, unauthorized, onUnreachable: (reason) => setOffline(() => ops.refresh(), reason), setOnline, typeTitle });
  }
  if (app.view === 'ops') ops.start(focus);
}

// ---------------------------------------------------------------- list

function typeTitle(code) {
  const spec = app.typesSeen.get(code);
  if (!spec) return code;
  return i18n.locale === 'zh-CN' ? spec.titleZh : spec.title;
}

function renderChrome() {
  const me = app.me;
  i18n.translatePage();
  alerts.title();
  alerts.render();
  const lang = $('lang-switch');
  lang.textContent = t('switchTo');
  lang.lang = i18n.locale === 'zh-CN' ? 'en' : 'zh-CN';
  lang.setAttribute('aria-label', t('switchLabel'));
  $('pager').setAttribute('aria-label', t('pagesLabel'));
  if (!me) return;
  $('who').replaceChildren(
    h('span', { class: 'who-name', title: me.user }, me.user),
    h('span', { class: 'sub', title: me.tenant }, `${me.tenant} · ${t(`app.${me.app}`)}`),
    ...(me.seesAllOwners ? [h('span', { class: 'tag tag-admin', title: t('whoAdminHint') }, t('whoAdmin'))] : []),
  );
  $('who').hidden = false;
  $('sign-out').hidden = HOST && !api.token();
  $('list-title').textContent = me.seesAllOwners ? t('allExports', { tenant: me.tenant }) : t('myExports');
  $('tasks-caption').textContent = t('caption');
  $('tz-note').textContent = t('tzNote', { tz: i18n.browserZone });
  $('f-owner-field').hidden = !me.seesAllOwners;
  $('f-owner').placeholder = t('anyOwner');
  const options = (values, title) => [h('option', { value: '' }, t('all')), ...values.map((v) => h('option', { value: v }, title(v)))];
  $('f-state').replaceChildren(...options(STATES, (s) => t(`state.${s}`)));
  $('f-state').value = app.filters.state;
  $('f-type').replaceChildren(...options([...app.typesSeen.keys()], typeTitle));
  $('f-type').value = app.filters.exportType;
  $('f-size').value = String(app.pageSize);
  const creatable = app.types.length > 0;
  $('new-export').disabled = !creatable;
  $('no-types').hidden = creatable;
  // Why nothing can be created: the app has no types, or the account no permission.
  const mayExport = me.permissions.some((p) => /^export:[a-z-]+:create$/.test(p));
  $('no-types').textContent = mayExport ? t('noTypesApp', { app: t(`app.${me.app}`) }) : t('noTypesPerm');
  $('views').hidden = false;
  for (const tab of document.querySelectorAll('#views [data-view="ops"]')) tab.hidden = !me.isAdmin;
  ops?.relabel();
  schedules?.relabel();
  notifySettings?.relabel();
  approvalsView?.relabel();
  for (const tab of document.querySelectorAll('#views [data-view="approvals"]')) tab.hidden = !app.canApprove;
}

function filtered() {
  return Boolean(app.filters.state || app.filters.exportType || app.filters.owner);
}

function stopPolling() {
  clearTimeout(app.pollTimer);
  app.pollTimer = 0;
}

function schedule() {
  stopPolling();
  if (!app.me || app.view !== 'exports') return;
  const hidden = document.hidden;
  const active = app.items.some((x) => ACTIVE.has(x.state));
  if (app.offline) app.pollTimer = setTimeout(refresh, hidden ? Math.max(app.offlineDelay, HIDDEN_POLL_MS) : app.offlineDelay);
  else if (active) app.pollTimer = setTimeout(refresh, hidden ? HIDDEN_POLL_MS : POLL_MS);
  // Others create too (an admin's list); not worth asking for while nobody looks.
  else if (app.me.seesAllOwners && !hidden) app.pollTimer = setTimeout(refresh, WATCH_MS);
}

function listPath() {
  const query = new URLSearchParams({ limit: String(app.pageSize) });
  if (app.filters.state) query.set('state', app.filters.state);
  if (app.filters.exportType) query.set('exportType', app.filters.exportType);
  if (app.filters.owner) query.set('owner', app.filters.owner);
  if (app.cursors[app.page]) query.set('cursor', app.cursors[app.page]);
  return `/api/v1/exports?${query}`;
}

/** Load the current page of the list (or take the answer already asked for). */
async function refresh(asked) {
  stopPolling();
  if (!app.me) return;
  const seq = ++app.seq;
  $('tasks').setAttribute('aria-busy', 'true');
  try {
    const { data } = await (asked instanceof Promise ? asked : api.call(listPath()));
    if (seq !== app.seq) return;
    setOnline();
    app.items = data.items;
    app.next = data.nextCursor;
    renderList();
  } catch (error) {
    if (seq !== app.seq) return;
    if (!(error instanceof api.ApiError || error instanceof api.Unreachable)) throw error;
    if (error instanceof api.Unreachable) setOffline(refresh, error.reason);
    else if (error.status === 401) return unauthorized(error);
    else if (error.code === 'INVALID_CURSOR' && app.page) {
      app.cursors = [null];
      app.page = 0;
      return refresh();
    } else notifyError(error);
  } finally {
    if (seq === app.seq) $('tasks').removeAttribute('aria-busy');
  }
  schedule();
}

function focusLost() {
  const active = document.activeElement;
  return !active || active === document.body || !active.isConnected;
}

function renderList() {
  const items = app.items;
  const focusedRow = document.activeElement?.closest?.('tr[data-task-id]')?.dataset.taskId || app.focusTask;
  table.render(items, { announce: app.loaded });
  app.loaded = true;
  for (const x of items) {
    if (ACTIVE.has(x.state)) continue;
    app.cancelling.delete(x.taskId);
    app.created.delete(x.taskId);
    stopped(x.taskId);
  }
  // The button that had the focus went away (Cancel, Retry): the focus goes to the row's
  // state, which says what happened, instead of falling back to the top of the page.
  if (focusedRow && focusLost()) table.rows.get(focusedRow)?.focusState();
  if (!app.focusTask || !focusLost()) app.focusTask = null;
  if (app.fresh && table.rows.has(app.fresh)) {
    const tr = table.rows.get(app.fresh).tr;
    tr.classList.add('fresh');
    setTimeout(() => tr.classList.remove('fresh'), 2500);
    app.fresh = null;
  }
  const empty = items.length === 0;
  $('tasks').parentElement.hidden = empty;
  $('empty').hidden = !empty;
  if (empty) {
    const narrowed = filtered() || app.page > 0;
    const creatable = app.types.length > 0;
    $('empty-title').textContent = t(narrowed ? 'emptyFilteredTitle' : 'emptyTitle');
    let text = narrowed ? t(app.me.seesAllOwners ? 'emptyFilteredTextOwner' : 'emptyFilteredText') : t(creatable ? 'emptyText' : 'emptyNoTypes');
    if (narrowed && app.filters.owner) text = `${text} ${t('noOwnerMatch')}`;
    $('empty-text').textContent = text;
    const action = $('empty-action');
    action.textContent = t(narrowed ? 'clearFilters' : 'newExport');
    action.dataset.action = narrowed ? 'clear' : 'new';
    action.hidden = !narrowed && !creatable;
    suggestOwners(narrowed ? app.filters.owner : '');
  }
  $('clear-filters').hidden = !filtered();
  $('prev').disabled = app.page === 0;
  $('next').disabled = !app.next;
  $('pager').hidden = app.page === 0 && !app.next;
  $('page-no').textContent = t('pageNo', { n: i18n.number(app.page + 1) });
  const known = app.owners.size;
  for (const x of items) app.owners.add(x.owner);
  if (app.owners.size !== known) $('owners').replaceChildren(...[...app.owners].sort().map((o) => h('option', { value: o })));
  const typesKnown = app.typesSeen.size;
  for (const x of items) {
    if (!app.typesSeen.has(x.exportType)) app.typesSeen.set(x.exportType, null);
  }
  if (app.typesSeen.size !== typesKnown) {
    $('f-type').replaceChildren(h('option', { value: '' }, t('all')), ...[...app.typesSeen.keys()].map((v) => h('option', { value: v }, typeTitle(v))));
    $('f-type').value = app.filters.exportType;
  }
}

/** Owners seen before whose name is close to `typed` (other capitals, a prefix). */
function suggestOwners(typed) {
  const box = $('owner-suggest');
  const wanted = typed.toLowerCase();
  const close = wanted ? [...app.owners].filter((o) => o !== typed && o.toLowerCase().includes(wanted)).sort().slice(0, 5) : [];
  box.hidden = !close.length;
  box.replaceChildren(
    ...(close.length ? [h('span', {}, t('didYouMean')), ...close.map((o) => h('button', { type: 'button', class: 'btn small', onclick: () => pickOwner(o) }, o))] : []),
  );
}

function pickOwner(owner) {
  $('f-owner').value = owner;
  setFilters({ owner });
  $('f-owner').focus();
}

function setFilters(change) {
  Object.assign(app.filters, change);
  const { state, exportType } = app.filters;
  try { localStorage.setItem(FILTERS_KEY, JSON.stringify({ state, exportType })); } catch { /* not kept */ }
  app.cursors = [null];
  app.page = 0;
  refresh();
}

// ---------------------------------------------------------------- wiring

const table = new TaskTable($('tasks-head'), $('tasks-body'), {
  showOwner: false,
  typeOf: (code) => app.typesSeen.get(code) || null,
  typeTitle,
  canCreate: (code) => app.types.some((x) => x.exportType === code),
  isCancelling: (id) => app.cancelling.has(id),
  linkOf: (url) => api.url(url),
  onAction,
  announce,
  viewer: () => app.me?.user,
  onCopy: (task) => copyLink(task),
  onManifest: (task, event) => openManifest(task, event.currentTarget),
  onDownloads: (task, event) => openDownloads(task, event.currentTarget),
  onFinished: finished,
  isNew: (id) => app.created.has(id),
});

const alerts = new Alerts({ toggle: $('notify-toggle'), notify });

const quota = new QuotaLine();
const inbox = new Inbox({ typeTitle, download: (task) => downloadFresh(task), onUnauthorized: unauthorized });

let manifests = null; // the manifest view (manifest.js), loaded the first time one opens

async function openManifest(task, opener) {
  if (!manifests) {
    const module = await import('./manifest.js');
    manifests ||= new module.ManifestView({ describe, onUnauthorized: unauthorized });
  }
  manifests.open(task, opener);
}

let downloadsView = null; // a task's downloads and revoke (downloads.js), loaded when first opened

async function openDownloads(task, opener) {
  if (!downloadsView) {
    const module = await import('./downloads.js');
    downloadsView ||= new module.DownloadsView({ describe, onUnauthorized: unauthorized, onRevoked: () => refresh() });
  }
  downloadsView.open(task, opener);
}

const form = new CreateForm({
  typeTitle,
  onCreated: created,
  onUnauthorized: unauthorized,
  onUnreachable: (reason) => unreachableAt(refresh, reason), // the list asks again soon
});

wire({ app, form, quota, alerts, renderList, refresh, unauthorized, setOffline });
wireSignIn({
  app,
  leave: () => { stopPolling(); ops?.stop(); inbox.stop(); table.clear(); },
  setOnline,
  unreachableAt,
  enter,
});

function switchLanguage() {
  i18n.setLocale(i18n.locale === 'zh-CN' ? 'en' : 'zh-CN');
  renderChrome();
  form.relabel();
  manifests?.relabel();
  downloadsView?.relabel();
  inbox.render();
  quota.render();
  if (app.me) {
    table.relabel();
    renderList();
  }
}

let ownerTimer = 0;
$('lang-switch').addEventListener('click', switchLanguage);
$('sign-out').addEventListener('click', signOut);
$('new-export').addEventListener('click', () => form.open());
$('refresh').addEventListener('click', () => refresh());
$('banner-retry').addEventListener('click', () => (app.retry || refresh)());
$('f-state').addEventListener('change', (e) => setFilters({ state: e.target.value }));
$('f-type').addEventListener('change', (e) => setFilters({ exportType: e.target.value }));
$('f-owner').addEventListener('input', (e) => {
  clearTimeout(ownerTimer);
  ownerTimer = setTimeout(() => setFilters({ owner: e.target.value.trim() }), 400);
});
$('f-owner').addEventListener('change', (e) => {
  clearTimeout(ownerTimer);
  if (e.target.value.trim() !== app.filters.owner) setFilters({ owner: e.target.value.trim() });
});
$('f-size').addEventListener('change', (e) => {
  app.pageSize = Number(e.target.value);
  try { localStorage.setItem(SIZE_KEY, String(app.pageSize)); } catch { /* not remembered */ }
  setFilters({});
});
$('filters').addEventListener('submit', (e) => e.preventDefault());
$('clear-filters').addEventListener('click', () => {
  $('f-owner').value = '';
  setFilters({ state: '', exportType: '', owner: '' });
  renderChrome();
});
$('empty-action').addEventListener('click', (e) => {
  if (e.currentTarget.dataset.action === 'new') form.open();
  else $('clear-filters').click();
});
/** Paging: when the pressed button becomes disabled (first or last page), the focus
 * moves to the other one instead of falling back to the top of the page. */
async function turnPage(step, pressed) {
  if (step > 0) {
    if (!app.next) return;
    app.cursors[app.page + 1] = app.next;
  }
  app.page = Math.max(0, app.page + step);
  await refresh();
  if (document.activeElement === pressed && !pressed.disabled) return;
  const other = pressed.id === 'next' ? $('prev') : $('next');
  if (!other.disabled && !$('pager').hidden) other.focus();
  else {
    $('page-no').setAttribute('tabindex', '-1');
    $('page-no').focus();
  }
}

$('prev').addEventListener('click', (e) => turnPage(-1, e.currentTarget));
$('next').addEventListener('click', (e) => turnPage(1, e.currentTarget));
for (const tab of document.querySelectorAll('#views [data-view]')) {
  tab.addEventListener('click', () => showView(tab.dataset.view));
}
$('confirm-form').addEventListener('submit', (e) => {
  e.preventDefault();
  $('confirm').close(e.submitter?.value === 'yes' ? 'yes' : 'no');
});
document.addEventListener('visibilitychange', () => {
  if (document.hidden) {
    ops?.stop();
    return schedule(); // the list goes on asking, slowly, for the title and notifications
  }
  if (!app.me) return;
  if (app.me.expiresAt && tokenLeft(app.me.expiresAt) <= 0) return scheduleExpiry(app.me.expiresAt);
  if (app.view === 'ops') ops?.start(false);
  else refresh();
});

renderChrome();
if (api.token() || HOST) enter();
else showSignIn();
