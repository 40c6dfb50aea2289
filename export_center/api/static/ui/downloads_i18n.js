// Texts of a task's downloads view (who downloaded it, revoke links), in English and
// Chinese. Added to i18n.js's tables when this module loads (i18n.extend).

import { extend } from './i18n.js';

const EN = {
  downloadsTitle: 'Downloads of “{name}”',
  downloadsIntro: 'Every download of this export: each time someone asked for the file, opened a link, or was sent on to the storage.',
  downloadsLoading: 'Loading the downloads…',
  downloadsNone: 'Nobody has downloaded this export yet.',
  'dcol.at': 'When',
  'dcol.user': 'Who',
  'dcol.type': 'How',
  'dcol.address': 'From address',
  'dcol.link': 'Link',
  'dcol.status': 'Answer',
  'dcol.agent': 'Browser or program',
  'dcol.action': 'Action',
  'dtype.bearer': 'Signed in',
  'dtype.link': 'Download link',
  'dtype.presigned': 'Sent on to storage',
  'dstatus.ok': 'Served',
  'dstatus.part': 'Part of the file',
  'dstatus.redirect': 'Link handed out',
  'dstatus.refused': 'Refused ({code})',
  revokeLink: 'Revoke this link',
  revokeLinkLabel: 'Revoke link {link}',
  revokeAll: 'Revoke all links',
  revokedLink: 'Link {link} is revoked: it no longer downloads the file.',
  revokedAll: 'Every link of “{name}” handed out so far is revoked. The page gives you a fresh one.',
  revokeNote: 'A revoked link stops working at once. A transfer the storage has already started (within the last 5 minutes) may still finish.',
};

const ZH = {
  downloadsTitle: '「{name}」的下载记录',
  downloadsIntro: '此导出的每一次下载：每次有人获取文件、打开下载链接或被转到存储服务下载，都会记在这里。',
  downloadsLoading: '正在加载下载记录…',
  downloadsNone: '还没有人下载过此导出。',
  'dcol.at': '时间',
  'dcol.user': '下载人',
  'dcol.type': '方式',
  'dcol.address': '来源地址',
  'dcol.link': '链接',
  'dcol.status': '结果',
  'dcol.agent': '浏览器或程序',
  'dcol.action': '操作',
  'dtype.bearer': '登录后下载',
  'dtype.link': '下载链接',
  'dtype.presigned': '转到存储服务',
  'dstatus.ok': '已下载',
  'dstatus.part': '下载了部分内容',
  'dstatus.redirect': '已发放链接',
  'dstatus.refused': '已拒绝（{code}）',
  revokeLink: '作废此链接',
  revokeLinkLabel: '作废链接 {link}',
  revokeAll: '作废全部链接',
  revokedLink: '链接 {link} 已作废，无法再下载文件。',
  revokedAll: '「{name}」此前发出的所有链接均已作废，页面会为你生成新链接。',
  revokeNote: '链接作废后立即失效；存储服务在最近 5 分钟内已开始的传输可能仍会完成。',
};

extend(EN, ZH);

/** The keys this module adds (for the tests: each has a text in both languages). */
export const KEYS = Object.keys(EN);
