// The Notifications view: how the signed-in user is told when an export ends (their
// defaults: in this page, by e-mail, and for which events) and, for tenant admins with
// platform:webhooks:manage, the tenant's signed webhook endpoints: add one (its secret is
// shown once), send a test event, read the delivery history and deliver again by hand.
//
// API: GET/PUT /api/v1/me/notification-defaults; GET/POST /api/v1/webhook-endpoints,
// DELETE /api/v1/webhook-endpoints/{id}, POST .../{id}/test, GET .../{id}/deliveries,
// POST .../{id}/deliveries/{deliveryId}/redeliver.

import { $, h } from './dom.js';
import * as i18n from './i18n.js';
import * as api from './api.js';
import { describe, errorNodes } from './form.js';
import './notify_settings_i18n.js';
import './approvals_i18n.js'; // the approval events' labels

const { t } = i18n;

/** The permission that shows the webhook endpoints section. */
export const WEBHOOKS_MANAGE = 'platform:webhooks:manage';
/** The events a person chooses from, in this order. */
const EVENTS = ['export.succeeded', 'export.failed', 'export.cancelled', 'export.expiring', 'schedule.paused', 'export.approved', 'export.rejected'];
/** What a new target gets (the server's default events). */
const DEFAULT_EVENTS = ['export.succeeded', 'export.failed', 'schedule.paused'];

/** The `notify` list of the form's choices: a `page` and an `email` target with their
 * own events (a channel without events is left out), then the saved targets the form
 * does not show (chat robots), kept as they were. */
export function targetsOf({ page, email, to, pageEvents, emailEvents, others = [] }) {
  const out = [];
  if (page && pageEvents.length) out.push({ channel: 'page', events: pageEvents });
  if (email && emailEvents.length) out.push(to ? { channel: 'email', to, events: emailEvents } : { channel: 'email', events: emailEvents });
  return [...out, ...others];
}

function checkbox(id, label, checked, extra = {}) {
  return h('label', { class: 'check', for: id }, h('input', { type: 'checkbox', id, checked, ...extra }), h('span', {}, label));
}

export class NotifySettingsView {
  /** @param {object} ctx `{me(), notify(kind, text), notifyError(error), confirm({title, text, yes, no}), onUnauthorized(error)}` */
  constructor(ctx) {
    this.ctx = ctx;
    this.defaults = null;
    this.hooks = [];
    this.deliveries = new Map(); // endpoint id -> its deliveries, shown under its row
    this.secret = null; // {id, secret} of the endpoint just added: shown once
  }

  async start() {
    await this.refresh();
  }

  stop() {}

  relabel() {
    this.render();
  }

  mayManageHooks() {
    return (this.ctx.me()?.permissions || []).includes(WEBHOOKS_MANAGE);
  }

  async guarded(work) {
    try {
      return await work();
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      this.ctx.notifyError(error);
      return undefined;
    }
  }

  async refresh() {
    await this.guarded(async () => {
      this.defaults = (await api.call('/api/v1/me/notification-defaults')).data;
      if (this.mayManageHooks()) this.hooks = (await api.call('/api/v1/webhook-endpoints')).data?.items || [];
    });
    this.render();
  }

  render() {
    const root = $('notify-settings');
    if (!this.defaults) {
      root.replaceChildren(h('h1', { id: 'notify-title' }, t('notifyTitle')));
      return;
    }
    const parts = [
      h('div', { class: 'list-head' }, h('h1', { id: 'notify-title', tabindex: '-1' }, t('notifyTitle'))),
      this.defaultsForm(),
    ];
    if (this.mayManageHooks()) parts.push(this.hooksSection());
    root.replaceChildren(...parts);
  }

  // ---------------------------------------------------------------- my defaults

