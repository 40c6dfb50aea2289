// Text of the page in English and Chinese, and locale-aware formatting (Intl).
// The language is remembered in localStorage ("ec.lang"); the first visit follows the
// browser's languages.

const EN = {
  product: 'Export Center',
  center: 'Download center',
  skip: 'Skip to the content',
  loading: 'Loading…',
  signOut: 'Sign out',
  switchTo: '中文',
  switchLabel: '切换到中文',
  retryNow: 'Retry now',
  offline: 'The export center cannot be reached. Retrying by itself; exports keep running on the server.',
  signInTitle: 'Sign in to the download center',
  devTitle: 'Development sign-in',
  devIntro: 'This installation issues a token for the user you name. It is offered only on this machine.',
  user: 'User',
  tenant: 'Tenant',
  app: 'Application',
  'app.PLATFORM': 'Platform',
  'app.MERCHANT': 'Merchant',
  role: 'Role',
  'role.user': 'User: sees own exports',
  'role.admin': 'Administrator: sees every export of the tenant',
  signIn: 'Sign in',
  tokenSummary: 'Sign in with an access token',
  tokenIntro: 'Paste the bearer token from your administrator or host application. It stays in this browser tab only and is forgotten when you close the tab.',
  token: 'Access token',
  useToken: 'Use this token',
  tokenEmpty: 'Paste a token first.',
  required: 'Fill this in.',
  expired: 'Your sign-in has expired. Please sign in again.',
  signedOut: 'You have signed out.',
  hostFailed: 'The host application did not sign you in ({reason}). Sign in here instead.',
  whoAdmin: 'Administrator',
  whoAdminHint: 'You see the exports of every user of this tenant',
  myExports: 'My exports',
  allExports: 'All exports of {tenant}',
  newExport: 'New export',
  noTypes: 'Your account may not create exports here. Ask an administrator for an export permission.',
  state: 'State',
  exportType: 'Export type',
  owner: 'Requested by',
  anyOwner: 'Every user',
  perPage: 'Per page',
  all: 'All',
  clearFilters: 'Clear filters',
  refresh: 'Refresh',
  tzNote: 'Times are shown in your time zone, {tz}.',
  prev: 'Previous',
  next: 'Next',
  pageNo: 'Page {n}',
  pagesLabel: 'Pages',
  caption: 'Export tasks, newest first',
  'col.task': 'Task',
  'col.owner': 'Requested by',
  'col.type': 'Type',
  'col.state': 'State',
  'col.progress': 'Progress',
  'col.times': 'Time',
  'col.file': 'File',
  'col.actions': 'Actions',
  'state.queued': 'Queued',
  'state.running': 'Running',
  'state.succeeded': 'Completed',
  'state.failed': 'Failed',
  'state.cancelled': 'Cancelled',
  'state.expired': 'Expired',
  'phase.queued': 'Waiting to start',
  'phase.fetch': 'Reading data',
  'phase.render': 'Writing the file',
  'phase.store': 'Saving the file',
  attempts: 'Attempts: {n}',
  requested: 'Requested',
  started: 'Started',
  finished: 'Finished',
  rowsOf: '{done} of {total} rows',
  rowsDone: '{done} rows',
  rowsSoFar: '{done} rows so far',
  rate: '{rate} rows/s',
  eta: 'about {eta} left',
  waiting: 'Waiting for a free worker',
  retryPending: 'Will be retried automatically',
  fileDeleted: 'The file was deleted when it expired',
  availableUntil: 'Download until {date}',
  linkUntil: 'This link works until {date}',
  noFile: '—',
  download: 'Download',
  cancel: 'Cancel',
  retry: 'Retry',
  again: 'Export again',
  downloadLabel: 'Download {name}',
  cancelLabel: 'Cancel {name}',
  retryLabel: 'Retry {name}',
  againLabel: 'Export {name} again',
  details: 'Details',
  failedAt: 'Failed while {phase}, batch {batch}: {cause}.',
  failedIn: 'Failed while {phase}: {cause}.',
  failedPlain: 'Failed: {cause}.',
  retrying: 'Attempt {n} failed while {phase}, batch {batch}: {cause}. It will be retried automatically.',
  retryingPlain: 'Attempt {n} failed: {cause}. It will be retried automatically.',
  retryingIn: 'Attempt {n} failed while {phase}: {cause}. It will be retried automatically.',
  rangeFrom: 'from {d}',
  rangeTo: 'until {d}',
  allData: 'Everything',
  fileZone: 'file times in {tz}',
  progressOf: 'Progress of {name}',
  noFileLabel: 'No file',
  requiredMark: ' (required)',
  stopping: 'Stopping…',
  'phaseIn.queued': 'waiting to start',
  'phaseIn.fetch': 'reading data',
  'phaseIn.render': 'writing the file',
  'phaseIn.store': 'saving the file',
  warning: 'Completed, but some data had to be changed:',
  cancelledByUser: 'Cancelled by the user.',
  expiredNote: 'The file has expired and was deleted. Export it again to get a new one.',
  emptyTitle: 'No exports yet',
  emptyText: 'Create an export: it runs in the background, and the file is ready here to download.',
  emptyFilteredTitle: 'No exports match these filters',
  emptyFilteredText: 'Try another state, type or user.',
  taskName: 'Task name',
  format: 'Format',
  'format.xlsx': 'Excel (.xlsx)',
  'format.csv': 'CSV (.csv)',
  filtersLegend: 'What to export',
  rangeHint: 'Both dates are included. Leave them empty for every date.',
  anyValue: 'Any',
  yes: 'Yes',
  no: 'No',
  maxRows: 'At most {n} rows per export.',
  timeZone: 'Time zone',
  tzHint: 'Dates and times in the file are written in this time zone.',
  close: 'Cancel',
  create: 'Create export',
  creating: 'Creating…',
  created: 'Export “{name}” created. Progress shows in the list.',
  duplicate: 'The same export is already running, so no second one was started.',
  replayed: 'This export was already created.',
  hiddenByFilters: 'It is hidden by the current filters.',
  cancelling: 'Stopping “{name}”…',
  cancelledNow: '“{name}” is cancelled.',
  retried: '“{name}” is queued again.',
  refreshingLink: 'The download link had expired; fetching a new one…',
  announceDone: '{name}: completed, ready to download.',
  announceFailed: '{name}: failed.',
  announceCancelled: '{name}: cancelled.',
  announceRunning: '{name}: running.',
  announceProgress: '{name}: {pct} done.',
  tryAgainAt: 'You can try again after {time}.',
  dismiss: 'Dismiss',
  detail: 'Server said: {message}',
  'err.UNAUTHORIZED': 'Please sign in.',
  'err.TOKEN_EXPIRED': 'Your sign-in has expired. Please sign in again.',
  'err.TOKEN_INVALID': 'This token is not valid. Check that you copied all of it.',
  'err.TOKEN_WRONG_KEY': 'This token was issued by another Export Center installation.',
  'err.TOKEN_NOT_YET_VALID': 'This token is not valid yet: the clock of the system that issued it is ahead.',
  'err.PERMISSION_DENIED': 'You do not have permission to do this.',
  'err.EXPORT_TYPE_DISABLED': 'This export type is switched off at the moment.',
  'err.IDEMPOTENCY_KEY_REUSED': 'The form was sent before with other content. Send it again.',
  'err.TOO_MANY_ACTIVE_TASKS': 'You already have as many exports queued or running as allowed. Wait for one to finish.',
  'err.TOO_MANY_ACTIVE_TASKS_FOR_TYPE': 'Too many exports of this type are running right now.',
  'err.NOT_CANCELLABLE': 'This export has already ended, so it cannot be cancelled.',
  'err.NOT_RETRYABLE': 'Only a failed export can be retried, and this one is no longer failed.',
  'err.TASK_NOT_FOUND': 'This export does not exist, or you may not see it.',
  'err.INVALID_DATE_RANGE': 'The start date is after the end date.',
  'err.INVALID_DATE': 'Enter a valid date.',
  'err.INVALID_TIME_ZONE': 'Choose a time zone from the list, such as Asia/Shanghai.',
  'err.INVALID_VALUE': 'This value is not allowed here.',
  'err.MISSING_FIELD': 'Fill this in.',
  'err.TOO_LONG': 'This is too long.',
  'err.TOO_SHORT': 'This is too short.',
  'err.PARAMETER_TOO_LONG': 'This is too long.',
  'err.INVALID_FORMAT': 'Choose Excel or CSV.',
  'err.UNKNOWN_EXPORT_TYPE': 'This export type does not exist (any more).',
  'err.UNKNOWN_PARAMETER': 'This filter is not known for this export type.',
  'err.LINK_EXPIRED': 'The download link has expired. Refresh the list for a new one.',
  'err.LINK_INVALID': 'The download link is not valid. Refresh the list for a new one.',
  'err.FILE_EXPIRED': 'The file has expired and was deleted. Export it again.',
  'err.FILE_GONE': 'The file is no longer stored. Export it again.',
  'err.NOT_READY': 'The file is not ready yet.',
  'err.NO_FILE': 'This export has no file.',
  'err.BODY_TOO_LARGE': 'The request is too large.',
  'err.NOT_FOUND': 'Not available here.',
  'err.NOT_LOOPBACK': 'The development sign-in works only on the machine that runs the export center.',
  'err.UNSUPPORTED_MEDIA_TYPE': 'The request was not sent as JSON. Reload the page and try again.',
  'err.4xx': 'The export center refused the request.',
  'err.5xx': 'The export center had a problem. Try again in a moment.',
  'fail.PROVIDER_UNAVAILABLE': 'the data source did not answer',
  'fail.PROVIDER_TOO_SLOW': 'the data source answered too slowly',
  'fail.PROVIDER_REJECTED': 'the data source refused the request',
  'fail.SNAPSHOT_EXPIRED': 'the data snapshot expired before the export finished',
  'fail.PROVIDER_REDIRECTED': 'the data source answered with a redirect',
  'fail.PROVIDER_CONTRACT': 'the data source sent data in an unexpected shape',
  'fail.SCHEMA_CHANGED': 'the columns of the data changed during the export',
  'fail.ROW_LIMIT_EXCEEDED': 'there are more rows than this export type allows; narrow the filters',
  'fail.FILE_TOO_LARGE': 'the file grew past the size limit; narrow the filters',
  'fail.STORAGE_ERROR': 'the file could not be saved',
  'fail.DEADLINE_PASSED': 'the export ran out of time',
  'fail.WORKER_LOST': 'the server running it stopped',
  'fail.COMMAND_CORRUPTED': 'the task message was damaged; export again',
  'fail.INTERNAL_ERROR': 'an internal error occurred',
  'fail.INVALID_VALUE': 'the data source sent a value the file cannot hold',
  'fail.UNKNOWN_EXPORT_TYPE': 'this export type no longer exists',
  'fail.UNKNOWN_FORMAT': 'this file format is not supported',
  'fail.default': 'an error occurred',
};

