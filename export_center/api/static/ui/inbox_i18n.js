// Texts of the notifications bell, its panel and the task dialog, in English and
// Chinese. Added to i18n.js's tables when this module loads (i18n.extend).

import { extend } from './i18n.js';

const EN = {
  inbox: 'Notifications',
  inboxUnread: 'Notifications: {n} unread',
  inboxTitle: 'Notifications',
  inboxReadAll: 'Mark all as read',
  inboxEmpty: 'No notifications yet. When an export you asked for ends, it shows up here.',
  inboxNew: '(new)',
  'event.export.succeeded': 'An export is ready to download.',
  'event.export.failed': 'An export failed.',
  'event.export.cancelled': 'An export was cancelled.',
  'event.export.expiring': 'A file will be deleted soon: download it before then.',
  'event.schedule.paused': 'A schedule was paused.',
  taskCard: 'Export',
  taskCardRows: 'Rows',
  taskCardFinished: 'Finished',
  taskCardUntil: 'Download until',
  taskCardError: 'Why it failed',
  taskCardSchedule: 'Made by schedule',
  taskCardGone: 'This export no longer exists, or you may not see it.',
  taskCardUnavailable: 'The export could not be loaded. Try again in a moment.',
};

const ZH = {
  inbox: '通知',
  inboxUnread: '通知：{n} 条未读',
  inboxTitle: '通知',
  inboxReadAll: '全部标为已读',
  inboxEmpty: '暂无通知。你发起的导出结束后，会在这里提醒你。',
  inboxNew: '（新）',
  'event.export.succeeded': '有一个导出已完成，可以下载了。',
  'event.export.failed': '有一个导出失败了。',
  'event.export.cancelled': '有一个导出已取消。',
  'event.export.expiring': '有一个文件即将被删除，请尽快下载。',
  'event.schedule.paused': '有一个定时导出已暂停。',
  taskCard: '导出任务',
  taskCardRows: '行数',
  taskCardFinished: '完成时间',
  taskCardUntil: '可下载至',
  taskCardError: '失败原因',
  taskCardSchedule: '来自定时导出',
  taskCardGone: '该导出任务已不存在，或你没有查看权限。',
  taskCardUnavailable: '暂时无法加载该导出任务，请稍后再试。',
};

extend(EN, ZH);
