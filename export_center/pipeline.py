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
attempt not counted), lost lease -> nothing written. An interruption outside the export
(the database did not answer while the lease lasted, a database error anywhere in the
attempt, the process paused past its lease or past a batch's time limit) is not the
export's fault: the task is handed back, the attempt not counted, the moment the
database answers (:class:`~export_center.attempt_writes.AttemptWrites`).

Every database write of the attempt goes through :class:`AttemptWrites`, which tries it
again through a database blip; the file is written through a stream that checks the
lease (:meth:`Watchdog.check`) before every write, so nothing reaches storage once the
lease may have been lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, BinaryIO

import orjson
from sqlalchemy import Engine

from export_center import metrics, repository
from export_center.attempt_writes import AttemptWrites
from export_center.batches import BatchConverter, InexactNumber, InvalidRow, MissingColumns
from export_center.errors import (
    RETRY_CANNOT_HELP,
    DatabaseUnavailable,
    ExportCancelled,
    ExportFailure,
    LeaseLost,
    PermanentExportError,
    ProviderContractError,
    ProviderTooSlow,
    StorageFull,
    TransientExportError,
    WorkerInterrupted,
    WorkerStopping,
)
from export_center.fetching import PageSizer
from export_center.filenames import content_disposition, download_file_name
from export_center.outages import is_database_blip
from export_center.provider_client import Batch, ProviderRequest
from export_center.registry import ExportType
from export_center.repository import AttemptEnd, Task
from export_center.run_context import CONTENT_TYPES, AttemptOutcome, RunContext, change_warning
from export_center.sharded import ShardedProducer
from export_center.single import SingleStreamProducer
from export_center.states import Phase
from export_center.storage import file_extension, new_object_key
from export_center.stream_guard import GuardedStream, storage_error
from export_center.watchdog import Watchdog
from export_center.writers import ExportWriter, WriterStats

__all__ = ["CONTENT_TYPES", "AttemptOutcome", "ExportRun", "RunContext"]

log = logging.getLogger(__name__)


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
        claimed_at: ``time.monotonic()`` just before the claim was sent (the start of
            the lease by this process's clock; default: now).
    """

    def __init__(
        self,
        engine: Engine,
        context: RunContext,
        task: Task,
        version: int,
        owner: str,
        *,
        object_key: str | None = None,
        claimed_at: float | None = None,
    ) -> None:
        self.engine = engine
        self.ctx = context
        self.task = task
        self.task_id: int = task.id
        self.version = version
        self.owner = owner
        self.ext = file_extension(task.format)
        self.object_key = object_key or new_object_key(
            task.task_no, self.ext, tenant=task.tenant_id
        )
        self.file_name = download_file_name(task.task_name, self.ext)
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
            claimed_at=claimed_at,
            name=task.task_no,
        )
        self.writes = AttemptWrites(
            engine,
            task=task,
            version=version,
            owner=owner,
            watchdog=self.watchdog,
            settings=settings,
            topic=context.topic,
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
            outcome = self._settle(started)
        except DatabaseUnavailable as exc:
            # Even the settle write got no answer for SETTLE_SECONDS: the task stays
            # RUNNING until its lease runs out, then the reconciler recovers it.
            log.error(
                "attempt could not be settled, the database did not answer: %s",
                exc,
                extra=self._log(),
            )
            outcome = AttemptOutcome.LEASE_LOST
        finally:
            self.watchdog.stop()
        metrics.TASKS_COMPLETED.labels(self.task.export_type, outcome).inc()
        return outcome

    def _settle(self, started: float) -> AttemptOutcome:
        """Produce and commit the file, or end the attempt by what stopped it.

        Raises:
            DatabaseUnavailable: a settle write got no answer (see :meth:`run`).
        """
        try:
            stored = self._produce()
            return self._commit(stored, started)
        except ExportCancelled:
            self._discard()
            return self._settle_cancel()
        except WorkerStopping:
            self._discard()
            return self._release()
        except WorkerInterrupted as exc:
            self._discard()
            return self._hand_back(exc.message)
        except LeaseLost as exc:
            self._discard()
            log.warning("attempt stopped without writing: %s", exc, extra=self._log())
            return AttemptOutcome.LEASE_LOST
        except ExportFailure as exc:
            self._discard()
            # During a shutdown the provider may vanish first (the embedded default
            # serves it): that is the shutdown, not the export's fault.
            if self.ctx.stopping.is_set():
                return self._release()
            paused = self._paused_during(exc)
            if paused:
                return self._hand_back(paused)
            return self._settle_failure(exc)
        except Exception as exc:
            self._discard()
            if is_database_blip(exc) or isinstance(exc, DatabaseUnavailable):
                # The database, not the export: hand back once it answers.
                return self._hand_back(f"a database error stopped the attempt: {_line(exc)}")
            # A bug or an unexpected library error: retried like a transient failure.
            log.exception("attempt crashed", extra=self._log())
            return self._settle_failure(
                TransientExportError(
                    f"internal error: {type(exc).__name__}: {exc}", code="INTERNAL_ERROR"
                )
            )

    def _paused_during(self, exc: ExportFailure) -> str | None:
        """The sentence of a process pause that made a batch run past its time limit,
        or None when ``exc`` is not such a failure (the provider is not blamed for the
        worker's own pause)."""
        if not isinstance(exc, ProviderTooSlow):
            return None
        etype = self.ctx.registry.get(self.task.export_type)
        limit = float(
            (etype.batch_timeout_seconds if etype is not None else None)
            or self.ctx.settings.provider.batch_timeout_seconds
        )
        paused = self.watchdog.paused_within(limit + self.watchdog.cancel_poll_seconds)
        if paused < limit / 2:
            return None
        return (
            f"this worker did not run for {paused:.0f} s (the process was stopped, its "
            f"machine paused or starved), so a batch passed its {limit:g} s time limit; "
            "the provider is not at fault"
        )

    def _produce(self) -> repository.StoredFile:
        """Fetch every batch, write the file and store it; the steps below in order."""
        etype = self._export_type()
        if etype.shards is not None:
            self.sharded = ShardedProducer(self, etype)
            return self.sharded.produce()
        return SingleStreamProducer(self, etype).produce()

    def open_file(self) -> BinaryIO:
        """Open the attempt's file for writing: the storage's stream behind a lease check
        before every write (:class:`GuardedStream`), storage errors made
        ``STORAGE_ERROR`` (``STORAGE_FULL`` semantics when the disk is full).

        Raises:
            StorageError: the storage cannot open it.
        """
        self.watchdog.check()
        try:
            raw = self.ctx.storage.open_write(
                self.object_key,
                content_type=CONTENT_TYPES[self.ext],
                content_disposition=content_disposition(self.file_name),
            )
        except OSError as exc:
            raise storage_error(exc, "cannot open the file") from exc
        return GuardedStream(raw, self.watchdog.check, "cannot write the file")  # type: ignore[return-value]

    # ------------------------------------------------------------------ steps

    def _export_type(self) -> ExportType:
        """The task's type as registered now (its provider address, batch size, caps).

        Raises:
            PermanentExportError: the type is gone, or the task's format is unknown.
        """
        etype = self.ctx.registry.get(self.task.export_type)
        if etype is None:
            raise PermanentExportError(
                f"export type {self.task.export_type} is no longer registered",
                code="UNKNOWN_EXPORT_TYPE",
            )
        if str(self.task.format).upper() not in ("CSV", "XLSX"):
            raise PermanentExportError(
                f"unknown file format {self.task.format!r} (csv or xlsx)",
                code="UNKNOWN_FORMAT",
            )
        return etype

    def _provider_request(self, etype: ExportType) -> ProviderRequest:
        """The identity part of every batch request of this attempt."""
        return ProviderRequest(
            export_type=etype.code,
            url=etype.base_url(self.ctx.self_url) + etype.provider_path,
            task_id=self.task.task_no,
            tenant_id=self.task.tenant_id,
            app_code=self.task.app_code,
            requested_by=self.task.requested_by,
            dispatch_version=self.version,
            parameters=orjson.loads(self.task.parameters_json),
            limit=etype.batch_size,
            trace_id=self.task.trace_id,
            time_zone=self.task.time_zone,
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

    def _write_typed(self, writer: ExportWriter, typed: list[list[Any]]) -> None:
        """Write one batch of typed columns (the file's writer, or a shard's part writer).

        Raises:
            StorageError: the file cannot be written.
        """
        try:
            writer.write_columns(typed)
        except OSError as exc:
            raise storage_error(exc, "cannot write the file") from exc

    def _store(self, stream: BinaryIO) -> int:
        """Close the written file's stream and commit it under the attempt's key (both
        the single-stream and the sharded path end here).

        Returns:
            The file's size in bytes.

        Raises:
            StorageError: the store cannot commit it.
            ExportCancelled, LeaseLost, ...: from the watchdog, checked before the close
                (the last bytes) and again right before the commit.
        """
        try:
            stream.close()
            self.watchdog.check()
            return self.ctx.storage.commit(self.object_key)
        except OSError as exc:
            raise storage_error(exc, "cannot store the file") from exc

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
        warning = change_warning(stats, notes)
        if warning:
            log.warning("export succeeded with changes: %s", warning, extra=self._log())
        metrics.ROWS_PROCESSED.labels(self.task.export_type).inc(self.processed)
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
        self.writes.progress(
            processed=self.processed, total=self.total, phase=self.phase, shards=shards
        )

    # ------------------------------------------------------------------ settle

    def _commit(self, stored: repository.StoredFile, started: float) -> AttemptOutcome:
        """RUNNING -> SUCCEEDED, fenced by lease owner, version and deadline.

        Raises:
            DeadlinePassed: the deadline passed before the commit (transient).
            LeaseLost: the commit touched no row otherwise.
            DatabaseUnavailable: the database did not answer (the file is deleted; the
                task is recovered by the reconciler).
        """
        try:
            self.writes.commit(
                stored, retention_seconds=self.ctx.settings.task.retention_days * 86400
            )
        except DatabaseUnavailable:
            self._discard()
            raise
        if self.sharded is not None:
            self.sharded.cleanup()
        metrics.TASK_DURATION.labels(self.task.export_type, self.ext).observe(
            time.perf_counter() - started
        )
        log.info(
            "export succeeded: %d rows, %d bytes",
            stored.row_count,
            stored.size_bytes,
            extra=self._log(),
        )
        return AttemptOutcome.SUCCEEDED

    @staticmethod
    def abandon_file(stream: BinaryIO) -> None:
        """Close a failed attempt's stream without the lease check (its object is
        deleted next); errors are ignored, the delete cleans up."""
        abandon_file(stream)

    def _discard(self) -> None:
        """Delete the attempt's partial or uncommitted file (every failure path)."""
        try:
            self.ctx.storage.delete(self.object_key)
        except Exception:  # the reconciler's orphan scan removes it later
            log.warning("could not delete the partial file", extra=self._log(), exc_info=True)

    def _release(self) -> AttemptOutcome:
        ok = self.writes.release()
        log.info("shutting down: attempt handed back for another worker", extra=self._log())
        return AttemptOutcome.RELEASED if ok else AttemptOutcome.LEASE_LOST

    def _hand_back(self, reason: str) -> AttemptOutcome:
        """Hand the task back after an interruption outside the export (not counted),
        written the moment the database answers; ``reason`` goes to the log and the
        audit trail."""
        log.warning("attempt interrupted: %s; handing the task back", reason, extra=self._log())
        if self.writes.hand_back(reason):
            log.info("attempt handed back: the task is queued again", extra=self._log())
            return AttemptOutcome.RELEASED
        log.warning(
            "the task was no longer this attempt's (another worker has it)", extra=self._log()
        )
        return AttemptOutcome.LEASE_LOST

    def _settle_cancel(self) -> AttemptOutcome:
        ok = self.writes.cancel()
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
        outcome = self.writes.record_failure(
            code=exc.code,
            message=message,
            retry=not exc.permanent,
            storage_full=isinstance(exc, StorageFull),
        )
        if outcome is None:
            log.warning(
                "attempt ended (%s) after it had lost its lease; nothing written",
                message,
                extra=self._log(),
            )
            return AttemptOutcome.LEASE_LOST
        level = logging.WARNING if outcome is AttemptEnd.RETRY else logging.ERROR
        log.log(level, "attempt failed (%s): %s", outcome, message, extra=self._log())
        if self.sharded is not None and exc.code in RETRY_CANNOT_HELP:
            # A retry meets the same limit again: the parts could never be reused.
            self.sharded.cleanup(forget_counts=True)
        return AttemptOutcome(outcome.value)

    def _log(self) -> dict[str, Any]:
        return {
            "taskId": self.task.task_no,
            "dispatchVersion": self.version,
            "exportType": self.task.export_type,
            "tenantId": self.task.tenant_id,
            "traceId": self.task.trace_id,
        }


def _line(exc: BaseException) -> str:
    """The first line of an error's text (at most 300 characters)."""
    text = str(getattr(exc, "orig", None) or exc) or type(exc).__name__
    return text.splitlines()[0][:300]


def abandon_file(stream: BinaryIO) -> None:
    """Close a failed attempt's stream without the lease check (its object is deleted
    next); errors are ignored, the delete cleans up."""
    try:
        abandon = getattr(stream, "abandon", None)
        if abandon is not None:
            abandon()
        elif not stream.closed:
            stream.close()
    except Exception:  # noqa: BLE001 - the object is deleted by the failure path
        log.debug("closing a failed stream raised", exc_info=True)