const ZH = {
  product: '导出中心',
  center: '下载中心',
  skip: '跳到主要内容',
  loading: '加载中…',
  signOut: '退出登录',
  switchTo: 'English',
  switchLabel: 'Switch to English',
  retryNow: '立即重试',
  offline: '无法连接导出中心，正在自动重试。服务器上的导出任务不受影响。',
  signInTitle: '登录下载中心',
  devTitle: '开发环境登录',
  devIntro: '导出中心会为你填写的用户签发访问令牌。此登录方式仅在本机可用。',
  user: '用户',
  tenant: '租户',
  app: '应用',
  'app.PLATFORM': '平台端',
  'app.MERCHANT': '商家端',
  role: '角色',
  'role.user': '普通用户：只能查看自己的导出',
  'role.admin': '管理员：可查看本租户所有人的导出',
  signIn: '登录',
  tokenSummary: '使用访问令牌登录',
  tokenIntro: '请粘贴管理员或业务系统提供的访问令牌（Bearer Token）。令牌只保存在当前标签页中，关闭标签页后即清除。',
  token: '访问令牌',
  useToken: '使用此令牌',
  tokenEmpty: '请先粘贴令牌。',
  required: '此项为必填项。',
  expired: '登录已过期，请重新登录。',
  signedOut: '你已退出登录。',
  hostFailed: '业务系统未能完成登录（{reason}），请在此登录。',
  whoAdmin: '管理员',
  whoAdminHint: '可查看本租户所有用户的导出',
  myExports: '我的导出',
  allExports: '{tenant} 的全部导出',
  newExport: '新建导出',
  noTypes: '你的账号暂无可用的导出类型，请联系管理员开通导出权限。',
  state: '状态',
  exportType: '导出类型',
  owner: '创建人',
  anyOwner: '全部用户',
  perPage: '每页条数',
  all: '全部',
  clearFilters: '清除筛选',
  refresh: '刷新',
  tzNote: '时间按你所在的时区（{tz}）显示。',
  prev: '上一页',
  next: '下一页',
  pageNo: '第 {n} 页',
  pagesLabel: '分页',
  caption: '导出任务，最新的在前',
  'col.task': '任务名称',
  'col.owner': '创建人',
  'col.type': '类型',
  'col.state': '状态',
  'col.progress': '进度',
  'col.times': '时间',
  'col.file': '文件',
  'col.actions': '操作',
  'state.queued': '排队中',
  'state.running': '进行中',
  'state.succeeded': '已完成',
  'state.failed': '失败',
  'state.cancelled': '已取消',
  'state.expired': '已过期',
  'phase.queued': '等待开始',
  'phase.fetch': '正在读取数据',
  'phase.render': '正在生成文件',
  'phase.store': '正在保存文件',
  attempts: '执行次数：{n}',
  requested: '提交',
  started: '开始',
  finished: '结束',
  rowsOf: '{done} / {total} 条',
  rowsDone: '共 {done} 条',
  rowsSoFar: '已处理 {done} 条',
  rate: '{rate} 条/秒',
  eta: '预计剩余 {eta}',
  waiting: '排队等待执行',
  retryPending: '稍后将自动重试',
  fileDeleted: '文件已过期删除',
  availableUntil: '可下载至 {date}',
  linkUntil: '下载链接有效期至 {date}',
  noFile: '—',
  download: '下载',
  cancel: '取消',
  retry: '重试',
  again: '再次导出',
  downloadLabel: '下载「{name}」',
  cancelLabel: '取消「{name}」',
  retryLabel: '重试「{name}」',
  againLabel: '再次导出「{name}」',
  details: '详细信息',
  failedAt: '{phase}时失败（第 {batch} 批）：{cause}。',
  failedIn: '{phase}时失败：{cause}。',
  failedPlain: '导出失败：{cause}。',
  retrying: '第 {n} 次执行在{phase}时失败（第 {batch} 批）：{cause}。稍后将自动重试。',
  retryingPlain: '第 {n} 次执行失败：{cause}。稍后将自动重试。',
  retryingIn: '第 {n} 次执行在{phase}时失败：{cause}。稍后将自动重试。',
  rangeFrom: '{d} 起',
  rangeTo: '截至 {d}',
  allData: '全部数据',
  fileZone: '文件时区 {tz}',
  progressOf: '「{name}」的进度',
  noFileLabel: '暂无文件',
  requiredMark: '（必填）',
  stopping: '正在停止…',
  'phaseIn.queued': '等待开始',
  'phaseIn.fetch': '读取数据',
  'phaseIn.render': '生成文件',
  'phaseIn.store': '保存文件',
  warning: '已完成，但部分数据做了调整：',
  cancelledByUser: '已由用户取消。',
  expiredNote: '文件已过期删除。如需下载，请再次导出。',
  emptyTitle: '还没有导出任务',
  emptyText: '新建一个导出任务，它会在后台运行，完成后即可在这里下载文件。',
  emptyFilteredTitle: '没有符合筛选条件的导出任务',
  emptyFilteredText: '换个状态、类型或创建人试试。',
  taskName: '任务名称',
  format: '文件格式',
  'format.xlsx': 'Excel（.xlsx）',
  'format.csv': 'CSV（.csv）',
  filtersLegend: '导出范围',
  rangeHint: '起止日期均包含在内；不填表示不限日期。',
  anyValue: '不限',
  yes: '是',
  no: '否',
  maxRows: '每次最多导出 {n} 条。',
  timeZone: '时区',
  tzHint: '文件中的日期和时间按此时区写入。',
  close: '取消',
  create: '创建导出',
  creating: '正在创建…',
  created: '已创建导出任务「{name}」，可在列表中查看进度。',
  duplicate: '相同的导出任务正在进行，未重复创建。',
  replayed: '该导出任务已创建。',
  hiddenByFilters: '但在当前筛选条件下不会显示。',
  cancelling: '正在停止「{name}」…',
  cancelledNow: '已取消「{name}」。',
  retried: '「{name}」已重新排队。',
  refreshingLink: '下载链接已过期，正在获取新链接…',
  announceDone: '「{name}」已完成，可以下载了。',
  announceFailed: '「{name}」导出失败。',
  announceCancelled: '「{name}」已取消。',
  announceRunning: '「{name}」开始导出。',
  announceProgress: '「{name}」已完成 {pct}。',
  tryAgainAt: '请在 {time} 之后再试。',
  dismiss: '关闭',
  detail: '服务器返回：{message}',
  'err.UNAUTHORIZED': '请先登录。',
  'err.TOKEN_EXPIRED': '登录已过期，请重新登录。',
  'err.TOKEN_INVALID': '令牌无效，请检查是否复制完整。',
  'err.TOKEN_WRONG_KEY': '该令牌不是由本导出中心签发的。',
  'err.TOKEN_NOT_YET_VALID': '令牌尚未生效，签发系统的时钟可能偏快。',
  'err.PERMISSION_DENIED': '你没有执行此操作的权限。',
  'err.EXPORT_TYPE_DISABLED': '该导出类型已暂停使用。',
  'err.IDEMPOTENCY_KEY_REUSED': '表单已用其他内容提交过，请重新提交。',
  'err.TOO_MANY_ACTIVE_TASKS': '你排队中和进行中的导出已达上限，请等其中一个完成后再试。',
  'err.TOO_MANY_ACTIVE_TASKS_FOR_TYPE': '该类型正在进行的导出过多。',
  'err.NOT_CANCELLABLE': '该导出已结束，无法取消。',
  'err.NOT_RETRYABLE': '只有失败的导出才能重试，该任务的状态已经变化。',
  'err.TASK_NOT_FOUND': '该导出任务不存在，或你无权查看。',
  'err.INVALID_DATE_RANGE': '开始日期不能晚于结束日期。',
  'err.INVALID_DATE': '请输入有效的日期。',
  'err.INVALID_TIME_ZONE': '请从列表中选择时区，例如 Asia/Shanghai。',
  'err.INVALID_VALUE': '该值不可用。',
  'err.MISSING_FIELD': '此项为必填项。',
  'err.TOO_LONG': '内容过长。',
  'err.TOO_SHORT': '内容过短。',
  'err.PARAMETER_TOO_LONG': '内容过长。',
  'err.INVALID_FORMAT': '请选择 Excel 或 CSV 格式。',
  'err.UNKNOWN_EXPORT_TYPE': '该导出类型不存在。',
  'err.UNKNOWN_PARAMETER': '该导出类型没有这个筛选条件。',
  'err.LINK_EXPIRED': '下载链接已过期，请刷新列表获取新链接。',
  'err.LINK_INVALID': '下载链接无效，请刷新列表获取新链接。',
  'err.FILE_EXPIRED': '文件已过期删除，请再次导出。',
  'err.FILE_GONE': '文件已不存在，请再次导出。',
  'err.NOT_READY': '文件尚未生成。',
  'err.NO_FILE': '该导出没有生成文件。',
  'err.BODY_TOO_LARGE': '请求内容过大。',
  'err.NOT_FOUND': '此处不提供该功能。',
  'err.NOT_LOOPBACK': '开发环境登录仅限在运行导出中心的本机上使用。',
  'err.UNSUPPORTED_MEDIA_TYPE': '请求格式不正确，请刷新页面后重试。',
  'err.4xx': '导出中心拒绝了该请求。',
  'err.5xx': '导出中心出现问题，请稍后再试。',
  'fail.PROVIDER_UNAVAILABLE': '数据源暂时无法响应',
  'fail.PROVIDER_TOO_SLOW': '数据源响应超时',
  'fail.PROVIDER_REJECTED': '数据源拒绝了请求',
  'fail.SNAPSHOT_EXPIRED': '导出完成前数据快照已失效',
  'fail.PROVIDER_REDIRECTED': '数据源返回了重定向',
  'fail.PROVIDER_CONTRACT': '数据源返回的数据格式与约定不符',
  'fail.SCHEMA_CHANGED': '导出过程中数据列发生了变化',
  'fail.ROW_LIMIT_EXCEEDED': '数据量超过该类型的上限，请缩小导出范围',
  'fail.FILE_TOO_LARGE': '文件超过大小上限，请缩小导出范围',
  'fail.STORAGE_ERROR': '文件保存失败',
  'fail.DEADLINE_PASSED': '导出超出了允许的执行时间',
  'fail.WORKER_LOST': '执行该任务的服务器中断了',
  'fail.COMMAND_CORRUPTED': '任务消息已损坏，请再次导出',
  'fail.INTERNAL_ERROR': '系统内部错误',
  'fail.INVALID_VALUE': '数据源返回了无法写入文件的值',
  'fail.UNKNOWN_EXPORT_TYPE': '该导出类型已不存在',
  'fail.UNKNOWN_FORMAT': '不支持该文件格式',
  'fail.default': '发生错误',
};

