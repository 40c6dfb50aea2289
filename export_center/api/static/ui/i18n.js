// Text of the page in English and Chinese, and locale-aware formatting (Intl).
// The language is remembered in localStorage ("ec.lang"); the first visit follows the
// browser's languages. Error codes of the API map to sentences here (errorKey), so the
// Chinese page never shows the server's English.

const EN = {
  product: 'Export Center',
  center: 'Download center',
  skip: 'Skip to the content',
  loading: 'Loading…',
  signOut: 'Sign out',
  switchTo: '中文',
  switchLabel: '切换到中文',
  retryNow: 'Retry now',
  offline: 'The export center cannot be reached. The page tries again every few seconds; exports keep running on the server.',
  createOffline: 'The export center could not be reached, so no export was created. Check your connection, then press “Create export” again.',
  'offline.database': 'The export center’s database is not answering right now. The page tries again every few seconds; running exports wait and go on by themselves.',
  'offline.busy': 'The export center is too busy to answer right now. The page tries again every few seconds.',
  'offline.storage': 'The export center’s file storage is not answering right now. The page tries again every few seconds.',
  'createOffline.database': 'The export center’s database is not answering right now, so no export was created. Wait a few seconds, then press “Create export” again.',
  'createOffline.busy': 'The export center is too busy right now, so no export was created. Press “Create export” again in a moment.',
  'createOffline.storage': 'The export center’s file storage is not answering right now, so no export was created. Wait a few seconds, then press “Create export” again.',
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
  viewsLabel: 'Views',
  viewExports: 'Exports',
  viewOps: 'Operations',
  newExport: 'New export',
  noTypesApp: 'No export types are offered to {app} accounts yet, so you cannot create exports here.',
  noTypesPerm: 'Your account has no permission to create exports. Ask an administrator for an export permission.',
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
  waitingRetry: 'Waiting to retry',
  attemptOf: 'Attempt {n} of {max}',
  requested: 'Requested',
  started: 'Started',
  startedAttempt: 'Attempt {n} started',
  finished: 'Finished',
  rowsOf: '{done} of {total} rows',
  rowsDone: '{done} rows',
  rowsSoFar: '{done} rows so far',
  stoppedAt: 'Stopped at {done} of {total} rows',
  stoppedAfter: 'Stopped after {done} rows',
  shardsOf: '{done} of {total} parts done',
  rate: '{rate} rows/s',
  eta: 'about {eta} left',
  waiting: 'Waiting for a free worker',
  fileDeleted: 'The file was deleted when it expired',
  availableUntil: 'Download until {date}',
  noFile: '—',
  download: 'Download',
  cancel: 'Cancel',
  retry: 'Retry',
  again: 'Export again',
  restart: 'Start over',
  downloadLabel: 'Download {name}',
  cancelLabel: 'Cancel {name}',
  retryLabel: 'Retry {name}',
  againLabel: 'Export {name} again',
  retryResume: 'Retry (continue where it stopped)',
  retryResumeLabel: 'Retry {name} (continue where it stopped)',
  restartLabel: 'Start {name} over',
  restartHint: 'Discard the parts already exported and run the whole export again',
  details: 'Details',
  retryingNote: 'Attempt {n} of {max} failed: {cause}. It is retried automatically at {time}.',
  retryingNowNote: 'Attempt {n} of {max} failed: {cause}. It is being retried automatically.',
  rangeFrom: 'from {d}',
  rangeTo: 'until {d}',
  allData: 'Everything',
  progressOf: 'Progress of {name}',
  noFileLabel: 'No file',
  requiredMark: ' (required)',
  stopping: 'Stopping…',
  warning: 'Completed, but some data had to be changed:',
  zeroRows: 'No data matched these filters, so the file holds only the column headings.',
  expiredNote: 'The file has expired and was deleted. Export it again to get a new one.',
  emptyTitle: 'No exports yet',
  emptyText: 'Create an export: it runs in the background, and the file is ready here to download.',
  emptyNoTypes: 'Exports appear here once your account may create them.',
  emptyFilteredTitle: 'No exports match these filters',
  emptyFilteredText: 'Try another state or type.',
  emptyFilteredTextOwner: 'Try another state, type or user.',
  noOwnerMatch: 'User names must match exactly, capitals included.',
  didYouMean: 'Did you mean:',
  taskName: 'Task name',
  format: 'Format',
  'format.xlsx': 'Excel (.xlsx)',
  'format.csv': 'CSV (.csv)',
  filtersLegend: 'What to export',
  rangeHint: 'Both dates are included. Leave them empty for every date.',
  anyValue: 'Any',
  yes: 'Yes',
  no: 'No',
  maxRows: 'One export may have at most {n} rows; a larger one stops with an error, so narrow the dates or filters for big data.',
  timeZone: 'Time zone',
  tzHint: 'Dates and times in the file are written in this time zone.',
  nameAllDates: '{title}, all dates',
  incompleteDate: 'This date is incomplete. Enter day, month and year, or clear the field.',
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
  resumed: '“{name}” is queued again and continues where it stopped.',
  restarted: '“{name}” is queued again and starts over from the beginning.',
  restartTitle: 'Start “{name}” over?',
  restartText: 'The parts already exported are discarded and the whole export runs again from the beginning, which takes longer. To continue where it stopped, use Retry instead.',
  restartKeep: 'Go back',
  confirmTitle: 'Cancel “{name}”?',
  confirmText: 'It has written {done} of {total} rows. Cancelling stops it and discards what it has written; this cannot be undone.',
  confirmTextSoFar: 'It has written {done} rows so far. Cancelling stops it and discards what it has written; this cannot be undone.',
  confirmKeep: 'Keep running',
  confirmYes: 'Cancel export',
  refreshingLink: 'The download link had expired; fetching a new one…',
  announceDone: '{name}: completed, ready to download.',
  announceFailed: '{name}: failed.',
  announceCancelled: '{name}: cancelled.',
  announceRunning: '{name}: running.',
  announceProgress: '{name}: {pct} done.',
  tryAgainAt: 'You can try again after {time}.',
  dismiss: 'Dismiss',
  detail: 'Server said: {message}',
  'err.PAGE': 'The page sent a request the export center could not read. Reload the page and try again.',
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
  'err.EVENT_NOT_FOUND': 'This command does not exist any more.',
  'err.INVALID_DATE_RANGE': 'The start date is after the end date.',
  'err.INVALID_DATE': 'Enter a full, valid date: day, month and year.',
  'err.INVALID_TIME_ZONE': 'Choose a time zone from the list.',
  'err.INVALID_VALUE': 'This value is not allowed here.',
  'err.MISSING_FIELD': 'Fill this in.',
  'err.MISSING_FIELD.exportType': 'Choose an export type.',
  'err.MISSING_FIELD.format': 'Choose Excel or CSV.',
  'err.MISSING_FIELD.reason': 'Write why you do this (at least 3 characters).',
  'err.TOO_LONG': 'This is too long.',
  'err.TOO_LONG.taskName': 'The task name may have at most 100 characters.',
  'err.INVALID_VALUE.taskName': 'The task name cannot contain control characters (such as line breaks or tabs).',
  'err.TOO_LONG.reason': 'The reason may have at most 500 characters.',
  'err.TOO_SHORT': 'This is too short.',
  'err.TOO_SHORT.exportType': 'Choose an export type.',
  'err.TOO_SHORT.reason': 'Write why you do this (at least 3 characters).',
  'err.PARAMETER_TOO_LONG': 'This value is too long: at most 256 characters.',
  'err.TOO_MANY_PARAMETERS': 'There are too many filters. Reload the page and try again.',
  'err.PARAMETERS_TOO_LARGE': 'The filters are too long taken together. Shorten them.',
  'err.INVALID_FORMAT': 'Choose Excel or CSV.',
  'err.PROVIDER_UNAVAILABLE': 'The data source does not answer right now. Try again in a minute.',
  'err.PROVIDER_CONTRACT': 'The data source sent an answer the export center cannot read. Tell an administrator.',
  'err.PROVIDER_REJECTED': 'The data source refused the request. Check the filters, or tell an administrator.',
  'err.UNKNOWN_EXPORT_TYPE': 'This export type does not exist (any more). Reload the page.',
  'err.UNKNOWN_PARAMETER': 'The page is out of date. Reload it and try again.',
  'err.UNKNOWN_PARAMETER.parameters': 'This filter does not exist (any more) for this export type. Reload the page.',
  'err.LINK_EXPIRED': 'The download link has expired. Refresh the list for a new one.',
  'err.LINK_INVALID': 'The download link is not valid. Refresh the list for a new one.',
  'err.LINK_NOT_YOURS': 'This download link belongs to another user. Download the file from your own list.',
  'err.FILE_EXPIRED': 'The file has expired and was deleted. Export it again.',
  'err.FILE_GONE': 'The file is no longer stored. Export it again.',
  'err.STORAGE_UNAVAILABLE': 'The file storage is not answering right now. Try the download again in a moment.',
  'err.RANGE_NOT_SATISFIABLE': 'The download could not resume. Download the whole file again.',
  'err.NOT_READY': 'The file is not ready yet.',
  'err.NO_FILE': 'This export has no file.',
  'err.BODY_TOO_LARGE': 'The request is too large. Shorten the task name or the filters.',
  'err.NOT_FOUND': 'Not available here.',
  'err.NOT_LOOPBACK': 'The development sign-in works only on the machine that runs the export center.',
  'err.REGISTRY_INVALID': 'The export-type file is not valid, so the export types in use stay as they were.',
  'err.TOKEN_CLAIM_TOO_LONG': 'This token names a user, tenant or application longer than the export center can keep. Ask for a token with shorter ids.',
  'err.TOKEN_WRONG_AUDIENCE': 'This token was issued for another service, not for this export center.',
  'err.UNTRUSTED_HOST': 'The export center does not answer under this address. Open it under its own address.',
  'err.HOST_REQUIRED': 'The request did not name the export center’s address. Reload the page and try again.',
  'err.CROSS_SITE_REQUEST': 'The export center refused a request that did not come from its own page. Reload the download center and try again.',
  'err.SAME_ORIGIN_REQUIRED': 'The development sign-in accepts only the download center’s own page. Reload the page and sign in again.',
  'err.DATABASE_UNAVAILABLE': 'The export center’s database is not answering right now. Try again in a few seconds.',
  'err.SERVER_BUSY': 'The export center is busy right now. Try again in a moment.',
  'err.INTERNAL_ERROR': 'The export center had a problem with this request. Try again; if it happens again, tell an administrator.',
  'err.4xx': 'The export center refused the request.',
  'err.5xx': 'The export center had a problem. Try again in a moment.',
  // Why an attempt failed, as a clause ("Attempt 1 of 3 failed: {cause}.").
  'cause.PROVIDER_UNAVAILABLE': 'the data source did not answer',
  'cause.PROVIDER_TOO_SLOW': 'the data source answered too slowly',
  'cause.STORAGE_ERROR': 'the file could not be saved',
  'cause.DEADLINE_PASSED': 'the attempt ran out of time',
  'cause.WORKER_LOST': 'the server running it stopped',
  'cause.INTERNAL_ERROR': 'an internal error occurred',
  'cause.default': 'an error occurred',
  // Why an export failed for good, as the sentences a person reads on the row.
  'fail.PROVIDER_UNAVAILABLE': 'The data source did not answer, on every attempt. Try again later.',
  'fail.PROVIDER_TOO_SLOW': 'The data source answered too slowly, on every attempt. Try again later, or narrow the date range.',
  'fail.PROVIDER_REJECTED': 'The data source refused the request. Try again later; if it fails again, tell an administrator.',
  'fail.SNAPSHOT_EXPIRED': 'The export took longer than the data source keeps its snapshot. Try again, or narrow the date range.',
  'fail.PROVIDER_REDIRECTED': 'The data source is set up wrongly (it answered with a redirect). Tell an administrator.',
  'fail.PROVIDER_CONTRACT': 'The data source sent data in an unexpected shape. Tell an administrator.',
  'fail.SCHEMA_CHANGED': 'The columns of the data changed during the export. Try again.',
  'fail.ROW_LIMIT_EXCEEDED': 'There are more than {max} rows, the most one export of this type may have. Narrow the date range or the filters and export again.',
  'fail.ROW_LIMIT_EXCEEDED.any': 'There are more rows than one export of this type may have. Narrow the date range or the filters and export again.',
  'fail.FILE_TOO_LARGE': 'The file grew past the size limit. Narrow the date range or the filters and export again.',
  'fail.STORAGE_ERROR': 'The file could not be saved, on every attempt. Try again later.',
  'fail.DEADLINE_PASSED': 'The export ran out of time. Try again, or narrow the date range.',
  'fail.WORKER_LOST': 'The server running the export stopped. Try again.',
  'fail.COMMAND_CORRUPTED': 'The export’s task message was damaged on its way to a worker. Try again.',
  'fail.INTERNAL_ERROR': 'An internal error stopped the export. Try again; if it fails again, tell an administrator.',
  'fail.INVALID_VALUE': 'The data source sent a value the file cannot hold. Tell an administrator.',
  'fail.UNKNOWN_EXPORT_TYPE': 'This export type no longer exists.',
  'fail.UNKNOWN_FORMAT': 'This file format is not supported.',
  'fail.default': 'The export failed. Try again; if it fails again, tell an administrator.',
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
  offline: '无法连接导出中心，页面每隔几秒会自动重试。服务器上的导出任务不受影响。',
  createOffline: '无法连接导出中心，导出任务未创建。请检查网络后再点一次“创建导出”。',
  'offline.database': '导出中心的数据库暂时无响应，页面每隔几秒会自动重试。正在进行的导出会等待并自动继续。',
  'offline.busy': '导出中心当前繁忙，暂时无法响应，页面每隔几秒会自动重试。',
  'offline.storage': '导出中心的文件存储暂时无响应，页面每隔几秒会自动重试。',
  'createOffline.database': '导出中心的数据库暂时无响应，导出任务未创建。请稍等几秒，再点一次“创建导出”。',
  'createOffline.busy': '导出中心当前繁忙，导出任务未创建。请稍后再点一次“创建导出”。',
  'createOffline.storage': '导出中心的文件存储暂时无响应，导出任务未创建。请稍等几秒，再点一次“创建导出”。',
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
  viewsLabel: '视图',
  viewExports: '导出任务',
  viewOps: '运维',
  newExport: '新建导出',
  noTypesApp: '{app}账号暂时没有可用的导出类型，因此无法在这里新建导出。',
  noTypesPerm: '你的账号没有新建导出的权限，请联系管理员开通。',
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
  waitingRetry: '等待重试',
  attemptOf: '第 {n} 次执行（共 {max} 次）',
  requested: '提交',
  started: '开始',
  startedAttempt: '第 {n} 次开始',
  finished: '结束',
  rowsOf: '{done} / {total} 条',
  rowsDone: '共 {done} 条',
  rowsSoFar: '已处理 {done} 条',
  stoppedAt: '停止时已处理 {done} / {total} 条',
  stoppedAfter: '停止时已处理 {done} 条',
  shardsOf: '已完成 {done} / {total} 个分片',
  rate: '{rate} 条/秒',
  eta: '预计剩余 {eta}',
  waiting: '排队等待执行',
  fileDeleted: '文件已过期删除',
  availableUntil: '可下载至 {date}',
  noFile: '—',
  download: '下载',
  cancel: '取消',
  retry: '重试',
  again: '再次导出',
  restart: '从头开始',
  downloadLabel: '下载「{name}」',
  cancelLabel: '取消「{name}」',
  retryLabel: '重试「{name}」',
  againLabel: '再次导出「{name}」',
  retryResume: '重试（从中断处继续）',
  retryResumeLabel: '重试「{name}」（从中断处继续）',
  restartLabel: '从头重新导出「{name}」',
  restartHint: '丢弃已导出的分片，整个导出从头重新执行',
  details: '详细信息',
  retryingNote: '第 {n} 次执行（共 {max} 次）失败：{cause}。将于 {time} 自动重试。',
  retryingNowNote: '第 {n} 次执行（共 {max} 次）失败：{cause}。正在自动重试。',
  rangeFrom: '{d} 起',
  rangeTo: '截至 {d}',
  allData: '全部数据',
  progressOf: '「{name}」的进度',
  noFileLabel: '暂无文件',
  requiredMark: '（必填）',
  stopping: '正在停止…',
  warning: '已完成，但部分数据做了调整：',
  zeroRows: '没有符合筛选条件的数据，文件中只有表头。',
  expiredNote: '文件已过期删除。如需下载，请再次导出。',
  emptyTitle: '还没有导出任务',
  emptyText: '新建一个导出任务，它会在后台运行，完成后即可在这里下载文件。',
  emptyNoTypes: '账号开通导出权限后，导出任务会显示在这里。',
  emptyFilteredTitle: '没有符合筛选条件的导出任务',
  emptyFilteredText: '换个状态或类型试试。',
  emptyFilteredTextOwner: '换个状态、类型或创建人试试。',
  noOwnerMatch: '创建人需与用户名完全一致，区分大小写。',
  didYouMean: '你要找的是不是：',
  taskName: '任务名称',
  format: '文件格式',
  'format.xlsx': 'Excel（.xlsx）',
  'format.csv': 'CSV（.csv）',
  filtersLegend: '导出范围',
  rangeHint: '起止日期均包含在内；不填表示不限日期。',
  anyValue: '不限',
  yes: '是',
  no: '否',
  maxRows: '单次导出最多 {n} 条，超出会导致导出失败。数据量大时请缩小日期范围或筛选条件。',
  timeZone: '时区',
  tzHint: '文件中的日期和时间按此时区写入。',
  nameAllDates: '{title}（全部日期）',
  incompleteDate: '日期不完整，请填写完整的年、月、日，或清空此项。',
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
  resumed: '「{name}」已重新排队，将从中断处继续导出。',
  restarted: '「{name}」已重新排队，将从头开始导出。',
  restartTitle: '从头重新导出「{name}」？',
  restartText: '已导出的分片将被丢弃，整个导出从头重新执行，耗时会更长。如果只想从中断处继续，请改用“重试”。',
  restartKeep: '返回',
  confirmTitle: '取消「{name}」？',
  confirmText: '已处理 {done} / {total} 条。取消后导出会立即停止，已生成的内容不会保留，且无法恢复。',
  confirmTextSoFar: '已处理 {done} 条。取消后导出会立即停止，已生成的内容不会保留，且无法恢复。',
  confirmKeep: '继续导出',
  confirmYes: '取消导出',
  refreshingLink: '下载链接已过期，正在获取新链接…',
  announceDone: '「{name}」已完成，可以下载了。',
  announceFailed: '「{name}」导出失败。',
  announceCancelled: '「{name}」已取消。',
  announceRunning: '「{name}」开始导出。',
  announceProgress: '「{name}」已完成 {pct}。',
  tryAgainAt: '请在 {time} 之后再试。',
  dismiss: '关闭',
  detail: '服务器返回：{message}',
  'err.PAGE': '页面发出的请求无法被导出中心识别，请刷新页面后重试。',
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
  'err.EVENT_NOT_FOUND': '该指令已不存在。',
  'err.INVALID_DATE_RANGE': '开始日期不能晚于结束日期。',
  'err.INVALID_DATE': '请输入完整有效的日期（年、月、日）。',
  'err.INVALID_TIME_ZONE': '请从列表中选择时区。',
  'err.INVALID_VALUE': '该值不可用。',
  'err.MISSING_FIELD': '此项为必填项。',
  'err.MISSING_FIELD.exportType': '请选择导出类型。',
  'err.MISSING_FIELD.format': '请选择 Excel 或 CSV 格式。',
  'err.MISSING_FIELD.reason': '请填写操作原因（至少 3 个字）。',
  'err.TOO_LONG': '内容过长。',
  'err.TOO_LONG.taskName': '任务名称最多 100 个字符。',
  'err.INVALID_VALUE.taskName': '任务名称不能包含换行、制表符等控制字符。',
  'err.TOO_LONG.reason': '原因最多 500 个字符。',
  'err.TOO_SHORT': '内容过短。',
  'err.TOO_SHORT.exportType': '请选择导出类型。',
  'err.TOO_SHORT.reason': '请填写操作原因（至少 3 个字）。',
  'err.PARAMETER_TOO_LONG': '内容过长，最多 256 个字符。',
  'err.TOO_MANY_PARAMETERS': '筛选条件过多，请刷新页面后重试。',
  'err.PARAMETERS_TOO_LARGE': '筛选条件总长度过长，请精简。',
  'err.INVALID_FORMAT': '请选择 Excel 或 CSV 格式。',
  'err.PROVIDER_UNAVAILABLE': '数据源暂时没有响应，请一分钟后再试。',
  'err.PROVIDER_CONTRACT': '数据源返回的内容无法识别，请联系管理员。',
  'err.PROVIDER_REJECTED': '数据源拒绝了本次请求，请检查筛选条件，或联系管理员。',
  'err.UNKNOWN_EXPORT_TYPE': '该导出类型已不存在，请刷新页面。',
  'err.UNKNOWN_PARAMETER': '页面版本已过期，请刷新后重试。',
  'err.UNKNOWN_PARAMETER.parameters': '该导出类型已不支持此筛选条件，请刷新页面。',
  'err.LINK_EXPIRED': '下载链接已过期，请刷新列表获取新链接。',
  'err.LINK_INVALID': '下载链接无效，请刷新列表获取新链接。',
  'err.LINK_NOT_YOURS': '该下载链接属于其他用户，请从你自己的列表中下载。',
  'err.FILE_EXPIRED': '文件已过期删除，请再次导出。',
  'err.FILE_GONE': '文件已不存在，请再次导出。',
  'err.STORAGE_UNAVAILABLE': '文件存储暂时无法访问，请稍后再下载。',
  'err.RANGE_NOT_SATISFIABLE': '断点续传失败，请重新下载完整文件。',
  'err.NOT_READY': '文件尚未生成。',
  'err.NO_FILE': '该导出没有生成文件。',
  'err.BODY_TOO_LARGE': '请求内容过大，请缩短任务名称或筛选条件。',
  'err.NOT_FOUND': '此处不提供该功能。',
  'err.NOT_LOOPBACK': '开发环境登录仅限在运行导出中心的本机上使用。',
  'err.REGISTRY_INVALID': '导出类型配置文件有误，继续沿用原有的导出类型。',
  'err.TOKEN_CLAIM_TOO_LONG': '该令牌中的用户、租户或应用标识过长，超出了导出中心的保存上限，请申请标识较短的令牌。',
  'err.TOKEN_WRONG_AUDIENCE': '该令牌是签发给其他服务的，不能用于本导出中心。',
  'err.UNTRUSTED_HOST': '导出中心不接受通过此地址的访问，请使用导出中心的正式地址打开。',
  'err.HOST_REQUIRED': '请求中缺少导出中心的地址，请刷新页面后重试。',
  'err.CROSS_SITE_REQUEST': '该请求并非来自导出中心自身的页面，已被拒绝。请刷新下载中心后重试。',
  'err.SAME_ORIGIN_REQUIRED': '开发环境登录只接受下载中心自身页面发出的请求，请刷新页面后重新登录。',
  'err.DATABASE_UNAVAILABLE': '导出中心的数据库暂时无法响应，请几秒后再试。',
  'err.SERVER_BUSY': '导出中心当前繁忙，请稍后再试。',
  'err.INTERNAL_ERROR': '导出中心处理该请求时出错，请重试；如果问题反复出现，请联系管理员。',
  'err.4xx': '导出中心拒绝了该请求。',
  'err.5xx': '导出中心出现问题，请稍后再试。',
  'cause.PROVIDER_UNAVAILABLE': '数据源暂时无法响应',
  'cause.PROVIDER_TOO_SLOW': '数据源响应超时',
  'cause.STORAGE_ERROR': '文件保存失败',
  'cause.DEADLINE_PASSED': '本次执行超时',
  'cause.WORKER_LOST': '执行任务的服务器中断了',
  'cause.INTERNAL_ERROR': '系统内部出错',
  'cause.default': '执行出错',
  'fail.PROVIDER_UNAVAILABLE': '数据源多次未响应，请稍后重试。',
  'fail.PROVIDER_TOO_SLOW': '数据源多次响应过慢。请稍后重试，或缩小日期范围。',
  'fail.PROVIDER_REJECTED': '数据源拒绝了该请求。请稍后重试；如仍失败，请联系管理员。',
  'fail.SNAPSHOT_EXPIRED': '导出耗时超过了数据源快照的有效期。请重试，或缩小日期范围。',
  'fail.PROVIDER_REDIRECTED': '数据源配置有误（返回了重定向），请联系管理员。',
  'fail.PROVIDER_CONTRACT': '数据源返回的数据格式不符合约定，请联系管理员。',
  'fail.SCHEMA_CHANGED': '导出过程中数据列发生了变化，请重试。',
  'fail.ROW_LIMIT_EXCEEDED': '数据超过 {max} 条，超出了该类型单次导出的上限。请缩小日期范围或筛选条件后再次导出。',
  'fail.ROW_LIMIT_EXCEEDED.any': '数据量超出了该类型单次导出的上限。请缩小日期范围或筛选条件后再次导出。',
  'fail.FILE_TOO_LARGE': '文件超过了大小上限。请缩小日期范围或筛选条件后再次导出。',
  'fail.STORAGE_ERROR': '文件多次保存失败，请稍后重试。',
  'fail.DEADLINE_PASSED': '导出超出了允许的执行时间。请重试，或缩小日期范围。',
  'fail.WORKER_LOST': '执行导出的服务器中断了，请重试。',
  'fail.COMMAND_CORRUPTED': '导出任务消息在传递过程中损坏，请重试。',
  'fail.INTERNAL_ERROR': '导出因系统内部错误中断。请重试；如仍失败，请联系管理员。',
  'fail.INVALID_VALUE': '数据源返回了无法写入文件的值，请联系管理员。',
  'fail.UNKNOWN_EXPORT_TYPE': '该导出类型已不存在。',
  'fail.UNKNOWN_FORMAT': '不支持该文件格式。',
  'fail.default': '导出失败。请重试；如仍失败，请联系管理员。',
};

