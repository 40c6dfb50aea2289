"""The size a Parquet file will have when it closes: the arithmetic behind
``ParquetWriter.write_within``.

A Parquet file is ``PAR1``, its row groups' column chunks, the footer (the Thrift
``FileMetaData``: schema, key-value metadata, one ``RowGroup`` record per row group),
the footer's length (4 bytes) and ``PAR1`` again. The writer keeps the rows of its
current row group in memory, so what closing now would add is not known until the
group is encoded. :func:`one_group_file` encodes rows as a file of one row group (a
trial, written to memory with the writer's own options): the bytes of its column
chunks are the bytes the real writer will write for the same rows, since chunks hold
no file offsets.

Rule of :class:`SizeBound`: while the file has no row group written yet, the size of
the file closed with the buffered rows is the trial's size, exactly (the real file is
the trial's bytes). Once row groups are written, it is the bytes out so far plus the
trial's column chunks plus a footer bound: the empty file's footer, plus what each row
group adds to a footer (its trial's footer minus the empty one), plus the difference
the real file offsets can make: each of a row group's ``3 x columns + 1`` offset
fields (Thrift varints of at most 10 bytes, at least 1 in a trial) may take 9 bytes
more, its ordinal 2 more, and the footer's row count and list header 15 more. So the
bound is never below the real size (tested against the files written).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["OneGroupFile", "SizeBound", "one_group_file"]

_MAGIC_AND_LENGTH = 4 + 4 + 4
"""``PAR1`` at the start, the footer length and ``PAR1`` at the end."""


@dataclass(frozen=True, slots=True)
class OneGroupFile:
    """A trial: rows encoded as a whole Parquet file of one row group (none for 0 rows).

    Attributes:
        rows: rows encoded.
        size: bytes of the file.
        footer: bytes of its footer (``FileMetaData``).
    """

    rows: int
    size: int
    footer: int

    @property
    def chunks(self) -> int:
        """Bytes of the row group's column chunks (what the real writer will write)."""
        return self.size - _MAGIC_AND_LENGTH - self.footer


def one_group_file(pa: Any, open_writer: Callable[[Any], Any], table: Any) -> OneGroupFile:
    """Encode ``table`` as one row group in memory and measure the file.

    Args:
        pa: the ``pyarrow`` module.
        open_writer: opens a ``pyarrow.parquet.ParquetWriter`` on a sink with the real
            writer's schema and options.
        table: the rows (a ``pyarrow.Table``, contiguous, as the real writer writes them).
    """
    sink = pa.BufferOutputStream()
    writer = open_writer(sink)
    rows = table.num_rows
    if rows:
        writer.write_table(table, row_group_size=rows)
    writer.close()
    data = sink.getvalue()
    footer = int.from_bytes(data.slice(data.size - 8, 4).to_pybytes(), "little")
    return OneGroupFile(rows, data.size, footer)


class SizeBound:
    """The size of a Parquet file if it closed with its buffered rows as a last group.

    Args:
        columns: the file's number of columns.
        empty: the trial of no rows (a file without row groups).
    """

    def __init__(self, columns: int, empty: OneGroupFile):
        self._empty_footer = empty.footer
        self._per_group_slack = 9 * (3 * columns + 1) + 2
        self._groups = 0
        self._group_footers = 0  # what the written row groups add to a footer

    @property
    def groups(self) -> int:
        """Row groups written so far (each told to :meth:`written`)."""
        return self._groups

    def size(self, written: int, trial: OneGroupFile) -> int:
        """Bytes of the file closed after the trial's rows as its last row group.

        Args:
            written: the file's bytes out so far (``PAR1`` and the written groups).
            trial: :func:`one_group_file` of the buffered rows to close with.

        Returns:
            The exact size while no group is written, else an upper bound (module
            docstring).
        """
        if self._groups == 0:
            return trial.size
        adds = self._group_footers + trial.footer - self._empty_footer
        slack = (self._groups + 1) * self._per_group_slack + 15
        return written + trial.chunks + self._empty_footer + adds + slack + 8

    def written(self, trial: OneGroupFile) -> None:
        """Count a row group just written, of exactly the trial's rows."""
        self._groups += 1
        self._group_footers += trial.footer - self._empty_footer