const STRINGS = { en: EN, 'zh-CN': ZH };
const KEY = 'ec.lang';

function initial() {
  try {
    const saved = localStorage.getItem(KEY);
    if (saved && STRINGS[saved]) return saved;
  } catch { /* storage may be off: follow the browser */ }
  for (const lang of navigator.languages || [navigator.language]) {
    if (/^zh\b/i.test(lang)) return 'zh-CN';
    if (/^en\b/i.test(lang)) return 'en';
  }
  return 'en';
}

export let locale = initial();

/** Switch the language and remember it. */
export function setLocale(next) {
  locale = STRINGS[next] ? next : 'en';
  try { localStorage.setItem(KEY, locale); } catch { /* not remembered */ }
  document.documentElement.lang = locale;
}

/** The text of `key` with `{name}` placeholders filled from `vars`. */
export function t(key, vars) {
  const text = STRINGS[locale][key] ?? EN[key] ?? key;
  return vars ? text.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m)) : text;
}

/** Whether `key` has a text (used for codes the page may not know). */
export function has(key) {
  return key in EN;
}

/** Fill every element with a `data-t` attribute. */
export function translatePage(root = document) {
  document.documentElement.lang = locale;
  for (const el of root.querySelectorAll('[data-t]')) el.textContent = t(el.dataset.t);
}