// ---- What tells a user that an export ended (toast, tab title, browser notification),
// who cancelled it, a retry that failed again, and how long a copied link works.
const FIRST_HOUR_EN = {
  doneToast: '“{name}” is ready',
  failedToast: '“{name}” failed. {why}',
  failedAgainToast: '“{name}” failed again. {why}',
  failedTitle: '“{name}” failed',
  failedAgainTitle: '“{name}” failed again',
  raceToast: '“{name}” finished before the cancel arrived; the file is ready.',
  cancelledToast: '“{name}”: {who}',
  titleReady: 'Export ready',
  titleReadyMany: 'Exports ready',
  titleFailed: 'Export failed',
  titleFailedMany: 'Exports failed',
  titleFinished: 'Exports finished',
  notifyReadyBody: 'Open the download center to download it.',
  notifyMe: 'Notify me when ready',
  notifyMeHint: 'Show a browser notification when one of your exports ends while you are on another tab.',
  notifyBlocked: 'Notifications are blocked for this site in the browser’s settings.',
  notifyEnabled: 'You will get a browser notification when one of your exports ends.',
  notifyDenied: 'The browser did not allow notifications, so none will be shown.',
  copyLink: 'Copy link',
  copyLinkLabel: 'Copy a download link of {name}',
  copyLinkHint: 'The copied link works until {time}',
  linkCopied: 'Link copied. Anyone who has it can download the file until {time}; after that, download it from this page.',
  linkNotCopied: 'The browser did not let the page copy the link. Copy it from here:',
  cancelledByYou: 'You cancelled this export.',
  cancelledByOwner: 'Cancelled by its owner, {user}.',
  cancelledByAdmin: 'Cancelled by an administrator ({user}).',
  cancelledByOperator: 'Cancelled by an operator.',
  cancelledNote: 'This export was cancelled.',
  raceNote: 'It finished before the cancel arrived, so the file is ready.',
  failedAgain: 'Retried at {time}, failed again: {why}',
  retryUnlikely: 'A retry will probably fail the same way until the data source is fixed.',
};

