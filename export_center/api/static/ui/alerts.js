// What tells a person that an export ended while they did something else: a count in
// the tab's title until they look at the page again, and, when they allowed it, a
// browser notification. Permission is asked only when they press "Notify me when ready"
// (a user gesture), never on load; the choice is kept in localStorage ("ec.notify").

import * as i18n from './i18n.js';

const { t } = i18n;
const NOTIFY_KEY = 'ec.notify';

function stored() {
  try { return localStorage.getItem(NOTIFY_KEY) === 'on'; } catch { return false; }
}

function store(on) {
  try {
    if (on) localStorage.setItem(NOTIFY_KEY, 'on');
    else localStorage.removeItem(NOTIFY_KEY);
  } catch { /* not remembered */ }
}

export class Alerts {
  /**
   * @param {object} ctx `{toggle: HTMLButtonElement, notify(kind, text)}`: the "Notify me"
   *   button and the page's toasts (to say what the browser answered).
   */
  constructor(ctx) {
    this.ctx = ctx;
    this.unseen = { ready: 0, failed: 0 };
    this.wanted = stored();
    ctx.toggle.addEventListener('click', () => this.toggle());
    const seen = () => this.seen();
    document.addEventListener('visibilitychange', seen);
    window.addEventListener('focus', seen);
    document.addEventListener('pointerdown', seen, true);
    document.addEventListener('keydown', seen, true);
  }

  /** The person sees the page: the tab is shown and the window has the focus. */
  looking() {
    return !document.hidden && document.hasFocus();
  }

  static supported() {
    return typeof window.Notification === 'function';
  }

  /** Notifications are on: asked for here, and still allowed by the browser. */
  on() {
    return this.wanted && Alerts.supported() && Notification.permission === 'granted';
  }

  /** An export ended (`kind`: 'ready' or 'failed'): counted in the title and notified
   * when nobody looks; nothing when the person watches the page (the toast says it). */
  ended(kind, title, body, tag) {
    if (this.looking()) return;
    this.unseen[kind] += 1;
    this.title();
    if (!this.on()) return;
    try {
      const note = new Notification(title, { body, tag, lang: i18n.locale, icon: 'icon.svg' });
      note.onclick = () => {
        window.focus();
        note.close();
      };
    } catch { /* a browser that only notifies from a service worker: the title says it */ }
  }

  seen() {
    if (!this.looking() || (!this.unseen.ready && !this.unseen.failed)) return;
    this.unseen = { ready: 0, failed: 0 };
    this.title();
  }

  /** The tab's title: "(2) Exports ready · Download center" until the person looks. */
  title() {
    const { ready, failed } = this.unseen;
    const count = ready + failed;
    if (!count) {
      document.title = `${t('center')} · ${t('product')}`;
      return;
    }
    let key = 'titleFinished';
    if (!failed) key = ready === 1 ? 'titleReady' : 'titleReadyMany';
    else if (!ready) key = failed === 1 ? 'titleFailed' : 'titleFailedMany';
    document.title = `(${i18n.number(count)}) ${t(key)} · ${t('center')}`;
  }

  /** Show the toggle's state (hidden where the browser has no notifications). */
  render() {
    const button = this.ctx.toggle;
    button.hidden = !Alerts.supported();
    if (button.hidden) return;
    const blocked = Notification.permission === 'denied';
    button.setAttribute('aria-pressed', String(this.on()));
    button.title = blocked ? t('notifyBlocked') : t('notifyMeHint');
  }

  async toggle() {
    if (this.on()) {
      this.wanted = false;
      store(false);
      return this.render();
    }
    let permission = Notification.permission;
    if (permission === 'default') {
      try {
        permission = await Notification.requestPermission();
      } catch {
        permission = 'denied';
      }
    }
    if (permission === 'granted') {
      this.wanted = true;
      store(true);
      this.ctx.notify('ok', t('notifyEnabled'));
    } else {
      this.ctx.notify('error', t(permission === 'denied' ? 'notifyBlocked' : 'notifyDenied'));
    }
    this.render();
  }
}