  defaultsForm() {
    const d = this.defaults;
    const effective = d.effective || [];
    const page = effective.find((x) => x.channel === 'page');
    const mail = effective.find((x) => x.channel === 'email');
    this.others = effective.filter((x) => x.channel !== 'page' && x.channel !== 'email');
    const events = (prefix, target) => {
      const chosen = new Set(target ? target.events : DEFAULT_EVENTS);
      return h('div', { class: 'events', role: 'group', 'aria-label': t('nd.events') },
        ...EVENTS.map((e) => checkbox(`nd-${prefix}-${e.replace('.', '-')}`, t(`nd.ev.${e}`), chosen.has(e), { dataset: { [prefix]: e } })));
    };
    const form = h(
      'form',
      { id: 'nd-form', class: 'settings-form', novalidate: true },
      h('h2', {}, t('nd.title')),
      h('p', { class: 'hint' }, t('nd.hint')),
      h('fieldset', {}, h('legend', {}, checkbox('nd-page', t('nd.page'), Boolean(page))), events('page', page)),
      h('fieldset', {}, h('legend', {}, checkbox('nd-email', t('nd.email'), Boolean(mail), { disabled: !d.emailConfigured })),
        h('div', { class: 'field' },
          h('label', { for: 'nd-to' }, t('nd.to')),
          h('input', { id: 'nd-to', type: 'email', maxlength: '254', autocomplete: 'email', value: mail?.to || '', placeholder: d.email || '', disabled: !d.emailConfigured }),
          h('p', { class: 'hint' }, d.emailConfigured ? (d.email ? t('nd.toOwn', { email: d.email }) : t('nd.toNeeded')) : t('nd.noEmail'))),
        events('mail', mail)),
      this.others.length ? h('p', { class: 'hint', id: 'nd-others' }, t('nd.others', { n: this.others.length })) : null,
      h('p', { class: 'error', id: 'nd-error', role: 'alert', hidden: true }),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn primary', id: 'nd-save' }, t('nd.save'))),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.saveDefaults();
    });
    return form;
  }

  async saveDefaults() {
    const box = $('nd-error');
    box.hidden = true;
    const picked = (key) => [...document.querySelectorAll(`#nd-form [data-${key}]`)].filter((x) => x.checked).map((x) => x.dataset[key]);
    const notify = targetsOf({
      page: $('nd-page').checked,
      email: $('nd-email').checked,
      to: $('nd-to').value.trim(),
      pageEvents: picked('page'),
      emailEvents: picked('mail'),
      others: this.others || [],
    });
    $('nd-save').disabled = true;
    try {
      this.defaults = (await api.call('/api/v1/me/notification-defaults', { method: 'PUT', body: { notify } })).data;
      this.ctx.notify('ok', notify.length ? t('nd.saved') : t('nd.savedNone'));
      this.render();
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      box.replaceChildren(...errorNodes(describe(error)));
      box.hidden = false;
    } finally {
      if ($('nd-save')) $('nd-save').disabled = false;
    }
    return undefined;
  }

  // ---------------------------------------------------------------- webhook endpoints

  hooksSection() {
    const add = h(
      'form',
      { id: 'wh-form', class: 'settings-form', novalidate: true },
      h('h3', {}, t('wh.add')),
      h('div', { class: 'field' }, h('label', { for: 'wh-url' }, t('wh.url')), h('input', { id: 'wh-url', type: 'url', maxlength: '2048', placeholder: 'https://', required: true })),
      h('fieldset', {}, h('legend', {}, t('nd.events')),
        ...EVENTS.map((e) => checkbox(`wh-ev-${e.replace('.', '-')}`, t(`nd.ev.${e}`), e !== 'export.expiring', { dataset: { hookEvent: e } }))),
      h('p', { class: 'error', id: 'wh-error', role: 'alert', hidden: true }),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn', id: 'wh-submit' }, t('wh.submit'))),
    );
    add.addEventListener('submit', (event) => {
      event.preventDefault();
      this.addHook();
    });
    const secret = this.secret
      ? h('div', { class: 'notice secret', id: 'wh-secret', role: 'status' },
        h('p', {}, t('wh.secretOnce')), h('code', { id: 'wh-secret-value' }, this.secret.secret))
      : null;
    const rows = this.hooks.flatMap((hook) => this.hookRows(hook));
    return h(
      'section',
      { class: 'settings-hooks', 'aria-labelledby': 'wh-title' },
      h('h2', { id: 'wh-title' }, t('wh.title')),
      h('p', { class: 'hint' }, t('wh.hint')),
      secret,
      this.hooks.length
        ? h('div', { class: 'table-wrap' }, h('table', { class: 'tasks', id: 'wh-table' },
          h('thead', {}, h('tr', {}, ...['wh.url', 'nd.events', 'wh.state', 'scol.actions'].map((k) => h('th', { scope: 'col' }, t(k))))),
          h('tbody', { id: 'wh-body' }, ...rows)))
        : h('p', { class: 'empty', id: 'wh-empty' }, t('wh.none')),
      add,
    );
  }

  hookRows(hook) {
    const action = (name, label, onClick) => h('button', { type: 'button', class: 'btn small', dataset: { action: name, id: hook.id }, onclick: onClick }, label);
    const row = h(
      'tr',
      { dataset: { hook: hook.id } },
      h('td', {}, h('code', { class: 'hook-url' }, hook.url)),
      h('td', {}, hook.events.map((e) => t(`nd.ev.${e}`)).join(i18n.locale === 'zh-CN' ? '、' : ', ')),
      h('td', {}, h('span', { class: 'badge' }, hook.enabled ? t('wh.on') : t('wh.off'))),
      h('td', { class: 'actions' },
        hook.enabled ? action('test', t('wh.test'), () => this.sendTest(hook)) : null,
        action('toggle', hook.enabled ? t('wh.switchOff') : t('wh.switchOn'), () => this.toggle(hook)),
        action('deliveries', t('wh.deliveries'), () => this.toggleDeliveries(hook)),
        action('delete', t('schedDelete'), () => this.deleteHook(hook))),
    );
    const shown = this.deliveries.get(hook.id);
    if (!shown) return [row];
    const items = shown.length
      ? h('ul', { class: 'deliveries' }, ...shown.map((d) => h(
        'li',
        { dataset: { delivery: d.id, status: d.status } },
        h('span', { class: 'badge' }, t(`wh.status.${d.status}`)),
        ` ${i18n.has(`nd.ev.${d.type}`) ? t(`nd.ev.${d.type}`) : d.type} · ${i18n.dateTimeShort(d.deliveredAt || d.createdAt)}`,
        d.status === 'dropped' ? ` · ${t('wh.droppedWhy')}` : '',
        d.lastStatusCode ? ` · HTTP ${d.lastStatusCode}` : '',
        d.nextTryAt ? ` · ${t('wh.nextTry', { time: i18n.dateTimeShort(d.nextTryAt) })}` : '',
        ['delivered', 'dead', 'dropped'].includes(d.status) && hook.enabled
          ? h('button', { type: 'button', class: 'btn small', dataset: { action: 'redeliver' }, onclick: () => this.redeliver(hook, d) }, t('wh.redeliver'))
          : null,
      )))
      : h('p', { class: 'hint' }, t('wh.noDeliveries'));
    return [row, h('tr', { class: 'runs-row' }, h('td', { colspan: '4' }, items))];
  }

  async addHook() {
    const box = $('wh-error');
    box.hidden = true;
    const events = [...document.querySelectorAll('#wh-form [data-hook-event]')].filter((x) => x.checked).map((x) => x.dataset.hookEvent);
    try {
      const { data } = await api.call('/api/v1/webhook-endpoints', { method: 'POST', body: { url: $('wh-url').value.trim(), events } });
      this.secret = { id: data.id, secret: data.secret };
      this.hooks = [...this.hooks, data];
      this.render();
      this.ctx.notify('ok', t('wh.added'));
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      box.replaceChildren(...errorNodes(describe(error)));
      box.hidden = false;
    }
    return undefined;
  }

  async sendTest(hook) {
    await this.guarded(async () => {
      await api.call(`/api/v1/webhook-endpoints/${encodeURIComponent(hook.id)}/test`, { method: 'POST' });
      this.ctx.notify('ok', t('wh.testSent'));
      await this.loadDeliveries(hook);
      this.follow(hook);
    });
  }

  /** Reload the history a few times while a delivery of it is still under way. */
  follow(hook, tries = 6) {
    const waiting = (this.deliveries.get(hook.id) || []).some((d) => d.status === 'pending' || d.status === 'sending');
    if (!waiting || tries <= 0) return;
    setTimeout(async () => {
      if (!this.deliveries.has(hook.id)) return; // closed meanwhile
      try {
        await this.loadDeliveries(hook);
      } catch {
        return;
      }
      this.follow(hook, tries - 1);
    }, 1500);
  }

  async toggle(hook) {
    await this.guarded(async () => {
      const { data } = await api.call(`/api/v1/webhook-endpoints/${encodeURIComponent(hook.id)}`, { method: 'PATCH', body: { enabled: !hook.enabled } });
      this.hooks = this.hooks.map((x) => (x.id === hook.id ? data : x));
      this.ctx.notify('ok', data.enabled ? t('wh.switchedOn') : t('wh.switchedOff'));
      this.render();
    });
  }

  async loadDeliveries(hook) {
    const { data } = await api.call(`/api/v1/webhook-endpoints/${encodeURIComponent(hook.id)}/deliveries`);
    this.deliveries.set(hook.id, data?.items || []);
    this.render();
  }

  async toggleDeliveries(hook) {
    if (this.deliveries.has(hook.id)) {
      this.deliveries.delete(hook.id);
      this.render();
      return;
    }
    await this.guarded(() => this.loadDeliveries(hook));
  }

  async redeliver(hook, delivery) {
    await this.guarded(async () => {
      await api.call(`/api/v1/webhook-endpoints/${encodeURIComponent(hook.id)}/deliveries/${encodeURIComponent(delivery.id)}/redeliver`, { method: 'POST' });
      this.ctx.notify('ok', t('wh.redelivering'));
      await this.loadDeliveries(hook);
      this.follow(hook);
    });
  }

  async deleteHook(hook) {
    const yes = await this.ctx.confirm({ title: t('wh.deleteTitle'), text: t('wh.deleteText', { url: hook.url }), yes: t('schedDelete'), no: t('keep') });
    if (!yes) return;
    await this.guarded(async () => {
      await api.call(`/api/v1/webhook-endpoints/${encodeURIComponent(hook.id)}`, { method: 'DELETE' });
      this.hooks = this.hooks.filter((x) => x.id !== hook.id);
      this.deliveries.delete(hook.id);
      if (this.secret?.id === hook.id) this.secret = null;
      this.render();
    });
  }
}
