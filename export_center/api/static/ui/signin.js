// The sign-in page: the development sign-in (user, tenant, app, role) where the server
// offers it, and the token form. The page's state and its way in (enter) are handed over
// once by app.js (wire).

import { $, stored } from './dom.js';
import * as i18n from './i18n.js';
import * as api from './api.js';
import { describe } from './form.js';

const { t } = i18n;
const DEV_KEY = 'ec.devSignIn';

// The page's state and parts (app.js): set by wire() before the page shows.
let app;
let leave;
let setOnline;
let unreachableAt;
let enter;

/** Hand over the page's state (`app`), leave() (stop the list, the views and the inbox, and
 * clear the table), setOnline(), unreachableAt(retry, reason) and enter(); binds the two
 * sign-in forms. */
export function wire(page) {
  ({ app, leave, setOnline, unreachableAt, enter } = page);
  $('dev-form').addEventListener('submit', devSignIn);
  $('token-form').addEventListener('submit', tokenSignIn);
}

/** Show one of the page's sections: `signin` or `center` (the booting notice goes). */
export function show(section) {
  $('booting').hidden = true;
  $('signin').hidden = section !== 'signin';
  $('center').hidden = section !== 'center';
}

/** The sign-in page, with `message` above the forms (why the person is here), if any. */
export async function showSignIn(message) {
  leave();
  clearTimeout(app.expiryTimer);
  app.me = null;
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
    if (error instanceof api.Unreachable) return unreachableAt(() => showSignIn(message), error.reason);
    app.devAvailable = false;
  }
  $('dev-form').hidden = !app.devAvailable;
  $('token-box').open = !app.devAvailable || app.method === 'token';
  const saved = stored(DEV_KEY) || {};
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
  $('signin-notice').hidden = true; // "You have signed out." is old news now
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
  $('signin-notice').hidden = true;
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
