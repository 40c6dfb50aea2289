"""Download file names every client can save, and their ``Content-Disposition`` header.

A file is named after its task (``taskName``), which users type freely: CJK text, emoji,
slashes, dots, names that operating systems reserve. :func:`download_file_name` makes a
name that saves unchanged on Windows, macOS and Linux and through browsers, curl and
wget:

* Unicode NFC (macOS would otherwise store another byte sequence for the same name);
* characters that change meaning are replaced with ``_``: path separators ``/ \\``,
  the characters Windows forbids ``< > : " | ? *``, C0/C1 controls; invisible format
  characters (``Cf``: bidi overrides such as U+202E that can disguise ``.exe``,
  zero-width spaces, the BOM; ZWJ, ZWNJ and emoji tag characters stay, they are part of
  words and emoji), private-use, unassigned and surrogate code points and line or
  paragraph separators are removed; runs of whitespace become one space;
* ``%`` becomes the full-width ``％`` (U+FF05): GNU wget decodes ``filename*`` twice,
  so ``100% %41`` would be saved as ``100% A``;
* no leading or trailing spaces or dots (Windows drops trailing ones; a leading dot
  hides the file on Unix; ``..`` is never a name);
* Windows device names (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM1``-``COM9``,
  ``LPT1``-``LPT9``, also with superscript digits and with any extension) get a ``_``
  prefix;
* at most :data:`MAX_NAME_BYTES` (150) bytes of UTF-8 in all, the extension kept and the
  cut made between grapheme clusters, never inside a character, a combining sequence
  or an emoji sequence (below every filesystem's 255 and what wget and Excel accept);
* an empty result is ``export``.

:func:`content_disposition` follows RFC 6266 with RFC 8187 (``filename*``) for the real
name and an ASCII ``filename`` for clients that read only that one (curl's ``-J``): the
ASCII characters of the name, with every run of other characters as ``_``, quotes,
backslashes, ``%`` and ``;`` replaced (RFC 6266 appendix D), or ``export.<ext>`` when
nothing readable is left.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

import regex

__all__ = ["MAX_NAME_BYTES", "content_disposition", "download_file_name"]

MAX_NAME_BYTES = 150
"""Longest file name in UTF-8 bytes, extension included.

Filesystems allow 255 bytes (ext4, APFS) or 255 UTF-16 units (NTFS), but clients save
less: GNU wget 1.21 keeps at most 236 bytes of an ASCII name and about 157 bytes of a
CJK one (measured: 51 CJK characters plus ``.csv`` save whole, 52 are cut inside a
character), and Excel does not open a file whose full path passes 218 characters.
150 bytes (50 CJK characters, 150 ASCII) saves whole everywhere and still names the
export."""

_REPLACED = re.compile(r'[/\\<>:"|?*\x00-\x1f\x7f-\x9f]')
_REMOVED_CATEGORIES = frozenset({"Cf", "Co", "Cn", "Cs", "Zl", "Zp"})
_KEPT_FORMAT = frozenset("\u200c\u200d") | frozenset(map(chr, range(0xE0020, 0xE0080)))
"""Format characters that are part of text: ZWNJ and ZWJ (Persian and Indic words, emoji
sequences such as the family emoji) and the tag characters of subdivision flags."""
_SPACES = re.compile(r"\s+")
_DEVICE = re.compile(r"^(?:CON|PRN|AUX|NUL|COM[0-9¹²³]|LPT[0-9¹²³])(?:\..*)?$", re.IGNORECASE)
_GRAPHEMES = regex.compile(r"\X")
_FALLBACK_UNSAFE = re.compile(r'["\\%;]')
_NON_ASCII_RUN = re.compile(r"[^\x20-\x7e]+")


def _clean(text: str) -> str:
    text = unicodedata.normalize("NFC", text)
    text = _REPLACED.sub("_", text)
    # wget decodes a percent-encoded filename* twice: "100%25%2541" became "100% A".
    text = text.replace("%", "\uff05")
    text = "".join(
        c for c in text if c in _KEPT_FORMAT or unicodedata.category(c) not in _REMOVED_CATEGORIES
    )
    return _SPACES.sub(" ", text).strip(" .")


def _cut(text: str, max_bytes: int) -> str:
    """The longest prefix of whole grapheme clusters that fits in ``max_bytes`` of UTF-8."""
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    out: list[str] = []
    used = 0
    for cluster in _GRAPHEMES.findall(text):
        size = len(cluster.encode("utf-8"))
        if used + size > max_bytes:
            break
        out.append(cluster)
        used += size
    return "".join(out)


def download_file_name(task_name: str, extension: str) -> str:
    """The file name of an export: the cleaned task name plus ``.extension``.

    Args:
        task_name: the task's name as the user typed it (any Unicode text).
        extension: ``csv`` or ``xlsx`` (ASCII, without the dot).

    Returns:
        A name of at most ``MAX_NAME_BYTES`` (150) UTF-8 bytes ending in ``.extension``
        (rules in the module docstring); for example ``"九月订单 / 华东.xlsx"`` ->
        ``"九月订单 _ 华东.xlsx"``.
    """
    suffix = f".{extension}"
    base = _clean(task_name)
    base = _cut(base, MAX_NAME_BYTES - len(suffix.encode("utf-8"))).rstrip(" .")
    if not base:
        base = "export"
    if _DEVICE.match(base):
        base = "_" + base
        base = _cut(base, MAX_NAME_BYTES - len(suffix.encode("utf-8"))).rstrip(" .")
    return base + suffix


def _ascii_fallback(file_name: str) -> str:
    stem, dot, extension = file_name.rpartition(".")
    if not dot:
        stem, extension = file_name, ""
    ascii_stem = _FALLBACK_UNSAFE.sub("_", _NON_ASCII_RUN.sub("_", stem)).strip(" .")
    if not any(c.isalnum() for c in ascii_stem):
        ascii_stem = "export"
    return f"{ascii_stem}.{extension}" if extension else ascii_stem


def content_disposition(file_name: str) -> str:
    """The ``Content-Disposition`` value of a download (RFC 6266 and RFC 8187).

    Args:
        file_name: a name made by :func:`download_file_name`.

    Returns:
        ``attachment; filename="<ascii>"; filename*=UTF-8''<percent-encoded name>``.
    """
    return (
        f'attachment; filename="{_ascii_fallback(file_name)}"; '
        f"filename*=UTF-8''{quote(file_name, safe='')}"
    )