const cache = new Map();
function cached(kind, options, make) {
  const key = `${locale}|${kind}|${JSON.stringify(options)}`;
  if (!cache.has(key)) cache.set(key, make());
  return cache.get(key);
}

export function number(value, options = {}) {
  return cached('n', options, () => new Intl.NumberFormat(locale, options)).format(value);
}

export function percent(fraction) {
  return number(fraction, { style: 'percent', maximumFractionDigits: 0 });
}

/** A date-time in the browser's time zone (`iso` is UTC ISO 8601). */
export function dateTime(iso) {
  if (!iso) return '';
  const options = { dateStyle: 'short', timeStyle: 'medium' };
  return cached('dt', options, () => new Intl.DateTimeFormat(locale, options)).format(new Date(iso));
}

/** A date-time without seconds (far-away moments: when a file expires). */
export function dateTimeShort(iso) {
  if (!iso) return '';
  const options = { dateStyle: 'short', timeStyle: 'short' };
  return cached('ds', options, () => new Intl.DateTimeFormat(locale, options)).format(new Date(iso));
}

export function date(value) {
  const options = { dateStyle: 'medium' };
  return cached('d', options, () => new Intl.DateTimeFormat(locale, options)).format(value);
}

export function time(date) {
  const options = { timeStyle: 'medium' };
  return cached('t', options, () => new Intl.DateTimeFormat(locale, options)).format(date);
}

export function bytes(count) {
  if (count == null) return '';
  const units = ['byte', 'kilobyte', 'megabyte', 'gigabyte'];
  let value = count;
  let i = 0;
  while (value >= 1000 && i < units.length - 1) { value /= 1000; i += 1; }
  return number(value, { style: 'unit', unit: units[i], unitDisplay: 'short', maximumFractionDigits: i ? 1 : 0 });
}

/** A duration in seconds as "1 min 5 sec" / "1分钟5秒". */
export function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  const unit = (value, name) => number(value, { style: 'unit', unit: name, unitDisplay: 'short' });
  const parts = s < 60 ? [unit(s, 'second')]
    : s < 3600 ? [unit(Math.floor(s / 60), 'minute'), s % 60 ? unit(s % 60, 'second') : '']
      : [unit(Math.floor(s / 3600), 'hour'), unit(Math.floor((s % 3600) / 60), 'minute')];
  return parts.filter(Boolean).join(locale === 'zh-CN' ? '' : ' ');
}

/** The browser's IANA time zone. */
export const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
