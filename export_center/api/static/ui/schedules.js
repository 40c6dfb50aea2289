// Scheduled exports: the list of the user's schedules (what, when in its own time zone,
// the next runs, the state, the last runs) and the "New schedule" dialog. A schedule is
// a saved export (type, format) with a cron expression, an IANA time zone and, for types
// with a date range, a relative window ("the previous week") resolved when it fires.
//
// API: GET/POST /api/v1/schedules, POST /api/v1/schedules/{id}/run|pause|resume,
// DELETE /api/v1/schedules/{id}, GET /api/v1/schedules/{id}/runs.

import { $, h } from './dom.js';
import * as i18n from './i18n.js';
import * as api from './api.js';
import { describe, errorNodes } from './form.js';
import './schedules_i18n.js';

const { t } = i18n;

const DAYS = ['MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT', 'SUN'];
const WINDOWS = ['previous_day', 'previous_week', 'previous_month', 'month_to_date', 'lastNDays'];
/** The window a frequency suggests (the period that just ended). */
const WINDOW_OF = { daily: 'previous_day', weekly: 'previous_week', monthly: 'previous_month' };

/** The cron expression of the dialog's choices (minute hour day-of-month month day-of-week). */
export function cronOf({ frequency, time, weekday, monthDay, custom }) {
  if (frequency === 'custom') return String(custom || '').trim();
  const [hh, mm] = String(time || '08:00').split(':').map((x) => Number.parseInt(x, 10) || 0);
  if (frequency === 'weekly') return `${mm} ${hh} * * ${weekday || 'MON'}`;
  if (frequency === 'monthly') return `${mm} ${hh} ${monthDay || 1} * *`;
  return `${mm} ${hh} * * *`;
}

/** The `window` field of a create body: a name, `{lastNDays: N}`, or undefined. */
export function windowOf(choice, days) {
  if (!choice) return undefined;
  if (choice === 'lastNDays') return { lastNDays: Number.parseInt(days, 10) || 0 };
  return choice;
}

function zones() {
  try {
    const all = Intl.supportedValuesOf('timeZone');
    return all.includes('UTC') ? all : ['UTC', ...all];
  } catch {
    return ['UTC', 'Asia/Shanghai', i18n.browserZone];
  }
}

/** A fire time in the schedule's own zone, as the server gave it (ISO with offset). */
function fireText(iso, zone) {
  const at = Date.parse(iso);
  if (!Number.isFinite(at)) return String(iso || '');
  try {
    // Date, weekday and time as three words ("2026/12/07 周一 08:00", "12/07/2026 Mon 08:00"):
    // one format of all three runs the date and the Chinese weekday together.
    const part = (options) => new Intl.DateTimeFormat(i18n.locale, { timeZone: zone, ...options }).format(at);
    return [
      part({ year: 'numeric', month: '2-digit', day: '2-digit' }),
      part({ weekday: 'short' }),
      part({ hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }),
    ].join(' ');
  } catch {
    return i18n.dateTimeShort(iso);
  }
}

/** Why a schedule is paused, in the page's language: "paused by X" is worded here; the
 * scheduler's own sentences (a lost permission, ...) are English, marked as such. */
function pauseText(reason) {
  const by = /^paused by (.+)$/.exec(String(reason || ''));
  if (by) return h('span', { class: 'sub' }, t('sched.pausedBy', { user: by[1] }));
  return h('span', { class: 'sub', lang: 'en' }, reason);
}

/** The date range of a schedule: its window, else the fixed dates of its parameters. */
function rangeText(item) {
  if (item.window) return windowText(item.window);
  const dates = Object.values(item.export?.parameters || {}).filter((v) => /^\d{4}-\d{2}-\d{2}$/.test(String(v)));
  if (dates.length === 2) return t('schedFixedDates', { from: dates[0], to: dates[1] });
  return t('schedNoWindow');
}

function windowText(win) {
  if (!win) return t('schedNoWindow');
  if (typeof win === 'object' && win.lastNDays) return t('win.lastNDays.n', { n: win.lastNDays });
  return t(`win.${win}`);
}

export class SchedulesView {
  /** @param {object} ctx `{types(), typeTitle(code), notify(kind, text), notifyError(error), confirm({title, text, yes, no}), onUnauthorized(error), openTask(taskId)}` */
  constructor(ctx) {
    this.ctx = ctx;
    this.items = [];
    this.runs = new Map(); // scheduleId -> runs shown under its row
    this.dialog = $('schedule-dialog');
    this.formEl = $('schedule-form');
    $('new-schedule').addEventListener('click', () => this.openDialog());
    $('s-cancel').addEventListener('click', () => this.dialog.close());
    $('s-frequency').addEventListener('change', () => this.syncFrequency(true));
    $('s-type').addEventListener('change', () => this.syncType());
    $('s-window').addEventListener('change', () => this.syncWindow());
    this.formEl.addEventListener('submit', (event) => {
      event.preventDefault();
      this.submit();
    });
  }

  async start() {
    await this.refresh();
  }

  stop() {}

  relabel() {
    this.render();
  }

