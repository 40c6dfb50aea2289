"""One execution attempt of an export: fetch, render, store, commit.

The attempt pages through the provider with the keyset cursor and snapshot token,
streams rows into the writer and stores the file, in named steps (:meth:`ExportRun.run`
drives them): the provider request, the first batch, opening the writer, then per batch
prefetching the next one (:mod:`export_center.fetching`, one batch in flight) and
writing this one, and finishing the file. Progress is written at batch boundaries, at
most once per ``task.progress_every_seconds``.

Every failure path deletes the partial file and ends the attempt: permanent errors ->
FAILED, transient errors -> PENDING with ``dispatch_version + 1`` and backoff (or FAILED
when attempts are used), cancel -> CANCELLED, shutdown -> handed back (PENDING, the
attempt not counted), lost lease -> nothing written.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, BinaryIO

import orjson
from sqlalchemy import Engine

from export_center import metrics, repository
from export_center.batches import BatchConverter, InexactNumber, InvalidRow, MissingColumns
from export_center.commands import COMMAND_TAG
from export_center.errors import (
    RETRY_CANNOT_HELP,
    DeadlinePassed,
    ExportCancelled,
    ExportFailure,
    LeaseLost,
    PermanentExportError,
    ProviderContractError,
    RowLimitExceeded,
    SchemaChanged,
    StorageError,
    TransientExportError,
    WorkerStopping,
)
from export_center.fetching import BatchFetcher, InFlight, PageSizer
from export_center.filenames import content_disposition, download_file_name
from export_center.provider_client import Batch, ProviderClient, ProviderRequest
from export_center.registry import ExportType, Registry
from export_center.repository import AttemptEnd
from export_center.settings import Settings
from export_center.sharded import ShardedProducer
from export_center.states import Phase
from export_center.storage import Storage, file_extension, new_object_key
from export_center.watchdog import Watchdog
from export_center.writers import ExportWriter, WriterStats, open_writer

__all__ = ["AttemptOutcome", "ExportRun", "RunContext"]

log = logging.getLogger(__name__)


class AttemptOutcome(StrEnum):
    """How one attempt ended (a metric label and a log field)."""

    SUCCEEDED = "succeeded"
    RETRY = "retry"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RELEASED = "released"
    LEASE_LOST = "lease_lost"


CONTENT_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


@dataclass(slots=True)
class RunContext:
    """What every attempt needs; built once per process.

    Attributes:
        settings: process settings.
        registry: export types (provider address, batch size, max rows read now).
        storage: where files go.
        provider: HTTP client for providers.
        topic: command topic for retry outbox rows.
        self_url: the API's own base URL (for ``provider_url: self``).
        stopping: set when the process shuts down (attempts hand their task back).
    """

    settings: Settings
    registry: Registry
    storage: Storage
    provider: ProviderClient
    topic: str
    self_url: str | None = None
    stopping: threading.Event = field(default_factory=threading.Event)


def _warning(stats: Any, notes: Sequence[str] = ()) -> str | None:
    """A sentence on what the writer had to change, or None (CASES E08, E10, E15).

    Replaced characters are named by kind, e.g. "3 control character(s),
    1 non-character(s) (U+FFFE/U+FFFF) and 2 lone surrogate(s) replaced with U+FFFD";
    kinds with a zero count are left out. Stats without the split (only
    ``replaced_chars``) give "N character(s) replaced with U+FFFD".

    Args:
        stats: the writer's ``WriterStats``.
        notes: further parts (the undeclared keys the rows carried).

    Returns:
        The parts joined with "; ", or None when nothing was changed.
    """
    parts = []
    if stats.truncated_cells:
        parts.append(f"{stats.truncated_cells:,} cell(s) cut to Excel's 32,767-character limit")
    if stats.replaced_chars:
        kinds = [
            (getattr(stats, "replaced_control_chars", 0), "control character(s)"),
            (getattr(stats, "replaced_noncharacters", 0), "non-character(s) (U+FFFE/U+FFFF)"),
            (getattr(stats, "replaced_surrogates", 0), "lone surrogate(s)"),
        ]
        named = [f"{count:,} {kind}" for count, kind in kinds if count]
        if not named:
            named = [f"{stats.replaced_chars:,} character(s)"]
        listed = ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else named[0]
        parts.append(f"{listed} replaced with U+FFFD")
    if getattr(stats, "invalid_numbers", 0):
        parts.append(f"{stats.invalid_numbers:,} NaN/Infinity value(s) written as empty cells")
    if stats.sheets > 1:
        parts.append(f"rows split over {stats.sheets} sheets (1,048,575 rows per sheet)")
    parts.extend(notes)
    return "; ".join(parts) or None


@dataclass(slots=True)
class _Stream:
    """What the first batch fixes for the whole attempt."""

    columns_hash: str | None
    snapshot: str | None
    converter: BatchConverter


class ExportRun:
    """Runs one claimed attempt to its end.

    Args:
        engine: the export center's database.
        context: shared run context.
        task: the task row as read at claim time.
        version: the claimed ``dispatch_version``.
        owner: the lease owner that claimed it.
        object_key: the key recorded at claim for this attempt's file (a new one when
            None).
    """

    def __init__(
        self,
        engine: Engine,
        context: RunContext,
        task: Mapping[str, Any],
        version: int,
        owner: str,
        *,
        object_key: str | None = None,
    ) -> None:
        self.engine = engine
        self.ctx = context
        self.task = task
        self.task_id: int = task["id"]
        self.version = version
        self.owner = owner
        self.ext = file_extension(task["format"])
        self.object_key = object_key or new_object_key(
            task["task_no"], self.ext, tenant=task["tenant_id"]
        )
        self.file_name = download_file_name(task["task_name"], self.ext)
        self.phase = Phase.FETCH
        self.batch_no = 0
        self.cursor: str | None = None
        self.processed = 0
        self.total: int | None = None
        self.location: str | None = None  # where a sharded attempt failed
        self.sharded: ShardedProducer | None = None
        self._last_progress = 0.0
        settings = context.settings.task
        self.watchdog = Watchdog(
            engine,
            task_id=self.task_id,
            version=version,
            owner=owner,
            lease_seconds=settings.lease_seconds,
            heartbeat_seconds=settings.heartbeat_seconds,
            stopping=context.stopping,
        )

    # ------------------------------------------------------------------ driver

    def run(self) -> AttemptOutcome:
        """Execute and settle the attempt; never raises.

        Returns:
            How the attempt ended: ``succeeded``, ``retry`` (transient failure, another
            attempt follows), ``failed``, ``cancelled``, ``released`` (handed back on
            shutdown) or ``lease_lost`` (another attempt owns the task; nothing written).
        """
        started = time.perf_counter()
        self.watchdog.start()
        try:
            stored = self._produce()
            outcome = self._commit(stored, started)
        except ExportCancelled:
            self._discard()
            outcome = self._settle_cancel()
        except WorkerStopping:
            self._discard()
            outcome = self._release()
        except LeaseLost as exc:
            self._discard()
            log.warning("attempt stopped without writing: %s", exc, extra=self._log())
            outcome = AttemptOutcome.LEASE_LOST
        except ExportFailure as exc:
            self._discard()
            # During a shutdown the provider may vanish first (the embedded default
            # serves it): that is the shutdown, not the export's fault.
            outcome = self._release() if self.ctx.stopping.is_set() else self._settle_failure(exc)
        except Exception as exc:  # a bug or an unexpected library error: retry like transient
            log.exception("attempt crashed", extra=self._log())
            self._discard()
            outcome = self._settle_failure(
                TransientExportError(
                    f"internal error: {type(exc).__name__}: {exc}", code="INTERNAL_ERROR"
                )
            )
        finally:
            self.watchdog.stop()
        metrics.TASKS_COMPLETED.labels(self.task["export_type"], outcome).inc()
        return outcome

    def _produce(self) -> repository.StoredFile:
        """Fetch every batch, write the file and store it; the steps below in order."""
        etype = self._export_type()
        if etype.shards is not None:
            self.sharded = ShardedProducer(self, etype)
            return self.sharded.produce()
        request = self._provider_request(etype)
        pages = PageSizer(request.limit)  # halved for a page too large, then grown back
        time_limit = float(
            etype.batch_timeout_seconds or self.ctx.settings.provider.batch_timeout_seconds
        )
        fetcher = BatchFetcher(
            lambda cursor, snapshot, abort, limit: self._fetch(
                request, cursor, snapshot, abort, limit, pages
            ),
            self.watchdog.check,
            time_limit,
            f"fetch-{self.task_id}",
        )
        stream = self.ctx.storage.open_write(
            self.object_key,
            content_type=CONTENT_TYPES[self.ext],
            content_disposition=content_disposition(self.file_name),
        )
        writer: ExportWriter | None = None
        try:
            self.batch_no = 1
            batch = fetcher.wait(fetcher.submit(None, None))
            writer, fixed = self._open_writer(stream, batch)
            while True:
                following = self._prefetch(fetcher, batch, fixed)
                self._write_batch(writer, fixed.converter, batch, etype.max_rows)
                if following is None:
                    break
                batch = self._next_batch(fetcher, following, batch)
            stats, size = self._finish(writer, stream)
        except BaseException:
            fetcher.abandon()  # the fetch thread stops at its next chunk; nobody waits
            if writer is not None:
                writer.abort()
            if not stream.closed:
                stream.close()
            raise
        fetcher.close()
        return self._stored(stats, size, fixed.converter)

    # ------------------------------------------------------------------ steps

    def _export_type(self) -> ExportType:
        """The task's type as registered now (its provider address, batch size, caps).

        Raises:
            PermanentExportError: the type is gone, or the task's format is unknown.
        """
        etype = self.ctx.registry.get(self.task["export_type"])
        if etype is None:
            raise PermanentExportError(
                f"export type {self.task['export_type']} is no longer registered",
                code="UNKNOWN_EXPORT_TYPE",
            )
        if str(self.task["format"]).upper() not in ("CSV", "XLSX"):
            raise PermanentExportError(
                f"unknown file format {self.task['format']!r} (csv or xlsx)",
                code="UNKNOWN_FORMAT",
            )
        return etype

    def _provider_request(self, etype: ExportType) -> ProviderRequest:
        """The identity part of every batch request of this attempt."""
        return ProviderRequest(
            export_type=etype.code,
            url=etype.base_url(self.ctx.self_url) + etype.provider_path,
            task_id=self.task["task_no"],
            tenant_id=self.task["tenant_id"],
            app_code=self.task["app_code"],
            requested_by=self.task["requested_by"],
            dispatch_version=self.version,
            parameters=orjson.loads(self.task["parameters_json"]),
            limit=etype.batch_size,
            trace_id=self.task["trace_id"],
            time_zone=self.task["time_zone"],
        )

    def _fetch(
        self,
        request: ProviderRequest,
        cursor: str | None,
        snapshot: str | None,
        abort: threading.Event,
        time_limit: float,
        pages: PageSizer,
    ) -> Batch:
        """The fetch thread's work: one batch at the page size ``pages`` holds for this
        stream (halved after a page too large), stopping when ``abort`` is set."""
        self.watchdog.check()
        return pages.fetch(
            lambda limit: self.ctx.provider.fetch(
                request,
                cursor=cursor,
                snapshot_token=snapshot,
                limit=limit,
                time_limit=time_limit,
                abort=abort,
            )
        )

    def _open_writer(self, stream: BinaryIO, first: Batch) -> tuple[ExportWriter, _Stream]:
        """Open the file writer with the first batch's columns; fix its schema hash and
        snapshot token for the attempt.

        Raises:
            ProviderContractError: the first batch declares no columns.
        """
        if first.columns is None:
            raise ProviderContractError("the first batch has no columns")
        self.total = first.total_rows
        writer = open_writer(
            self.ext,
            stream,
            first.columns,
            time_zone=self.task["time_zone"],
            max_bytes=self.ctx.settings.file_size_cap_bytes,
        )
        return writer, _Stream(
            first.schema_hash, first.snapshot_token, BatchConverter(first.columns)
        )

    def _prefetch(self, fetcher: BatchFetcher, batch: Batch, fixed: _Stream) -> InFlight | None:
        """Check the batch against the attempt, and start fetching the next one.

        Raises:
            SchemaChanged: the batch's ``schemaHash`` differs from the first batch's.
            ProviderContractError: ``hasMore`` without a new cursor.
        """
        self.watchdog.check()
        if batch.schema_hash != fixed.columns_hash:
            raise SchemaChanged(
                f"schemaHash changed from {fixed.columns_hash} to {batch.schema_hash}"
            )
        if not batch.has_more:
            return None
        fetcher.cursors.add(batch.next_cursor, self.batch_no, len(batch.rows))
        return fetcher.submit(batch.next_cursor, fixed.snapshot)

    def _write_batch(
        self, writer: ExportWriter, converter: BatchConverter, batch: Batch, max_rows: int
    ) -> None:
        """Convert and write one batch, and write progress.

        Raises:
            RowLimitExceeded: the export passes the type's ``max_rows``.
            PermanentExportError: a row does not fit its columns (see :meth:`_convert`).
            StorageError: the file cannot be written.
        """
        self.phase = Phase.RENDER
        if self.processed + len(batch.rows) > max_rows:
            raise RowLimitExceeded(f"more than {max_rows:,} rows (the type's max_rows)")
        self._write_typed(writer, self._convert(batch, converter))
        self.processed += len(batch.rows)
        self._progress()

    def _write_typed(self, writer: ExportWriter, typed: list[list[Any]]) -> None:
        """Write one batch of typed columns (the file's writer, or a shard's part writer).

        Raises:
            StorageError: the file cannot be written.
        """
        try:
            writer.write_columns(typed)
        except OSError as exc:
            raise StorageError(f"cannot write the file: {exc}") from exc

    def _next_batch(self, fetcher: BatchFetcher, flight: InFlight, previous: Batch) -> Batch:
        """Wait for the batch that follows ``previous``."""
        self.phase = Phase.FETCH
        self.cursor = previous.next_cursor
        self.batch_no += 1
        return fetcher.wait(flight)

    def _finish(self, writer: ExportWriter, stream: BinaryIO) -> tuple[WriterStats, int]:
        """Close the file and make it visible under its key.

        Returns:
            ``(writer stats, size in bytes)``.
        """
        self.phase = Phase.STORE
        self._progress(force=True)
        stats = writer.close()
        return stats, self._store(stream)

    def _store(self, stream: BinaryIO) -> int:
        """Close the written file's stream and commit it under the attempt's key (both
        the single-stream and the sharded path end here).

        Returns:
            The file's size in bytes.

        Raises:
            StorageError: the store cannot commit it.
            ExportCancelled, LeaseLost, ...: from the watchdog, checked before the commit.
        """
        stream.close()
        self.watchdog.check()
        return self.ctx.storage.commit(self.object_key)

    @property
    def content_type(self) -> str:
        """The file's MIME type."""
        return CONTENT_TYPES[self.ext]

    def _stored(
        self, stats: WriterStats, size: int, converter: BatchConverter
    ) -> repository.StoredFile:
        """What the commit records: key, name, type, size, rows and the warning."""
        return self._stored_with(stats, size, converter.notes())

    def _stored_with(
        self, stats: WriterStats, size: int, notes: Sequence[str]
    ) -> repository.StoredFile:
        """:meth:`_stored` with the converter's notes given as a list."""
        warning = _warning(stats, notes)
        if warning:
            log.warning("export succeeded with changes: %s", warning, extra=self._log())
        metrics.ROWS_PROCESSED.labels(self.task["export_type"]).inc(self.processed)
        metrics.STORAGE_BYTES.inc(size)
        return repository.StoredFile(
            object_key=self.object_key,
            file_name=self.file_name,
            content_type=CONTENT_TYPES[self.ext],
            size_bytes=size,
            row_count=self.processed,
            warning=warning,
        )

    def _convert(self, batch: Batch, converter: BatchConverter) -> list[list[Any]]:
        """One batch of provider rows -> typed columns; a bad row fails the export.

        A batch whose values hold a float (a number orjson may have rounded) is decoded
        again exactly (:meth:`Batch.exact_rows`) and converted from that.

        Raises:
            PermanentExportError: ``PROVIDER_CONTRACT`` when a row is not a JSON object
                (with ``rowFormat: "array"``: not an array of one value per column)
                or a declared column is in no row of the batch (naming the column and
                the unknown keys the rows carry), ``INVALID_VALUE`` when a value does not
                fit its column (the message names the row number within the export and
                the column key).
        """
        try:
            try:
                return converter.columns_of(batch.rows, batch.arrays)
            except InexactNumber:
                return converter.columns_of(batch.exact_rows(), batch.arrays)
        except MissingColumns as exc:
            raise ProviderContractError(exc.describe(self.batch_no)) from None
        except InvalidRow as exc:
            row = self.processed + exc.index + 1
            if exc.column is None:
                raise ProviderContractError(f"row {row} is {exc.message}") from None
            raise PermanentExportError(
                f"row {row}, column {exc.column}: {exc.message}", code="INVALID_VALUE"
            ) from None

    def _progress(self, *, force: bool = False, shards: tuple[int, int] | None = None) -> None:
        """Write rows done, total and phase (and a sharded export's shard counts), at most
        every ``progress_every_seconds`` unless ``force``; a lost lease stops the attempt.
        """
        now = time.monotonic()
        if not force and now - self._last_progress < self.ctx.settings.task.progress_every_seconds:
            return
        self._last_progress = now
        with self.engine.begin() as conn:
            ok = repository.update_progress(
                conn,
                self.task_id,
                self.version,
                self.owner,
                processed=self.processed,
                total=self.total,
                phase=self.phase,
                shards=shards,
            )
        if not ok:
            self.watchdog.abort("lease")
            self.watchdog.check()

    # ------------------------------------------------------------------ settle

    def _commit(self, stored: repository.StoredFile, started: float) -> AttemptOutcome:
        """RUNNING -> SUCCEEDED, fenced by lease owner, version and deadline.

        Raises:
            DeadlinePassed: the deadline passed before the commit (transient).
            LeaseLost: the commit touched no row otherwise.
        """
        with self.engine.begin() as conn:
            ok = repository.commit_success(
                conn,
                self.task_id,
                self.version,
                self.owner,
                stored,
                retention_seconds=self.ctx.settings.task.retention_days * 86400,
            )
        if not ok:
            with self.engine.connect() as conn:
                late = repository.deadline_passed(conn, self.task_id)
            if late:
                raise DeadlinePassed("execution ran past its deadline before commit")
            raise LeaseLost("commit touched no row: the attempt lost its lease")
        if self.sharded is not None:
            self.sharded.cleanup()
        metrics.TASK_DURATION.labels(self.task["export_type"], self.ext).observe(
            time.perf_counter() - started
        )
        log.info(
            "export succeeded: %d rows, %d bytes",
            stored.row_count,
            stored.size_bytes,
            extra=self._log(),
        )
        return AttemptOutcome.SUCCEEDED

    def _discard(self) -> None:
        """Delete the attempt's partial or uncommitted file (every failure path)."""
        try:
            self.ctx.storage.delete(self.object_key)
        except Exception:  # the reconciler's orphan scan removes it later
            log.warning("could not delete the partial file", extra=self._log(), exc_info=True)

    def _release(self) -> AttemptOutcome:
        with self.engine.begin() as conn:
            ok = repository.release_for_shutdown(
                conn, self.task_id, self.version, self.owner, topic=self.ctx.topic, tag=COMMAND_TAG
            )
        log.info("shutting down: attempt handed back for another worker", extra=self._log())
        return AttemptOutcome.RELEASED if ok else AttemptOutcome.LEASE_LOST

    def _settle_cancel(self) -> AttemptOutcome:
        with self.engine.begin() as conn:
            ok = repository.finish_cancelled(conn, self.task_id, self.version, self.owner)
        if ok and self.sharded is not None:
            self.sharded.cleanup()
        log.info(
            "export cancelled" if ok else "cancel arrived after the lease was lost",
            extra=self._log(),
        )
        return AttemptOutcome.CANCELLED if ok else AttemptOutcome.LEASE_LOST

    def _settle_failure(self, exc: ExportFailure) -> AttemptOutcome:
        cursor = f" (cursor {self.cursor[:40]})" if self.cursor else ""
        where = self.location or f"batch {max(self.batch_no, 1)}{cursor}"
        message = f"{self.phase.value}: {where}: {exc.message}"
        with self.engine.begin() as conn:
            outcome = repository.record_failure(
                conn,
                self.task_id,
                self.version,
                self.owner,
                code=exc.code,
                message=message,
                retry=not exc.permanent,
                backoff_seconds=self.ctx.settings.task.retry_backoff_seconds,
                jitter=self.ctx.settings.task.retry_jitter,
                topic=self.ctx.topic,
                tag=COMMAND_TAG,
            )
        level = logging.WARNING if outcome is AttemptEnd.RETRY else logging.ERROR
        log.log(level, "attempt failed (%s): %s", outcome, message, extra=self._log())
        if outcome is None:
            return AttemptOutcome.LEASE_LOST
        if self.sharded is not None and exc.code in RETRY_CANNOT_HELP:
            # A retry meets the same limit again: the parts could never be reused.
            self.sharded.cleanup(forget_counts=True)
        return AttemptOutcome(outcome.value)

    def _log(self) -> dict[str, Any]:
        return {
            "taskId": self.task["task_no"],
            "dispatchVersion": self.version,
            "exportType": self.task["export_type"],
            "tenantId": self.task["tenant_id"],
            "traceId": self.task["trace_id"],
        }