const FIRST_HOUR_ZH = {
  doneToast: '「{name}」已完成',
  failedToast: '「{name}」导出失败。{why}',
  failedAgainToast: '「{name}」再次失败。{why}',
  failedTitle: '「{name}」导出失败',
  failedAgainTitle: '「{name}」再次失败',
  raceToast: '「{name}」在取消请求送达前已完成，文件可以下载。',
  cancelledToast: '「{name}」：{who}',
  titleReady: '导出完成',
  titleReadyMany: '导出完成',
  titleFailed: '导出失败',
  titleFailedMany: '导出失败',
  titleFinished: '导出已结束',
  notifyReadyBody: '打开下载中心即可下载。',
  notifyMe: '完成时通知我',
  notifyMeHint: '你在其他标签页时，导出一结束就弹出浏览器通知。',
  notifyBlocked: '浏览器设置中已禁止本网站发送通知。',
  notifyEnabled: '导出结束时，浏览器会通知你。',
  notifyDenied: '浏览器未允许通知，因此不会弹出通知。',
  copyLink: '复制链接',
  copyLinkLabel: '复制「{name}」的下载链接',
  copyLinkHint: '复制的链接在 {time} 前有效',
  linkCopied: '链接已复制。{time} 之前，任何拿到链接的人都能下载该文件；之后请回到本页下载。',
  linkNotCopied: '浏览器不允许页面复制链接，请在这里手动复制：',
  cancelledByYou: '你已取消此导出。',
  cancelledByOwner: '已由创建人 {user} 取消。',
  cancelledByAdmin: '已被管理员 {user} 取消。',
  cancelledByOperator: '已被运维人员取消。',
  cancelledNote: '此导出已被取消。',
  raceNote: '取消请求送达前导出已完成，文件可以下载。',
  failedAgain: '已于 {time} 重试，仍然失败：{why}',
  retryUnlikely: '在数据源修复之前，重试很可能仍会以同样的方式失败。',
};

