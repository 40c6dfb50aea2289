"""Streaming JSON Lines writer: one JSON object per row.

Rules:

* UTF-8 without BOM; every row is one JSON object followed by LF (``\\n``), the last
  row too. No header: the object's names are the column *keys* (``o_totalprice``),
  in column order, so the header language or a renamed title never changes the data.
* Values by column type: STRING a JSON string; INTEGER a JSON number with every digit
  (no float, any size); DECIMAL a JSON string holding the value's exact positional text
  (``"182210.40"``, never ``1E-8``: a reader keeps the digits and the scale); BOOLEAN
  ``true``/``false``; DATE ``"YYYY-MM-DD"``; DATETIME ISO 8601 with the offset in force
  in the export time zone (``"2024-03-01T08:00:00+08:00"``, microseconds when not
  zero; a DST fall-back's two wall times keep their two offsets); None ``null``.
* Strings are written as orjson writes them: ``"``, ``\\`` and C0 control characters
  escaped, everything else as UTF-8. Lone surrogates, which UTF-8 cannot encode,
  become U+FFFD and are counted in ``replaced_surrogates`` (as the CSV writer counts
  them); no formula guard (the file is data, not a spreadsheet).
* NaN or Infinity in a DECIMAL column (``export_center.values`` rejects them) are
  written ``null`` and counted in ``invalid_numbers`` (the CSV writer's empty cell).

There is no head and no trailer, so a sharded export's parts (:class:`JsonlPartWriter`,
the same rows) concatenated in shard order are the file (:func:`assemble_jsonl`).

Speed: a batch is rendered column by column (each column's JSON texts, a STRING column
with one ``orjson.dumps`` of the whole column), then every row is one ``%`` of a
template holding the keys: ``'{"id":%s,"name":%s}\\n' % row``.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any, BinaryIO
from zoneinfo import ZoneInfo

import orjson

from export_center.columns import Column, ColumnType
from export_center.errors import FileTooLarge
from export_center.values import DecimalColumn, DecimalText
from export_center.writers.base import CountingStream, StreamingWriter, WriterStats, date_cache
from export_center.writers.parts import CheckpointedWriter

__all__ = ["JsonlPartWriter", "JsonlWriter", "assemble_jsonl"]

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_MB = 1024 * 1024
_DIGITS = "0123456789"


def _json_text(text: str) -> str:
    """One str as a JSON string (orjson's escaping; no lone surrogates here)."""
    return orjson.dumps(text).decode("utf-8")


class JsonlWriter(StreamingWriter):
    """Stream rows into a JSON Lines file (see the module docstring for the rules).

    Args:
        stream: binary output; it is not closed by ``close()``.
        columns: the export's columns, in file order (their keys name the values).
        time_zone: IANA name of the export time zone (datetimes carry its offset).
        max_bytes: file size cap in bytes (None = unlimited); writing raises
            ``errors.FileTooLarge`` as soon as the file would grow past it.
        resume_from: the stats of a part so far (:class:`JsonlPartWriter`), or None.

    Attributes:
        content_type: ``application/x-ndjson``.
        extension: ``jsonl``.

    Raises:
        ValueError: no columns.
        zoneinfo.ZoneInfoNotFoundError: unknown time zone.
    """

    content_type = "application/x-ndjson"
    extension = "jsonl"

    def __init__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str = "UTC",
        max_bytes: int | None = None,
        resume_from: WriterStats | None = None,
    ):
        super().__init__(
            stream, columns, time_zone=time_zone, max_bytes=max_bytes, resume_from=resume_from
        )
        names = []
        self._key_surrogates = 0
        for key in self._keys:
            clean, replaced = _SURROGATE_RE.subn("\ufffd", key)
            self._key_surrogates += replaced
            names.append(_json_text(clean).replace("%", "%%"))
        self._template = "{" + ",".join(f"{name}:%s" for name in names) + "}\n"
        self._zone = ZoneInfo(time_zone)
        self._renderers = [self._renderer(ColumnType(c.type)) for c in self._columns]
        self._stats.sheets = 0 if isinstance(self, CheckpointedWriter) else 1

    # --- value rendering -------------------------------------------------------------

    def _renderer(self, column_type: ColumnType) -> Callable[[list[Any]], list[str]]:
        """The function rendering one column of a batch to JSON texts, with a fast
        path for the column's common Python type and :meth:`_value` for the rest."""
        value = self._value

        if column_type is ColumnType.STRING:
            return self._render_strings

        if column_type is ColumnType.INTEGER:

            def render_integers(values: list[Any]) -> list[str]:
                if set(map(type, values)) == {int}:
                    return list(map(str, values))
                return [value(v) for v in values]

            return render_integers

        if column_type is ColumnType.DECIMAL:

            def render_decimals(values: list[Any]) -> list[str]:
                if type(values) is DecimalColumn or set(map(type, values)) == {DecimalText}:
                    return ['"' + v + '"' for v in values]  # validated digits: no escaping
                return [value(v) for v in values]

            return render_decimals

        if column_type is ColumnType.DATE:
            text_of = date_cache(lambda day: '"' + day.isoformat() + '"').__getitem__

            def render_dates(values: list[Any]) -> list[str]:
                if set(map(type, values)) == {_dt.date}:
                    return list(map(text_of, values))
                return [value(v) for v in values]

            return render_dates

        if column_type is ColumnType.DATETIME:
            moment = _dt.datetime
            datetime_text = self._datetime_text

            def render_datetimes(values: list[Any]) -> list[str]:
                return [datetime_text(v) if type(v) is moment else value(v) for v in values]

            return render_datetimes

        def render_others(values: list[Any]) -> list[str]:
            return [value(v) for v in values]

        return render_others

    def _render_strings(self, values: list[Any]) -> list[str]:
        """A STRING column: one ``orjson.dumps`` of the column, cut into its strings.

        In orjson's output of a list of strings, ``","`` occurs only between two items
        (a quote inside a string is always written ``\\"``), so cutting there gives
        each item's JSON text. Lone surrogates (orjson refuses them) are replaced first.
        """
        try:
            joined = "".join(values)  # TypeError unless every value is a str
        except TypeError:
            return [self._value(v) for v in values]
        try:
            dumped = orjson.dumps(values)
        except orjson.JSONEncodeError:
            if _SURROGATE_RE.search(joined) is None:
                raise
            replaced = [self._clean(v) for v in values]
            dumped = orjson.dumps(replaced)
        # NUL never occurs raw in orjson's output (it writes \u0000), so it can mark
        # the item boundaries: C-level replace and split, each item keeps its quotes.
        return dumped.decode("utf-8")[1:-1].replace('","', '"\x00"').split("\x00")

    def _clean(self, text: str) -> str:
        """``text`` with lone surrogates as U+FFFD, counted (E08)."""
        clean, replaced = _SURROGATE_RE.subn("\ufffd", text)
        self._stats.replaced_surrogates += replaced
        return clean

    def _value(self, value: Any) -> str:
        """Any typed value as JSON text (slow path, every rule here)."""
        if value is None:
            return "null"
        if isinstance(value, DecimalText):
            return '"' + str(value) + '"'
        if isinstance(value, str):
            return _json_text(self._clean(str(value)))
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(int(value))
        if isinstance(value, Decimal):
            if not value.is_finite():
                self._stats.invalid_numbers += 1
                return "null"
            return '"' + format(value, "f") + '"'
        if isinstance(value, float):
            if not math.isfinite(value):
                self._stats.invalid_numbers += 1
                return "null"
            return '"' + format(Decimal(repr(value)), "f") + '"'
        if isinstance(value, _dt.datetime):
            return self._datetime_text(value)
        if isinstance(value, _dt.date):
            return '"' + value.isoformat() + '"'
        return _json_text(self._clean(str(value)))

    def _datetime_text(self, value: _dt.datetime) -> str:
        """A datetime as ISO 8601 with the export zone's offset: ``"2024-03-01T08:00:00+08:00"``.

        A naive value is written as given (no offset); a moment whose wall time falls
        beyond year 9999 in the export zone keeps its own offset.
        """
        if value.tzinfo is None:
            return '"' + value.isoformat() + '"'
        zone = self._zone
        if value.tzinfo is zone:  # astimezone would keep even a wall time in a gap
            value = value.astimezone(_dt.UTC)
        try:
            return '"' + value.astimezone(zone).isoformat() + '"'
        except OverflowError:
            return '"' + value.isoformat() + '"'

    # --- StreamingWriter hooks ---------------------------------------------------------

    def _write_batch(self, columns: Sequence[Sequence[Any]]) -> None:
        """Render a batch column by column, one template ``%`` per row, one write."""
        fields = [
            render(values if isinstance(values, list) else list(values))
            for render, values in zip(self._renderers, columns, strict=True)
        ]
        rows = len(columns[0])
        text = "".join(map(self._template.__mod__, zip(*fields, strict=True)))
        self._counting.write(text.encode("utf-8"))
        self._stats.rows += rows
        self._stats.replaced_surrogates += self._key_surrogates * rows

    def _finish(self) -> None:
        """Flush the output (JSON Lines has no trailer)."""
        self._counting.flush()


