"""Shard parts of a Parquet file: Arrow IPC record batches, and the file assembled from them.

A Parquet file cannot be concatenated (its footer describes every row group), so a
sharded Parquet export stores each shard's rows as Arrow data and writes the file at
finalize. :class:`ParquetPartWriter` converts each batch once, in the shard, with the
single writer's conversion (``writers.parquet_arrays``: the same types, refusals and
counts) and appends it to the part as one Arrow IPC record batch message;
:func:`assemble_parquet` reads the parts in shard order and feeds every batch to
``ParquetWriter.write_record_batch``, whose row groups are cut by row count alone. So
the file is byte for byte the one ``ParquetWriter`` writes from all rows, whatever the
shards, segments and batches.

Part format: an Arrow IPC *stream* (the encapsulated messages of the Arrow columnar
format) without its end-of-stream marker: the schema message, written by the writer
that starts the part (its ``resume_from`` has no bytes), then one record batch message
per ``write_columns`` batch. A resumed writer continues after its last checkpoint's
bytes with record batches only, so the stored segments, joined, are one stream; every
message is written whole with the batch that made it, so each checkpoint ends at a
message boundary. ``pyarrow.ipc.open_stream`` reads a part as it is.

Speed (``bench.parts``, 405,000 ORDERS rows, one process, CPU seconds): part written
0.62, read back and rendered 0.41 (0.5 with the writer's release after each row group),
against 0.62 + 2.82 + 1.26 through the JSON rows parts used before (``writers.rows``).

Memory: the shard holds one batch and its message; the assembler reads one message at
a time from the part's chunks, and the writer holds at most one row group of Arrow
data (a message's body stays alive while rows of it are buffered).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO

from export_center.columns import Column
from export_center.writers.base import WriterStats
from export_center.writers.parquet import ParquetWriter
from export_center.writers.parquet_arrays import ArrowColumns, load_pyarrow
from export_center.writers.parts import CheckpointedWriter

__all__ = ["READ_BUFFER_BYTES", "ParquetPartWriter", "assemble_parquet"]

READ_BUFFER_BYTES = 64 << 10
"""Bytes the assembler reads from a part at a time (a message may be larger)."""


class ParquetPartWriter(CheckpointedWriter):
    """Store one shard's rows as Arrow IPC record batches (see the module docstring).

    Args:
        stream: binary output of the part (or of its current segment); not closed.
        columns: the export's columns, in file order.
        time_zone: IANA name of the export time zone (the DATETIME fields' zone).
        max_bytes: cap on the part's bytes (``resume_from.bytes`` included), None for
            none; the file's cap is enforced by :func:`assemble_parquet`.
        resume_from: the stats of the part's last checkpoint when the shard resumes;
            counts and bytes continue from it and no schema message is written again.

    Attributes:
        content_type: ``application/vnd.apache.arrow.stream``.
        extension: ``parquet-part``.

    Raises:
        ModuleNotFoundError: pyarrow is not installed (the extra ``parquet``).
        ValueError: no columns, or a declared DECIMAL outside decimal128.
        FileTooLarge: the schema message passes ``max_bytes``.
        PermanentExportError: from ``write_columns``, code ``VALUE_NOT_REPRESENTABLE``:
            a value outside its Parquet type (message: the part's row, 1-based, and
            the column key).
    """

    content_type = "application/vnd.apache.arrow.stream"
    extension = "parquet-part"

    def __init__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str = "UTC",
        max_bytes: int | None = None,
        resume_from: WriterStats | None = None,
    ):
        pa, _ = load_pyarrow()
        super().__init__(
            stream, columns, time_zone=time_zone, max_bytes=max_bytes, resume_from=resume_from
        )
        self._pa = pa
        self._arrow = ArrowColumns(pa, self._columns, time_zone, self._stats)
        if self._counting.count == 0:  # a new part: it starts with the schema
            self._guarded(self._write_schema)

    def _write_schema(self) -> None:
        self._counting.write(memoryview(self._arrow.schema.serialize()))

    def _write_batch(self, columns: Sequence[Sequence[Any]]) -> None:
        """Convert the batch and append it as one record batch message."""
        arrays = self._arrow.arrays(columns, self._stats.rows + 1)
        batch = self._pa.RecordBatch.from_arrays(arrays, schema=self._arrow.schema)
        self._counting.write(memoryview(batch.serialize()))
        self._stats.rows += batch.num_rows

    def _finish(self) -> None:
        """Flush the output (a part has no end-of-stream marker)."""
        self._counting.flush()


class _Chunks(io.RawIOBase):
    """A readable stream over a part's chunks (bytes-like, any sizes, read lazily)."""

    def __init__(self, chunks: Iterable[bytes]):
        super().__init__()
        self._chunks = iter(chunks)
        self._chunk = memoryview(b"")
        #: What reading the chunks raised (a storage error, a cancel), which pyarrow
        #: passes on as it is: not a sign of a malformed part.
        self.failure: BaseException | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._chunk:
            try:
                chunk = next(self._chunks, None)
            except BaseException as exc:
                self.failure = exc
                raise
            if chunk is None:
                return 0
            self._chunk = memoryview(chunk).cast("B")
        size = min(len(buffer), len(self._chunk))
        buffer[:size] = self._chunk[:size]
        self._chunk = self._chunk[size:]
        return size


def _record_batches(pa: Any, schema: Any, part: Iterable[bytes], shard: int) -> Iterator[Any]:
    """The record batches of one part, in order; every chunk of it is read.

    Raises:
        ValueError: the part is no Arrow IPC stream of ``schema``, ends inside a
            message, or holds bytes after an end-of-stream marker.
    """
    raw = _Chunks(part)
    source = io.BufferedReader(raw, READ_BUFFER_BYTES)
    if not source.peek(1):
        return  # an empty part: no rows
    try:
        reader = pa.ipc.open_stream(source)
    except (pa.ArrowInvalid, OSError) as exc:
        if exc is raw.failure:
            raise
        raise ValueError(
            f"the Parquet part of shard {shard} is no Arrow IPC stream: {exc}"
        ) from None
    if not reader.schema.equals(schema, check_metadata=True):
        raise ValueError(
            f"the Parquet part of shard {shard} has another schema ({reader.schema}) "
            f"than the file's ({schema})"
        )
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            break
        except (pa.ArrowInvalid, OSError) as exc:  # pyarrow's IOError is OSError
            if exc is raw.failure:
                raise
            raise ValueError(
                f"the Parquet part of shard {shard} ends inside a record batch: {exc}"
            ) from None
        yield batch
    if source.read(1):
        raise ValueError(f"the Parquet part of shard {shard} holds bytes after its end")


def assemble_parquet(
    stream: BinaryIO,
    columns: Sequence[Column],
    parts: Iterable[Iterable[bytes]],
    *,
    part_stats: WriterStats,
    max_bytes: int | None = None,
    time_zone: str = "UTC",
) -> WriterStats:
    """Write the Parquet file from the shards' parts (:class:`ParquetPartWriter`).

    Args:
        stream: binary output of the file; it is not closed.
        columns: the export's columns, as given to the part writers.
        parts: per shard in shard order, its segments in order (bytes-like chunks, read
            lazily; a chunk may end anywhere, each part ends at a message's end).
        part_stats: ``WriterStats.total`` of every part's last checkpoint; its ``rows``
            must equal the rows found, its cell counts (replaced surrogates, invalid
            numbers) go into the result.
        max_bytes: the file's size cap in bytes, None for none (enforced while writing).
        time_zone: the export time zone, as given to the part writers.

    Returns:
        The file's stats, equal to ``ParquetWriter``'s for the same rows.

    Raises:
        FileTooLarge: the file grew past ``max_bytes``.
        ValueError: a part that is no Arrow IPC stream of the file's schema or ends
            inside a message, or ``part_stats.rows`` differs from the rows found. The
            output is then partial: delete it.
    """
    writer = ParquetWriter(stream, columns, time_zone=time_zone, max_bytes=max_bytes)
    try:
        pa, schema = load_pyarrow()[0], writer.schema
        for shard, part in enumerate(parts, start=1):
            for batch in _record_batches(pa, schema, part, shard):
                writer.write_record_batch(batch)
        stats = writer.close()
    except BaseException:
        writer.abort()
        raise
    if stats.rows != part_stats.rows:
        raise ValueError(f"the Parquet parts hold {stats.rows} rows, their stats {part_stats.rows}")
    cells = dataclasses.replace(part_stats, rows=0, sheets=0, bytes=0)
    total = stats + cells
    total.replaced_chars = (
        total.replaced_control_chars + total.replaced_noncharacters + total.replaced_surrogates
    )
    return total