  async refresh() {
    try {
      const { data } = await api.call('/api/v1/schedules');
      this.items = Array.isArray(data?.items) ? data.items : [];
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      this.ctx.notifyError(error);
    }
    this.render();
  }

  render() {
    const body = $('schedules-body');
    $('schedules-empty').hidden = this.items.length > 0;
    $('schedules-table').hidden = this.items.length === 0;
    body.replaceChildren(...this.items.flatMap((item) => this.rows(item)));
  }

  rows(item) {
    const id = item.scheduleId;
    const zone = item.timezone || 'UTC';
    const paused = item.state === 'paused';
    const ended = item.state === 'ended';
    const next = (item.nextFireTimes || []).slice(0, 5);
    const action = (name, label, onClick, extra = {}) => h('button', { type: 'button', class: 'btn small', dataset: { action: name, id: String(id) }, onclick: onClick, ...extra }, label);
    const row = h(
      'tr',
      { dataset: { schedule: String(id) } },
      h('td', {}, h('span', { class: 'task-name' }, item.name || ''), h('span', { class: 'sub' }, `${this.ctx.typeTitle(item.export?.exportType)} · ${String(item.export?.format || '').toUpperCase()}`)),
      h('td', {}, h('code', {}, item.cron || ''), h('span', { class: 'sub' }, `${zone} · ${rangeText(item)}`)),
      h('td', {}, next.length && !paused && !ended ? h('ol', { class: 'fire-times' }, ...next.map((x) => h('li', {}, fireText(x, zone)))) : h('span', { class: 'sub' }, '—')),
      h('td', {}, h('span', { class: `badge state-${paused || ended ? 'cancelled' : 'running'}` }, t(`sched.${item.state || 'active'}`)), item.pauseReason ? pauseText(item.pauseReason) : null),
      h(
        'td',
        { class: 'actions' },
        ended ? null : action('run', t('schedRunNow'), () => this.act(item, 'run')),
        ended ? null : paused ? action('resume', t('schedResume'), () => this.act(item, 'resume')) : action('pause', t('schedPause'), () => this.act(item, 'pause')),
        action('runs', t('schedRuns'), () => this.toggleRuns(item), { 'aria-expanded': String(this.runs.has(id)) }),
        action('delete', t('schedDelete'), () => this.remove(item), { class: 'btn small danger' }),
      ),
    );
    if (!this.runs.has(id)) return [row];
    const runs = this.runs.get(id);
    const list = runs.length
      ? h(
          'ul',
          { class: 'runs' },
          ...runs.map((r) => h(
            'li',
            {},
            h('span', {}, fireText(r.fireTime, zone)),
            ' · ',
            h('span', {}, r.outcome === 'failed' || !r.taskId ? t('run.failed') : t(`state.${r.state}`)),
            r.fires > 1 ? h('span', { class: 'sub' }, ` ${t('runCoalesced', { n: r.fires })}`) : null,
            r.message ? h('span', { class: 'sub' }, ` ${r.message}`) : null,
            r.taskId ? h('button', { type: 'button', class: 'btn small ghost', dataset: { task: r.taskId }, onclick: () => this.ctx.openTask(r.taskId) }, t('runOpen')) : null,
          )),
        )
      : h('p', { class: 'sub' }, t('runsNone'));
    return [row, h('tr', { class: 'runs-row' }, h('td', { colspan: '5' }, list))];
  }

  async toggleRuns(item) {
    const id = item.scheduleId;
    if (this.runs.has(id)) {
      this.runs.delete(id);
      return this.render();
    }
    await this.loadRuns(id);
  }

  async loadRuns(id) {
    try {
      const { data } = await api.call(`/api/v1/schedules/${encodeURIComponent(id)}/runs`);
      this.runs.set(id, Array.isArray(data?.items) ? data.items : []);
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      this.ctx.notifyError(error);
    }
    this.render();
  }

  async act(item, action) {
    try {
      await api.call(`/api/v1/schedules/${encodeURIComponent(item.scheduleId)}/${action}`, { method: 'POST' });
      this.ctx.notify('ok', t(`sched.done.${action}`, { name: item.name }));
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      this.ctx.notifyError(error);
    }
    await this.refresh();
    if (action === 'run') await this.loadRuns(item.scheduleId);
  }

  async remove(item) {
    const yes = await this.ctx.confirm({ title: t('schedDeleteTitle'), text: t('schedDeleteConfirm', { name: item.name }), yes: t('schedDelete'), no: t('keep') });
    if (!yes) return;
    try {
      await api.call(`/api/v1/schedules/${encodeURIComponent(item.scheduleId)}`, { method: 'DELETE' });
      this.ctx.notify('ok', t('sched.done.delete', { name: item.name }));
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      this.ctx.notifyError(error);
    }
    this.runs.delete(item.scheduleId);
    await this.refresh();
  }

  // ------------------------------------------------------------ the dialog

