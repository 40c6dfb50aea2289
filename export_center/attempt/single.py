"""The single-stream producer: one keyset-paged stream of batches into one file.

For an export type without shards, :class:`SingleStreamProducer` runs the attempt's
steps in order: the first batch fixes the columns, schema hash and snapshot token; per
batch it checks the batch, starts fetching the next one (one batch in flight, see
:mod:`export_center.attempt.fetching`), converts and writes this one and writes progress; then
it finishes the file and stores it. The attempt (:class:`~export_center.attempt.steps.
Attempt`) owns the steps it calls (fetch, convert, write, store, progress), so that
the sharded producer (:mod:`export_center.attempt.sharded`) uses the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

from export_center import repository
from export_center.attempt.batches import BatchConverter
from export_center.attempt.ceiling import check_row_caps
from export_center.attempt.fetching import BatchFetcher, InFlight, PageSizer
from export_center.attempt.steps import Attempt
from export_center.columns import Column
from export_center.errors import ProviderContractError, SchemaChanged
from export_center.manifests import manifest_body
from export_center.packaging.package import Package
from export_center.provider_client import Batch
from export_center.registry import ExportType
from export_center.states import Phase
from export_center.storage.base import storage_error
from export_center.writers import ExportWriter, WriterStats

__all__ = ["SingleStreamProducer"]


@dataclass(slots=True)
class _Stream:
    """What the first batch fixes for the whole attempt."""

    columns_hash: str | None
    snapshot: str | None
    converter: BatchConverter
    file_columns: list[Column]


class SingleStreamProducer:
    """Produces one unsharded attempt's file (:meth:`produce`); a
    :class:`~export_center.attempt.steps.Producer`.

    Args:
        run: the claimed attempt (its task, watchdog, storage and steps).
        etype: the task's export type.
    """

    def __init__(self, run: Attempt, etype: ExportType) -> None:
        self.run = run
        self.etype = etype

    def produce(self) -> repository.StoredFile:
        """Fetch every batch, write the file and store it.

        Raises:
            ExportFailure: a batch failed, broke the contract, or the file failed.
            ExportCancelled, WorkerStopping, LeaseLost, WorkerInterrupted: from the
                watchdog, checked between batches and before every write to storage.
        """
        run, etype = self.run, self.etype
        request = run.provider_request(etype)
        pages = PageSizer(request.limit)  # halved for a page too large, then grown back
        time_limit = float(
            etype.batch_timeout_seconds or run.ctx.settings.provider.batch_timeout_seconds
        )
        fetcher = BatchFetcher(
            lambda cursor, snapshot, abort, limit: run.fetch(
                request, cursor, snapshot, abort, limit, pages
            ),
            run.watchdog.check,
            time_limit,
            f"fetch-{run.task_id}",
        )
        stream = run.open_file()
        writer: Package | None = None
        try:
            run.batch_no = 1
            batch = fetcher.wait(fetcher.submit(None, None))
            writer, fixed = self._open_writer(stream, batch)
            while True:
                following = self._prefetch(fetcher, batch, fixed)
                self._write_batch(writer, fixed.converter, batch)
                if following is None:
                    break
                batch = self._next_batch(fetcher, following, batch)
            stats, size = self._finish(writer, stream)
        except BaseException:
            fetcher.abandon()  # the fetch thread stops at its next chunk; nobody waits
            if writer is not None:
                writer.abort()
            run.abandon_file(stream)
            raise
        fetcher.close()
        manifest = manifest_body(
            columns=fixed.file_columns,
            files=writer.files,
            archive=writer.archive,
            control_totals=writer.totals.as_json(),
            snapshot_token=fixed.snapshot,
        )
        return run.stored(stats, size, fixed.converter.notes(), manifest)

    def _open_writer(self, stream: BinaryIO, first: Batch) -> tuple[Package, _Stream]:
        """Open the file's package (:meth:`Attempt.open_package`) with the first batch's
        columns projected to the chosen ones; fix its schema hash and snapshot token for
        the attempt.

        Raises:
            ProviderContractError: the first batch declares no columns.
        """
        run = self.run
        if first.columns is None:
            raise ProviderContractError("the first batch has no columns")
        run.total = first.total_rows
        run.snapshot_token = first.snapshot_token
        columns = run.file_columns(first.columns)
        writer = run.open_package(stream, columns)
        return writer, _Stream(
            first.schema_hash,
            first.snapshot_token,
            BatchConverter(first.columns, run.chosen_keys),
            columns,
        )

    def _prefetch(self, fetcher: BatchFetcher, batch: Batch, fixed: _Stream) -> InFlight | None:
        """Check the batch against the attempt, and start fetching the next one.

        Raises:
            SchemaChanged: the batch's ``schemaHash`` differs from the first batch's.
            ProviderContractError: ``hasMore`` without a new cursor.
        """
        self.run.watchdog.check()
        if batch.schema_hash != fixed.columns_hash:
            raise SchemaChanged(
                f"schemaHash changed from {fixed.columns_hash} to {batch.schema_hash}"
            )
        if not batch.has_more:
            return None
        fetcher.cursors.add(batch.next_cursor, self.run.batch_no, len(batch.rows))
        return fetcher.submit(batch.next_cursor, fixed.snapshot)

    def _write_batch(self, writer: ExportWriter, converter: BatchConverter, batch: Batch) -> None:
        """Convert and write one batch, and write progress.

        Raises:
            RowLimitExceeded, RowCeilingCrossed: the export passes the type's
                ``max_rows`` or the requester's row ceiling.
            PermanentExportError: a row does not fit its columns (:meth:`Attempt.convert`).
            StorageError: the file cannot be written.
        """
        run = self.run
        run.phase = Phase.RENDER
        check_row_caps(self.etype, run.task, run.processed + len(batch.rows))
        typed = run.convert(batch, converter, offset=run.processed, batch_no=run.batch_no)
        run.write(writer, run.project(typed))
        run.processed += len(batch.rows)
        run.progress()

    def cleanup(self, *, forget_counts: bool = False) -> None:
        """Nothing to delete: a single stream keeps nothing between attempts."""

    def _next_batch(self, fetcher: BatchFetcher, flight: InFlight, previous: Batch) -> Batch:
        """Wait for the batch that follows ``previous``."""
        run = self.run
        run.phase = Phase.FETCH
        run.cursor = previous.next_cursor
        run.batch_no += 1
        return fetcher.wait(flight)

    def _finish(self, writer: ExportWriter, stream: BinaryIO) -> tuple[WriterStats, int]:
        """Close the file and make it visible under its key.

        Returns:
            ``(writer stats, size in bytes)``.

        Raises:
            StorageError: the file cannot be finished or stored.
        """
        run = self.run
        run.phase = Phase.STORE
        run.location = "finishing the file"
        run.progress(force=True)
        try:
            stats = writer.close()
        except OSError as exc:
            raise storage_error(exc, "cannot finish the file") from exc
        return stats, run.store(stream)