Object.assign(EN, FIRST_HOUR_EN);
Object.assign(ZH, FIRST_HOUR_ZH);

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

/** What people read for an enum value of parameter `p` (the registry's value titles). */
export function valueTitle(p, value) {
  const titles = locale === 'zh-CN' ? p?.valueTitlesZh : p?.valueTitles;
  return titles?.[value] ?? String(value);
}

/** Add texts (a view loaded later brings its own). */
export function extend(en, zh) {
  Object.assign(EN, en);
  Object.assign(ZH, zh);
}

/** The keys of `keys` that lack a text in English or in Chinese (for the tests). */
export function lacking(keys) {
  return keys.filter((key) => !(key in EN) || !(key in ZH));
}

// Codes only a stale page or a bug can cause: one sentence says to reload.
const PAGE_CODES = new Set(['REPEATED_PARAMETER', 'MALFORMED_JSON', 'BODY_REQUIRED', 'INVALID_BODY',
  'DUPLICATE_KEY', 'REPEATED_HEADER', 'UNSUPPORTED_MEDIA_TYPE', 'UNKNOWN_FIELD', 'INVALID_TYPE',
  'IDEMPOTENCY_KEY_MISMATCH', 'INVALID_IDEMPOTENCY_KEY', 'PARAMETERS_TOO_DEEP', 'INVALID_STATE',
  'INVALID_CURSOR', 'METHOD_NOT_ALLOWED', 'HTTP_ERROR']);

