"""One execution attempt of an export: fetch, render, store, commit (seed 002 §8.3-§9.5).

The attempt pages through the provider with the keyset cursor and snapshot token,
streams rows into the writer and stores the file. Every fetch, the first one too, runs
in the attempt's fetch thread: while the writer renders batch N, batch N+1 is already
being fetched (one batch in flight, so memory stays bounded), and the attempt's own
thread waits for a fetch in slices of at most 0.5 s, checking the watchdog (cancel,
deadline, lease, shutdown) and the batch's time limit between slices. When it stops
waiting it sets the fetch's abort event and does not wait for the fetch thread (a read
blocked inside it ends at the read timeout at worst, and its answer is never used), so
a fetch in flight never holds a cancel past the watchdog's poll plus half a second.
Progress is written at batch boundaries, at most once per
``task.progress_every_seconds``. Every failure path deletes the partial file and
ends the attempt as DESIGN.md says: permanent errors -> FAILED, transient errors ->
PENDING with ``dispatch_version + 1`` and backoff (or FAILED when attempts are used),
cancel -> CANCELLED, lost lease -> nothing written.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Engine

from export_center import metrics, repository
from export_center.columns import Column
from export_center.commands import COMMAND_TAG
from export_center.errors import (
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
from export_center.filenames import download_file_name
from export_center.provider_client import Batch, ProviderClient, ProviderRequest, too_slow
from export_center.registry import Registry
from export_center.settings import Settings
from export_center.states import Phase
from export_center.storage import Storage, file_extension, new_object_key
from export_center.values import BatchConverter, InexactNumber, InvalidRow, MissingColumns
from export_center.watchdog import Watchdog
from export_center.writers import open_writer

__all__ = ["ExportRun", "RunContext"]

log = logging.getLogger(__name__)

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
        fault: optional test hook called with a point name (``fetch``, ``render``,
            ``store``, ``before_commit``, ``after_commit``).
    """

    settings: Settings
    registry: Registry
    storage: Storage
    provider: ProviderClient
    topic: str
    self_url: str | None = None
    fault: Callable[[str], None] | None = None
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


_AWAIT_SLICE_SECONDS = 0.5
"""Longest wait for a fetch between two checks of the watchdog and the batch limit."""
_AWAIT_GRACE_SECONDS = 1.0
"""After the batch deadline, how long the attempt still waits for the fetch thread to
report the limit itself (its message names the last try); then it stops waiting."""


@dataclass(frozen=True, slots=True)
class _InFlight:
    """A fetch submitted to the attempt's fetch thread.

    Attributes:
        future: the fetch's result.
        deadline: ``time.monotonic()`` value when its time limit ends.
        seconds: the time limit (for the message).
    """

    future: Future[Batch]
    deadline: float
    seconds: float


