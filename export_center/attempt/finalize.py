"""Finalize of a sharded attempt: the shards' parts joined into the delivered file.

Two ways, by the file the task asks for (:attr:`Attempt.renders_parts`):

* **Joined** (a plain file: no compression, no split): the format's assembler joins the
  parts as they are (CSV head + parts, XLSX fragments numbered into sheets, JSON Lines
  parts concatenated, Parquet built from Arrow IPC parts), byte for byte the single
  writer's file. The file's SHA-256 is taken while it is written; its control totals
  are the shards' totals merged (each shard counts the rows it wrote, kept in its
  checkpoint, so a resumed shard's totals match its kept rows).
* **Rendered** (gzip, zip, or split into parts): the parts are typed rows
  (:class:`~export_center.writers.RowsPartWriter`), read back in shard order and
  written through the same package as a single stream
  (:meth:`Attempt.open_package`), so the delivered bytes equal a single-stream
  export's: the package's output depends on the rows only, never on the batches.
  The package gives the files, the archive and the totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from isal.isal_zlib import crc32  # zlib's CRC-32, computed 2-3x faster (a dependency)

from export_center import repository
from export_center.attempt.steps import Attempt
from export_center.columns import Column
from export_center.errors import StorageError
from export_center.manifests import manifest_body
from export_center.packaging import ArchiveEntry, ControlTotals, FileEntry
from export_center.packaging.streams import HashingStream
from export_center.repository import ShardCheckpoint
from export_center.storage.base import storage_error
from export_center.storage.keys import part_key
from export_center.writers import WriterStats, read_rows_parts

__all__ = ["assemble_file", "read_part"]


def read_part(run: Attempt, cp: ShardCheckpoint) -> Iterator[bytes]:
    """A DONE shard's part, read back segment by segment, its CRC-32 checked (and the
    watchdog between segments, so a cancel stops a long finalize).

    Raises:
        StorageError: the part read back does not match its checkpoint's CRC-32.
    """
    crc = 0
    for number, version in enumerate(cp.segments or []):
        run.watchdog.check()
        key = part_key(run.task.task_no, cp.shard_no, number, version)
        for chunk in run.ctx.storage.read_part(key):
            crc = crc32(chunk, crc)
            yield chunk
    if crc != cp.checksum:
        raise StorageError(
            f"shard {cp.key}: its stored part does not match its checkpoint "
            f"(CRC-32 {crc:08x}, expected {cp.checksum:08x})"
        )


def assemble_file(
    run: Attempt,
    columns: Sequence[Column],
    parts: Iterable[Iterable[bytes]],
    *,
    part_stats: WriterStats,
    totals: ControlTotals,
    snapshot_token: str | None,
    notes: Sequence[str],
) -> repository.StoredFile:
    """Write the delivered file from the parts, store it, and describe it for the commit.

    Args:
        run: the attempt (its spec, format, storage and watchdog).
        columns: the file's columns (projected, titled), as the part writers had them.
        parts: per shard in shard order, its segments' chunks (read lazily; the reader
            checks each part's CRC-32 and the watchdog).
        part_stats: ``WriterStats.total`` of the parts' last checkpoints.
        totals: the shards' control totals merged (used by the joined way).
        snapshot_token: the snapshot token the manifest names (the first shard's).
        notes: the converters' notes for the warning.

    Returns:
        What the commit records, with the manifest's body.

    Raises:
        FileTooLarge: the delivered file passes the size cap.
        StorageError: the parts cannot be read or the file cannot be written or stored.
        ExportCancelled, LeaseLost, ...: from the watchdog.
    """
    stream = run.open_file()
    cap = run.ctx.settings.file_size_cap_bytes
    archive: ArchiveEntry | None = None
    try:
        try:
            if run.renders_parts:
                run.snapshot_token = snapshot_token  # named by the ZIP's manifest.json
                package = run.open_package(stream, columns)
                try:
                    for batch in read_rows_parts(columns, parts):
                        package.write_columns(batch)
                    stats = package.close()
                except BaseException:
                    package.abort()
                    raise
                files, archive = package.files, package.archive
                totals_json = package.totals.as_json()
            else:
                hashing = HashingStream(stream)
                stats = run.file_format.assemble(
                    hashing,  # type: ignore[arg-type]
                    columns,
                    parts,
                    part_stats=part_stats,
                    max_bytes=cap,
                    csv=run.spec.csv,
                    time_zone=run.task.time_zone,
                )
                files = [
                    FileEntry(run.file_name, run.processed, hashing.count, hashing.hexdigest())
                ]
                totals_json = totals.as_json()
        except OSError as exc:
            raise storage_error(exc, "cannot assemble the file from its parts") from exc
        size = run.store(stream)
    except BaseException:
        run.abandon_file(stream)
        raise
    manifest = manifest_body(
        columns=columns,
        files=files,
        archive=archive,
        control_totals=totals_json,
        snapshot_token=snapshot_token,
    )
    return run.stored(stats, size, notes, manifest)