/** The text key of an API error `code` at `field` (most specific first), or null. */
export function errorKey(code, field) {
  if (!code) return null;
  if (PAGE_CODES.has(code)) return 'err.PAGE';
  const group = field && field.startsWith('parameters.') ? 'parameters' : field;
  for (const key of [`err.${code}.${field}`, `err.${code}.${group}`, `err.${code}`]) {
    if (key in EN) return key;
  }
  return null;
}

/** Fill every element with a `data-t` attribute. */
export function translatePage(root = document) {
  document.documentElement.lang = locale;
  for (const el of root.querySelectorAll('[data-t]')) el.textContent = t(el.dataset.t);
  for (const el of root.querySelectorAll('[data-t-label]')) el.setAttribute('aria-label', t(el.dataset.tLabel));
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

const DAY = { year: 'numeric', month: 'numeric', day: 'numeric' }; // 4-digit years

/** A date-time in the browser's time zone (`iso` is UTC ISO 8601). */
export function dateTime(iso) {
  if (!iso) return '';
  const options = { ...DAY, hour: 'numeric', minute: '2-digit', second: '2-digit' };
  return cached('dt', options, () => new Intl.DateTimeFormat(locale, options)).format(new Date(iso));
}

/** A date-time without seconds (far-away moments: when a file expires). */
export function dateTimeShort(iso) {
  if (!iso) return '';
  const options = { ...DAY, hour: 'numeric', minute: '2-digit' };
  return cached('ds', options, () => new Intl.DateTimeFormat(locale, options)).format(new Date(iso));
}

export function date(value) {
  const options = { dateStyle: 'medium' };
  return cached('d', options, () => new Intl.DateTimeFormat(locale, options)).format(value);
}

/** Hours and minutes ("17:50", "5:50 PM"): a moment of today. */
export function clock(date) {
  const options = { hour: 'numeric', minute: '2-digit' };
  return cached('c', options, () => new Intl.DateTimeFormat(locale, options)).format(date);
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
  // Bytes in full ("135 bytes", "135字节"): the short form of the unit is "byte" in English.
  return number(value, { style: 'unit', unit: units[i], unitDisplay: i ? 'short' : 'long', maximumFractionDigits: i ? 1 : 0 });
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
