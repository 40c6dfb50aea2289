// Calls to the export center's API. The bearer token lives in sessionStorage only (this
// tab, gone when it closes) and travels only in the Authorization header: never in a
// URL, a cookie, the page's HTML or a log line.

const TOKEN_KEY = 'ec.token';
// The page is served at <base>/ui/; the API is at <base>/api/ (a proxy may add a prefix).
const BASE = new URL('..', document.baseURI);

/** An answer of the API with a 4xx/5xx status; `code`, `field`, `detail` from its body. */
export class ApiError extends Error {
  constructor(status, body, retryAfter) {
    const ok = body && typeof body === 'object';
    super(ok && typeof body.message === 'string' ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = ok && typeof body.code === 'string' ? body.code : null;
    this.field = ok && typeof body.field === 'string' ? body.field : null;
    this.detail = ok && typeof body.message === 'string' ? body.message : null;
    const seconds = Number.parseInt(retryAfter ?? '', 10);
    this.retryAt = Number.isFinite(seconds) ? new Date(Date.now() + seconds * 1000) : null;
  }
}

/**
 * The API could not answer: `reason` is 'network' (no answer, the server stopped, a
 * proxy's 502/504), 'database' (503 DATABASE_UNAVAILABLE: the server is up, its database
 * is not), 'busy' (503 SERVER_BUSY) or 'storage' (503 STORAGE_UNAVAILABLE).
 */
export class Unreachable extends Error {
  constructor(reason = 'network') {
    super(reason);
    this.reason = reason;
  }
}

const UNAVAILABLE = {
  DATABASE_UNAVAILABLE: 'database',
  SERVER_BUSY: 'busy',
  STORAGE_UNAVAILABLE: 'storage',
};

export function url(path) {
  return new URL(path.replace(/^\//, ''), BASE).href;
}

export function token() {
  try { return sessionStorage.getItem(TOKEN_KEY); } catch { return null; }
}

export function setToken(value) {
  try {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch { /* private mode without storage: the token lives until reload */ }
  memory = value || null;
}

let memory = token();

/**
 * Call the API. Resolves to `{status, data, headers}` for 2xx; rejects with ApiError or
 * Unreachable. `auth: false` sends no token (host sign-in probe, token check).
 */
export async function call(path, { method = 'GET', body, bearer } = {}) {
  // The page's own language, which the person may have switched away from the
  // browser's: the server words their e-mails and files in it.
  const headers = { Accept: 'application/json', 'Accept-Language': document.documentElement.lang || 'en' };
  const credential = bearer === undefined ? memory : bearer;
  if (credential) headers.Authorization = `Bearer ${credential}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(url(path), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      credentials: 'same-origin',
      referrerPolicy: 'no-referrer',
    });
  } catch {
    throw new Unreachable();
  }
  let data = null;
  if ([502, 503, 504].includes(response.status)) {
    try { data = await response.json(); } catch { data = null; }
    const code = data && typeof data.code === 'string' ? data.code : '';
    throw new Unreachable(response.status === 503 ? UNAVAILABLE[code] || 'network' : 'network');
  }
  try { data = await response.json(); } catch { data = null; }
  if (!response.ok) throw new ApiError(response.status, data, response.headers.get('Retry-After'));
  return { status: response.status, data, headers: response.headers };
}