class JsonlPartWriter(CheckpointedWriter, JsonlWriter):
    """Stream one shard's rows as a JSON Lines part: exactly ``JsonlWriter``'s rows (the
    file has no head), so the parts in shard order are the file. Its stats have
    ``sheets=0`` (a part), the file's ``sheets=1`` (:func:`assemble_jsonl`).

    Args:
        stream: binary output of the part (or of its current segment); not closed.
        columns: the export's columns, in file order.
        time_zone: IANA name of the export time zone.
        max_bytes: cap on the part's bytes (``resume_from.bytes`` included), None for none.
        resume_from: the stats of the part's last checkpoint when the shard resumes.

    Raises:
        ValueError: no columns.
        zoneinfo.ZoneInfoNotFoundError: unknown time zone.
    """


def assemble_jsonl(
    stream: BinaryIO,
    columns: Sequence[Column],
    parts: Iterable[Iterable[bytes]],
    *,
    part_stats: WriterStats,
    max_bytes: int | None = None,
) -> WriterStats:
    """Write the JSON Lines file: every part's segments in shard order.

    Args:
        stream: binary output of the file; it is not closed.
        columns: the export's columns (unused: the parts hold whole rows; kept for the
            format table's ``Assembler`` shape).
        parts: per shard in shard order, its segments in order (bytes-like chunks).
        part_stats: ``WriterStats.total`` of every part's last checkpoint.
        max_bytes: the file's size cap in bytes, None for none.

    Returns:
        The file's stats: ``part_stats`` with ``sheets=1``, equal to ``JsonlWriter``'s
        for the same rows.

    Raises:
        FileTooLarge: checked before writing (from ``part_stats``) and while writing.
        ValueError: the parts do not hold ``part_stats.bytes`` bytes.
    """
    if max_bytes is not None and part_stats.bytes > max_bytes:
        raise FileTooLarge(
            f"file exceeds the size cap of {max_bytes / _MB:g} MB ({max_bytes} bytes)"
        )
    counting = CountingStream(stream, max_bytes)
    for part in parts:
        for chunk in part:
            counting.write(chunk)
    counting.flush()
    if counting.count != part_stats.bytes:
        raise ValueError(f"the parts hold {counting.count} bytes, their stats {part_stats.bytes}")
    stats = WriterStats.from_dict(part_stats.to_dict())
    stats.sheets = 1
    stats.replaced_chars = (
        stats.replaced_control_chars + stats.replaced_noncharacters + stats.replaced_surrogates
    )
    return stats