class _CursorLog:
    """The cursors one attempt has sent, to refuse a provider that pages in a loop.

    A cursor that repeats any earlier cursor of the attempt (A -> B -> A) would send the
    same rows again until the row cap. Only a 16-byte BLAKE2b digest per cursor is kept
    (about 100 bytes with its dict entry, whatever the cursor's length).
    """

    def __init__(self) -> None:
        self._seen: dict[bytes, int] = {}

    def add(self, cursor: str | None, batch_no: int) -> None:
        """Record the ``nextCursor`` of batch ``batch_no`` (which said ``hasMore``).

        Raises:
            ProviderContractError: the cursor is missing or empty, or it repeats the
                cursor of an earlier batch (the message names both, cursor shortened).
        """
        if not cursor:
            raise ProviderContractError(f"batch {batch_no} says hasMore but has no nextCursor")
        digest = hashlib.blake2b(cursor.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        first = self._seen.get(digest)
        if first is not None:
            raise ProviderContractError(
                f"nextCursor {_short(cursor)} of batch {batch_no} repeats the cursor "
                f"already sent for batch {first} (the provider pages in a loop)"
            )
        self._seen[digest] = batch_no + 1


def _short(text: str, limit: int = 40) -> str:
    """``repr`` of ``text`` cut to ``limit`` characters (``'abc...'``)."""
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


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
        self.object_key = object_key or new_object_key(task["task_no"], self.ext)
        self.phase = Phase.FETCH
        self.batch_no = 0
        self.cursor: str | None = None
        self.processed = 0
        self.total: int | None = None
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

    def run(self) -> str:
        """Execute and settle the attempt.

        Returns:
            ``succeeded``, ``retry``, ``failed``, ``cancelled`` or ``lease_lost``.
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
            outcome = "lease_lost"
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

    # ------------------------------------------------------------------ produce

    def _produce(self) -> repository.StoredFile:
        etype = self.ctx.registry.get(self.task["export_type"])
        if etype is None:
            raise PermanentExportError(
                f"export type {self.task['export_type']} is no longer registered",
                code="UNKNOWN_EXPORT_TYPE",
            )
        settings = self.ctx.settings
        request = ProviderRequest(
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
        max_rows = etype.max_rows
        max_bytes = settings.file_size_cap_bytes
        time_limit = float(etype.batch_timeout_seconds or settings.provider.batch_timeout_seconds)
        stream = self.ctx.storage.open_write(self.object_key)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"fetch-{self.task_id}")
        abort = threading.Event()
        cursors = _CursorLog()
        writer = None
        try:
            self.batch_no = 1
            batch = self._await(self._submit(pool, request, None, None, abort, time_limit))
            if batch.columns is None:
                raise ProviderContractError("the first batch has no columns")
            columns: list[Column] = batch.columns
            schema_hash = batch.schema_hash
            snapshot = batch.snapshot_token
            self.total = batch.total_rows
            converter = BatchConverter(columns)
            writer = open_writer(
                self.ext,
                stream,
                columns,
                time_zone=self.task["time_zone"],
                max_bytes=max_bytes,
            )
            while True:
                self.watchdog.check()
                if batch.schema_hash != schema_hash:
                    raise SchemaChanged(
                        f"schemaHash changed from {schema_hash} to {batch.schema_hash}"
                    )
                pending: _InFlight | None = None
                if batch.has_more:
                    cursors.add(batch.next_cursor, self.batch_no)
                    pending = self._submit(
                        pool, request, batch.next_cursor, snapshot, abort, time_limit
                    )
                self.phase = Phase.RENDER
                self._fault("render")
                if self.processed + len(batch.rows) > max_rows:
                    raise RowLimitExceeded(f"more than {max_rows:,} rows (the type's max_rows)")
                typed = self._convert(batch, converter)
                try:
                    writer.write_columns(typed)
                except OSError as exc:
                    raise StorageError(f"cannot write the file: {exc}") from exc
                self.processed += len(batch.rows)
                self._progress()
                if pending is None:
                    break
                self.phase = Phase.FETCH
                self.cursor = batch.next_cursor
                self.batch_no += 1
                batch = self._await(pending)
            self.phase = Phase.STORE
            self._progress(force=True)
            self._fault("store")
            stats = writer.close()
            stream.close()
            self.watchdog.check()
            size = self.ctx.storage.commit(self.object_key)
        except BaseException:
            abort.set()  # the fetch thread stops at its next chunk; nobody waits for it
            pool.shutdown(wait=False, cancel_futures=True)
            if writer is not None:
                writer.abort()
            if not stream.closed:
                stream.close()
            raise
        pool.shutdown(wait=True)
        warning = _warning(stats, converter.notes())
        if warning:
            log.warning("export succeeded with changes: %s", warning, extra=self._log())
        metrics.ROWS_PROCESSED.labels(self.task["export_type"]).inc(self.processed)
        metrics.STORAGE_BYTES.inc(size)
        return repository.StoredFile(
            object_key=self.object_key,
            file_name=download_file_name(self.task["task_name"], self.ext),
            content_type=CONTENT_TYPES[self.ext],
            size_bytes=size,
            row_count=self.processed,
            warning=warning,
        )

    def _submit(
        self,
        pool: ThreadPoolExecutor,
        request: ProviderRequest,
        cursor: str | None,
        snapshot: str | None,
        abort: threading.Event,
        time_limit: float,
    ) -> _InFlight:
        """Start fetching one batch in the fetch thread (idle: the previous fetch ended).

        Args:
            time_limit: seconds the batch may take, retries included.
        """
        deadline = time.monotonic() + time_limit
        future = pool.submit(self._fetch, request, cursor, snapshot, abort, time_limit)
        return _InFlight(future, deadline, time_limit)

    def _fetch(
        self,
        request: ProviderRequest,
        cursor: str | None,
        snapshot: str | None,
        abort: threading.Event,
        time_limit: float,
    ) -> Batch:
        """The fetch thread's work: one batch, stopping when ``abort`` is set."""
        self.watchdog.check()
        self._fault("fetch")
        return self.ctx.provider.fetch(
            request,
            cursor=cursor,
            snapshot_token=snapshot,
            time_limit=time_limit,
            abort=abort,
        )

    def _await(self, flight: _InFlight) -> Batch:
        """Wait for a fetch, checking the watchdog and the batch limit every 0.5 s.

        Returns:
            The batch.

        Raises:
            ExportCancelled, DeadlinePassed, LeaseLost, WorkerStopping: from the
                watchdog, within 0.5 s of its flag.
            ProviderTooSlow: the batch's time limit passed (the fetch thread's own
                error when it reports within a second, else this thread's).
            ExportFailure: what the fetch raised.
        """
        give_up = flight.deadline + _AWAIT_GRACE_SECONDS
        while True:
            left = give_up - time.monotonic()
            try:
                return flight.future.result(timeout=max(0.0, min(_AWAIT_SLICE_SECONDS, left)))
            except TimeoutError:
                self.watchdog.check()
                if time.monotonic() >= give_up:
                    raise too_slow(flight.seconds) from None

    def _convert(self, batch: Batch, converter: BatchConverter) -> list[list[Any]]:
        """One batch of provider rows -> typed columns; a bad row fails the export.

        A batch whose values hold a float (a number orjson may have rounded) is decoded
        again exactly (:meth:`Batch.exact_rows`) and converted from that.

        Raises:
            PermanentExportError: ``PROVIDER_CONTRACT`` when a row is not a JSON object
                or a declared column is in no row of the batch (naming the column and
                the unknown keys the rows carry), ``INVALID_VALUE`` when a value does not
                fit its column (the message names the row number within the export and
                the column key).
        """
        try:
            try:
                return converter.columns_of(batch.rows)
            except InexactNumber:
                return converter.columns_of(batch.exact_rows())
        except MissingColumns as exc:
            raise ProviderContractError(exc.describe(self.batch_no)) from None
        except InvalidRow as exc:
            row = self.processed + exc.index + 1
            if exc.column is None:
                raise ProviderContractError(f"row {row} is not an object") from None
            raise PermanentExportError(
                f"row {row}, column {exc.column}: {exc.message}", code="INVALID_VALUE"
            ) from None

    def _progress(self, *, force: bool = False) -> None:
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
            )
        if not ok:
            self.watchdog.abort("lease")
            self.watchdog.check()

    def _fault(self, point: str) -> None:
        if self.ctx.fault is not None:
            self.ctx.fault(point)

    # ------------------------------------------------------------------ settle

    def _commit(self, stored: repository.StoredFile, started: float) -> str:
        self._fault("before_commit")
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
        self._fault("after_commit")
        metrics.TASK_DURATION.labels(self.task["export_type"], self.ext).observe(
            time.perf_counter() - started
        )
        log.info(
            "export succeeded: %d rows, %d bytes",
            stored.row_count,
            stored.size_bytes,
            extra=self._log(),
        )
        return "succeeded"

    def _discard(self) -> None:
        try:
            self.ctx.storage.delete(self.object_key)
        except Exception:  # the reconciler's orphan scan removes it later (002 §9.5)
            log.warning("could not delete the partial file", extra=self._log(), exc_info=True)

    def _release(self) -> str:
        with self.engine.begin() as conn:
            ok = repository.release_for_shutdown(
                conn, self.task_id, self.version, self.owner, topic=self.ctx.topic, tag=COMMAND_TAG
            )
        log.info("shutting down: attempt handed back for another worker", extra=self._log())
        return "released" if ok else "lease_lost"

    def _settle_cancel(self) -> str:
        with self.engine.begin() as conn:
            ok = repository.finish_cancelled(conn, self.task_id, self.version, self.owner)
        log.info(
            "export cancelled" if ok else "cancel arrived after the lease was lost",
            extra=self._log(),
        )
        return "cancelled" if ok else "lease_lost"

    def _settle_failure(self, exc: ExportFailure) -> str:
        cursor = f" (cursor {self.cursor[:40]})" if self.cursor else ""
        message = f"{self.phase.value}: batch {max(self.batch_no, 1)}{cursor}: {exc.message}"
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
        level = logging.WARNING if outcome == "retry" else logging.ERROR
        log.log(level, "attempt failed (%s): %s", outcome, message, extra=self._log())
        return outcome or "lease_lost"

    def _log(self) -> dict[str, Any]:
        return {
            "taskId": self.task["task_no"],
            "dispatchVersion": self.version,
            "exportType": self.task["export_type"],
            "tenantId": self.task["tenant_id"],
            "traceId": self.task["trace_id"],
        }