  openDialog() {
    const types = this.ctx.types();
    $('s-type').replaceChildren(...types.map((x) => h('option', { value: x.exportType }, this.ctx.typeTitle(x.exportType))));
    $('s-zone').replaceChildren(...zones().map((z) => h('option', { value: z }, z)));
    $('s-zone').value = zones().includes(i18n.browserZone) ? i18n.browserZone : 'UTC';
    $('s-weekday').replaceChildren(...DAYS.map((d) => h('option', { value: d }, t(`day.${d}`))));
    $('s-window').replaceChildren(h('option', { value: '' }, t('schedNoWindow')), ...WINDOWS.map((w) => h('option', { value: w }, t(`win.${w}`))));
    this.formEl.reset();
    $('s-frequency').value = 'weekly';
    $('s-time').value = '08:00';
    $('s-weekday').value = 'MON';
    $('s-zone').value = zones().includes(i18n.browserZone) ? i18n.browserZone : 'UTC';
    $('s-page').checked = true;
    this.clearErrors();
    this.syncType();
    this.syncFrequency(true);
    this.dialog.showModal();
    $('s-name').focus();
  }

  selectedType() {
    return this.ctx.types().find((x) => x.exportType === $('s-type').value);
  }

  syncType() {
    const type = this.selectedType();
    const formats = type?.formats || ['csv', 'xlsx'];
    const current = $('s-format').value;
    $('s-format').replaceChildren(...formats.map((f) => h('option', { value: f }, t(`format.${f}`))));
    if (formats.includes(current)) $('s-format').value = current;
    const ranged = Array.isArray(type?.dateRange);
    $('s-window-field').hidden = !ranged;
    if (!ranged) $('s-window').value = '';
    this.syncWindow();
  }

  syncFrequency(suggestWindow) {
    const frequency = $('s-frequency').value;
    $('s-weekday-field').hidden = frequency !== 'weekly';
    $('s-monthday-field').hidden = frequency !== 'monthly';
    $('s-time-field').hidden = frequency === 'custom';
    $('s-cron-field').hidden = frequency !== 'custom';
    if (suggestWindow && !$('s-window-field').hidden && WINDOW_OF[frequency]) $('s-window').value = WINDOW_OF[frequency];
    this.syncWindow();
  }

  syncWindow() {
    $('s-days-field').hidden = $('s-window').value !== 'lastNDays';
  }

  body() {
    const win = $('s-window-field').hidden ? undefined : windowOf($('s-window').value, $('s-days').value);
    const notify = [];
    if ($('s-page').checked) notify.push({ channel: 'page' });
    const email = $('s-email').value.trim();
    if (email) notify.push({ channel: 'email', to: email });
    const body = {
      name: $('s-name').value.trim(),
      // The heading row follows the page's language when the schedule was made: a run has
      // no browser to ask.
      export: {
        exportType: $('s-type').value,
        format: $('s-format').value,
        parameters: {},
        taskName: $('s-name').value.trim() || undefined,
        options: { language: i18n.locale === 'zh-CN' ? 'zh-CN' : 'en' },
      },
      cron: cronOf({ frequency: $('s-frequency').value, time: $('s-time').value, weekday: $('s-weekday').value, monthDay: $('s-monthday').value, custom: $('s-cron').value }),
      timezone: $('s-zone').value,
      notify,
    };
    if (win !== undefined) body.window = win;
    return body;
  }

  clearErrors() {
    for (const box of this.formEl.querySelectorAll('.error')) {
      box.hidden = true;
      box.replaceChildren();
    }
  }

  /** Where a field error of the server is shown: the field's box, else the form's. */
  errorBox(field) {
    const at = String(field || '');
    const map = [
      ['name', 's-name'], ['cron', 's-cron'], ['timezone', 's-zone'], ['window', 's-window'],
      ['notify', 's-email'], ['export.format', 's-format'], ['export', 's-type'],
    ];
    const hit = map.find(([prefix]) => at === prefix || at.startsWith(`${prefix}.`) || at.startsWith(`${prefix}[`));
    if (hit && hit[1] === 's-cron' && $('s-cron-field').hidden) return $('s-form-error');
    return hit ? $(`${hit[1]}-error`) : $('s-form-error');
  }

  async submit() {
    this.clearErrors();
    if (!$('s-name').value.trim()) {
      const box = $('s-name-error');
      box.replaceChildren(t('schedNameRequired'));
      box.hidden = false;
      $('s-name').focus();
      return;
    }
    const button = $('s-submit');
    button.disabled = true;
    try {
      const { data } = await api.call('/api/v1/schedules', { method: 'POST', body: this.body() });
      this.dialog.close();
      const first = (data?.nextFireTimes || [])[0];
      this.ctx.notify('ok', first ? t('schedCreated', { name: data.name || this.body().name, when: fireText(first, data.timezone || $('s-zone').value) }) : t('schedCreatedNoNext'));
      await this.refresh();
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 401) return this.ctx.onUnauthorized(error);
      const box = error instanceof api.ApiError ? this.errorBox(error.field) : $('s-form-error');
      box.replaceChildren(...errorNodes(describe(error)));
      box.hidden = false;
    } finally {
      button.disabled = false;
    }
  }
}
