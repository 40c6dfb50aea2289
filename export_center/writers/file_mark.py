"""What an XLSX file says of where it came from: its task, requester and creation time.

The attempt that writes a file marks it (:func:`marked`, a context variable, so every
writer of the attempt sees it without being told, the threads of a sharded export
included: they run in a copy of the attempt's context). An XLSX package written under a
mark carries, in its document properties:

* ``docProps/core.xml``: ``dc:identifier`` = the task id, ``dc:description`` = one line
  naming the task, the requester and the creation time (File > Info in Excel);
* ``docProps/custom.xml``: ``ExportCenterTaskId``, ``ExportCenterRequester``
  (``tenant/user``) and ``ExportCenterCreated`` (UTC), for programs;

and, when the type asks for it (``trace_footer: true`` in the registry), every sheet
prints a footer line with the same facts (``headerFooter``: shown in Page Layout view,
in print and in PDF). These are hints for people; ``export-center trace`` proves where a
file came from by its SHA-256 only, since properties can be edited.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from xml.sax.saxutils import escape

__all__ = [
    "CUSTOM_CONTENT_TYPE",
    "CUSTOM_REL_TYPE",
    "FileMark",
    "core_mark_xml",
    "current_mark",
    "custom_xml",
    "footer_xml",
    "mark_of",
    "marked",
]

CUSTOM_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.custom-properties+xml"
CUSTOM_REL_TYPE = (
    "http://schemas.openxmlformats.org/officeDocument/2006/relationships/custom-properties"
)
_FMTID = "{D5CDD505-2E9C-101B-9397-08002B2CF9AE}"  # the user-defined property set


@dataclass(frozen=True, slots=True)
class FileMark:
    """Where a file came from: task id, requester (``tenant/user``), when the task was
    created (aware UTC), and whether sheets print the footer line."""

    task_no: str
    requester: str
    created_at: _dt.datetime
    footer: bool = False

    @property
    def created_text(self) -> str:
        """The creation time as ``YYYY-MM-DDTHH:MM:SSZ``."""
        return self.created_at.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def line(self) -> str:
        """One line naming the task, the requester and the creation time."""
        return f"Export Center {self.task_no} · {self.requester} · {self.created_text}"


def mark_of(
    task_no: str, tenant: str, user: str, requested_at: _dt.datetime, footer: bool
) -> FileMark:
    """The mark of a task's files (``requested_at`` naive UTC, as the database has it)."""
    created = requested_at if requested_at.tzinfo else requested_at.replace(tzinfo=_dt.UTC)
    return FileMark(task_no, f"{tenant}/{user}", created, footer)


_MARK: ContextVar[FileMark | None] = ContextVar("export_center_file_mark", default=None)


@contextlib.contextmanager
def marked(mark: FileMark | None) -> Iterator[None]:
    """Within the block, files written are marked with ``mark`` (None: unmarked)."""
    token = _MARK.set(mark)
    try:
        yield
    finally:
        _MARK.reset(token)


def current_mark() -> FileMark | None:
    """The mark of the files written now, if any."""
    return _MARK.get()


def core_mark_xml() -> str:
    """The ``dc:identifier`` and ``dc:description`` elements of ``core.xml`` ('' unmarked)."""
    mark = current_mark()
    if mark is None:
        return ""
    return (
        f"<dc:identifier>{escape(mark.task_no)}</dc:identifier>"
        f"<dc:description>{escape(mark.line)}</dc:description>"
    )


def custom_xml() -> str | None:
    """``docProps/custom.xml`` of a marked file; None unmarked."""
    mark = current_mark()
    if mark is None:
        return None
    values = [
        ("ExportCenterTaskId", "lpwstr", mark.task_no),
        ("ExportCenterRequester", "lpwstr", mark.requester),
        ("ExportCenterCreated", "filetime", mark.created_text),
    ]
    props = "".join(
        f'<property fmtid="{_FMTID}" pid="{pid}" name="{name}">'
        f"<vt:{kind}>{escape(value)}</vt:{kind}></property>"
        for pid, (name, kind, value) in enumerate(values, start=2)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/'
        'custom-properties" xmlns:vt="http://schemas.openxmlformats.org/officeDocument/'
        f'2006/docPropsVTypes">{props}</Properties>'
    )


def footer_xml() -> bytes:
    """The ``headerFooter`` element of a sheet of a marked file whose type asks for the
    footer line (b'' otherwise); ``&`` is doubled, as header and footer codes want."""
    mark = current_mark()
    if mark is None or not mark.footer:
        return b""
    text = escape("&L" + mark.line.replace("&", "&&"))
    return f"<headerFooter><oddFooter>{text}</oddFooter></headerFooter>".encode()
