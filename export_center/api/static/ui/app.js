// The download center: sign-in, the task list with live progress, actions, the create
// form. Served by the export center itself (no build step); see README "Download center".

import { $, h, icon } from './dom.js';
import * as i18n from './i18n.js';
import * as api from './api.js';
import { ACTIVE, TaskTable } from './tasks.js';
import { CreateForm, describe } from './form.js';

const { t } = i18n;
const POLL_MS = 2000; // at most one list request every 2 s, only while something is active
const HOST = document.documentElement.dataset.auth === 'host'; // a proxy adds Authorization
const DEV_KEY = 'ec.devSignIn';
const SIZE_KEY = 'ec.pageSize';
const STATES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'expired'];

function readJson(key) {
  try { return JSON.parse(localStorage.getItem(key) || 'null'); } catch { return null; }
}

const app = {
  me: null,
  types: [],
  filters: { state: '', exportType: '', owner: '' },
  pageSize: [20, 50, 100].includes(readJson(SIZE_KEY)) ? readJson(SIZE_KEY) : 20,
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
};

// ---------------------------------------------------------------- messages

function notify(kind, text, detail) {
  const box = $('toasts');
  const close = h('button', { type: 'button', class: 'icon-btn', 'aria-label': t('dismiss') }, icon('close'));
  const toast = h(
    'div',
    { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' },
    h('div', {}, h('p', {}, text), detail ? h('p', { class: 'detail', lang: 'en' }, t('detail', { message: detail })) : null),
    close,
  );
  close.addEventListener('click', () => toast.remove());
  box.append(toast);
  while (box.children.length > 3) box.firstElementChild.remove();
  if (kind !== 'error') setTimeout(() => toast.remove(), 8000);
}

function notifyError(error) {
  const { text, detail } = describe(error);
  notify('error', text, detail);
}

let announceTimer = 0;
function announce(message) {
  const live = $('live');
  live.textContent = '';
  clearTimeout(announceTimer);
  announceTimer = setTimeout(() => { live.textContent = message; }, 50);
}

function setOffline(retry) {
  app.offline = true;
  app.retry = retry;
  app.offlineDelay = Math.min(30000, Math.max(POLL_MS, app.offlineDelay * 2));
  $('banner-text').textContent = t('offline');
  $('banner').hidden = false;
}

function setOnline() {
  if (!app.offline) return;
  app.offline = false;
  app.offlineDelay = 0;
  app.retry = null;
  $('banner').hidden = true;
}

// ---------------------------------------------------------------- sign-in

function show(section) {
  $('booting').hidden = true;
  $('signin').hidden = section !== 'signin';
  $('center').hidden = section !== 'center';
}

async function showSignIn(message) {
  stopPolling();
  clearTimeout(app.expiryTimer);
  app.me = null;
  table.clear();
  app.loaded = false;
  $('who').hidden = true;
  $('sign-out').hidden = true;
  const notice = $('signin-notice');
  notice.textContent = message || '';
  notice.hidden = !message;
  try {
    const { data } = await api.call('/api/v1/dev/sign-in', { bearer: null });
    app.devAvailable = Boolean(data?.available);
    setOnline();
  } catch (error) {
    if (error instanceof api.Unreachable) return unreachableAt(() => showSignIn(message));
    app.devAvailable = false;
  }
  $('dev-form').hidden = !app.devAvailable;
  $('token-box').open = !app.devAvailable || app.method === 'token';
  const saved = readJson(DEV_KEY) || {};
  $('dev-user').value = saved.user || 'alice';
  $('dev-tenant').value = saved.tenant || 'acme';
  $('dev-app').value = saved.app || 'PLATFORM';
  const role = document.querySelector(`#dev-form input[name="role"][value="${saved.role === 'admin' ? 'admin' : 'user'}"]`);
  role.checked = true;
  show('signin');
  $('signin-title').setAttribute('tabindex', '-1');
  $('signin-title').focus();
}

function fieldError(id, text) {
  const box = $(`${id}-error`);
  box.textContent = text || '';
  box.hidden = !text;
  const input = $(id);
  if (text) {
    input.setAttribute('aria-invalid', 'true');
    input.setAttribute('aria-describedby', `${id}-error`);
  } else input.removeAttribute('aria-invalid');
}

async function devSignIn(event) {
  event.preventDefault();
  const body = {
    user: $('dev-user').value.trim(),
    tenant: $('dev-tenant').value.trim(),
    app: $('dev-app').value,
    role: document.querySelector('#dev-form input[name="role"]:checked').value,
  };
  fieldError('dev-user', body.user ? '' : t('required'));
  fieldError('dev-tenant', body.tenant ? '' : t('required'));
  $('dev-error').hidden = true;
  if (!body.user) return $('dev-user').focus();
  if (!body.tenant) return $('dev-tenant').focus();
  let minted;
  try {
    minted = (await api.call('/api/v1/dev/sign-in', { method: 'POST', body, bearer: null })).data;
  } catch (error) {
    if (!(error instanceof api.ApiError || error instanceof api.Unreachable)) throw error;
    const { text, detail } = describe(error);
    const message = detail ? `${text} ${t('detail', { message: detail })}` : text;
    const field = error.field === 'user' || error.field === 'tenant' ? `dev-${error.field}` : null;
    if (field) {
      fieldError(field, message);
      $(field).focus();
    } else {
      $('dev-error').textContent = message;
      $('dev-error').hidden = false;
    }
    return;
  }
  try { localStorage.setItem(DEV_KEY, JSON.stringify(body)); } catch { /* not remembered */ }
  app.method = 'dev';
  api.setToken(minted.token);
  await enter();
}

async function tokenSignIn(event) {
  event.preventDefault();
  const input = $('token-input');
  const value = input.value.trim().replace(/^bearer\s+/i, '');
  fieldError('token-input', value ? '' : t('tokenEmpty'));
  if (!value) return input.focus();
  try {
    await api.call('/api/v1/me', { bearer: value });
  } catch (error) {
    if (!(error instanceof api.ApiError || error instanceof api.Unreachable)) throw error;
    const { text } = describe(error);
    fieldError('token-input', text);
    return input.focus();
  }
  input.value = ''; // the token lives in sessionStorage only, not in the form
  app.method = 'token';
  api.setToken(value);
  await enter();
}

function signOut() {
  api.setToken(null);
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

function unreachableAt(retry) {
  setOffline(retry);
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
  try {
    const answers = await Promise.all([api.call('/api/v1/me'), api.call('/api/v1/export-types')]);
    [me, types] = answers.map((answer) => answer.data);
    const serverNow = Date.parse(answers[0].headers.get('Date') || '');
    app.skew = Number.isFinite(serverNow) ? serverNow - Date.now() : 0;
  } catch (error) {
    if (error instanceof api.Unreachable) return unreachableAt(enter);
    if (!(error instanceof api.ApiError)) throw error;
    if (error.status === 401) return unauthorized(error);
    notifyError(error);
    return showSignIn();
  }
  setOnline();
  app.me = me;
  app.types = types;
  for (const x of types) app.typesSeen.set(x.exportType, x);
  form.setTypes(types);
  scheduleExpiry(me.expiresAt);
  table.ctx.showOwner = me.seesAllOwners;
  app.cursors = [null];
  app.page = 0;
  renderChrome();
  show('center');
  $('list-title').setAttribute('tabindex', '-1');
  $('list-title').focus();
  await refresh(listing);
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
  document.title = `${t('center')} · ${t('product')}`;
  const lang = $('lang-switch');
  lang.textContent = t('switchTo');
  lang.lang = i18n.locale === 'zh-CN' ? 'en' : 'zh-CN';
  lang.setAttribute('aria-label', t('switchLabel'));
  $('pager').setAttribute('aria-label', t('pagesLabel'));
  if (!me) return;
  $('who').replaceChildren(
    h('span', { class: 'who-name' }, me.user),
    h('span', { class: 'sub' }, `${me.tenant} · ${t(`app.${me.app}`)}`),
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
  if (!app.me || document.hidden) return;
  if (app.offline) app.pollTimer = setTimeout(refresh, app.offlineDelay);
  else if (app.items.some((x) => ACTIVE.has(x.state))) app.pollTimer = setTimeout(refresh, POLL_MS);
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
    if (error instanceof api.Unreachable) setOffline(refresh);
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

function renderList() {
  const items = app.items;
  for (const x of items) if (!ACTIVE.has(x.state)) app.cancelling.delete(x.taskId);
  const focusedRow = document.activeElement?.closest?.('tr[data-task-id]')?.dataset.taskId;
  table.render(items, { announce: app.loaded });
  app.loaded = true;
  if (focusedRow && (!document.activeElement || document.activeElement === document.body)) {
    const row = table.rows.get(focusedRow);
    const target = row?.tr.querySelector('.actions .btn') || row?.tr.querySelector('.task-name');
    if (target) {
      if (!target.matches('.btn')) target.setAttribute('tabindex', '-1');
      target.focus();
    }
  }
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
    $('empty-title').textContent = t(narrowed ? 'emptyFilteredTitle' : 'emptyTitle');
    $('empty-text').textContent = t(narrowed ? 'emptyFilteredText' : 'emptyText');
    const action = $('empty-action');
    action.textContent = t(narrowed ? 'clearFilters' : 'newExport');
    action.dataset.action = narrowed ? 'clear' : 'new';
    action.hidden = !narrowed && app.types.length === 0;
  }
  $('clear-filters').hidden = !filtered();
  $('prev').disabled = app.page === 0;
  $('next').disabled = !app.next;
  $('pager').hidden = app.page === 0 && !app.next;
  $('page-no').textContent = t('pageNo', { n: i18n.number(app.page + 1) });
  const owners = new Set(items.map((x) => x.owner));
  $('owners').replaceChildren(...[...owners].sort().map((o) => h('option', { value: o })));
  const known = app.typesSeen.size;
  for (const x of items) {
    if (!app.typesSeen.has(x.exportType)) app.typesSeen.set(x.exportType, null);
  }
  if (app.typesSeen.size !== known) {
    $('f-type').replaceChildren(h('option', { value: '' }, t('all')), ...[...app.typesSeen.keys()].map((v) => h('option', { value: v }, typeTitle(v))));
    $('f-type').value = app.filters.exportType;
  }
}

function setFilters(change) {
  Object.assign(app.filters, change);
  app.cursors = [null];
  app.page = 0;
  refresh();
}

// ---------------------------------------------------------------- actions

async function onAction(action, task, event) {
  if (action === 'download') return download(task, event);
  if (action === 'again') return form.open(task);
  const button = event.currentTarget;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  const name = task.taskName;
  try {
    const { data } = await api.call(`/api/v1/exports/${encodeURIComponent(task.taskId)}/${action}`, { method: 'POST' });
    if (action === 'cancel') {
      if (data.state === 'cancelled') notify('ok', t('cancelledNow', { name }));
      else {
        app.cancelling.add(task.taskId);
        notify('ok', t('cancelling', { name }));
      }
    } else notify('ok', t('retried', { name }));
    app.items = app.items.map((x) => (x.taskId === data.taskId ? data : x));
    renderList();
  } catch (error) {
    if (error instanceof api.ApiError && error.status === 401) return unauthorized(error);
    if (error instanceof api.Unreachable) setOffline(refresh);
    notifyError(error);
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
  }
  refresh();
}

/** The signed link is followed by the browser; a stale one is renewed first. */
async function download(task, event) {
  const now = Date.now();
  if (task.expiresAt && Date.parse(task.expiresAt) <= now) {
    event.preventDefault();
    notify('error', t('err.FILE_EXPIRED'));
    return refresh();
  }
  if (!task.downloadExpiresAt || Date.parse(task.downloadExpiresAt) - now > 10000) return;
  event.preventDefault();
  notify('info', t('refreshingLink'));
  try {
    const { data } = await api.call(`/api/v1/exports/${encodeURIComponent(task.taskId)}`);
    if (data.downloadUrl) {
      const link = h('a', { href: api.url(data.downloadUrl), download: '', rel: 'noreferrer', hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
    }
  } catch (error) {
    if (error instanceof api.ApiError && error.status === 401) return unauthorized(error);
    notifyError(error);
  }
  refresh();
}

function created(answer, body) {
  const { status, data, headers } = answer;
  let text = t('created', { name: body.taskName });
  if (status === 200) text = t(headers.get('Duplicate-Of-Active-Task') ? 'duplicate' : 'replayed');
  const f = app.filters;
  const hidden = (f.state && !f.state.split(',').includes(data.state))
    || (f.exportType && f.exportType !== body.exportType)
    || (f.owner && f.owner !== app.me.user);
  notify('ok', hidden ? `${text} ${t('hiddenByFilters')}` : text);
  app.fresh = data.taskId;
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
});

const form = new CreateForm({
  typeTitle,
  onCreated: created,
  onUnauthorized: unauthorized,
  onUnreachable: () => setOffline(refresh),
});

function switchLanguage() {
  i18n.setLocale(i18n.locale === 'zh-CN' ? 'en' : 'zh-CN');
  renderChrome();
  form.relabel();
  if (app.me) {
    table.relabel();
    renderList();
  }
}

let ownerTimer = 0;
$('lang-switch').addEventListener('click', switchLanguage);
$('sign-out').addEventListener('click', signOut);
$('dev-form').addEventListener('submit', devSignIn);
$('token-form').addEventListener('submit', tokenSignIn);
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
$('prev').addEventListener('click', () => {
  app.page = Math.max(0, app.page - 1);
  refresh();
});
$('next').addEventListener('click', () => {
  if (!app.next) return;
  app.cursors[app.page + 1] = app.next;
  app.page += 1;
  refresh();
});
document.addEventListener('visibilitychange', () => {
  if (document.hidden) return stopPolling();
  if (!app.me) return;
  if (app.me.expiresAt && tokenLeft(app.me.expiresAt) <= 0) return scheduleExpiry(app.me.expiresAt);
  refresh();
});

renderChrome();
if (api.token() || HOST) enter();
else showSignIn();
