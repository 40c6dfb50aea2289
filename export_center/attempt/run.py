"""One execution attempt of an export, run to its end and settled.

:class:`ExportRun` builds the claimed attempt (:class:`~export_center.attempt.steps.
Attempt`, its public steps), picks the producer its export type needs (the
single-stream one, :mod:`export_center.attempt.single`, or the sharded one,
:mod:`export_center.attempt.sharded`), and settles the task row by how the attempt
ended. The producers page through the provider with the keyset cursor and snapshot
token, stream rows into the writer and store the file; progress is written at batch
boundaries, at most once per ``task.progress_every_seconds``.

Every failure path deletes the partial file and ends the attempt: permanent errors ->
FAILED, transient errors -> PENDING with ``dispatch_version + 1`` and backoff (or FAILED
when attempts are used), cancel -> CANCELLED, shutdown -> handed back (PENDING, the
attempt not counted), lost lease -> nothing written. An interruption outside the export
(the database did not answer while the lease lasted, a database error anywhere in the
attempt, the process paused past its lease or past a batch's time limit) is not the
export's fault: the task is handed back, the attempt not counted, the moment the
database answers (:class:`~export_center.attempt.writes.AttemptWrites`).

Every database write of the attempt goes through :class:`AttemptWrites`, which tries it
again through a database blip; the file is written through a stream that checks the
lease (:meth:`Watchdog.check`) before every write, so nothing reaches storage once the
lease may have been lost.
"""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

from sqlalchemy import Engine

from export_center import metrics, repository
from export_center.attempt.context import AttemptOutcome, RunContext
from export_center.attempt.distributed import DistributedProducer
from export_center.attempt.sharded import ShardedProducer
from export_center.attempt.single import SingleStreamProducer
from export_center.attempt.steps import Attempt, Producer
from export_center.errors import (
    RETRY_CANNOT_HELP,
    DatabaseUnavailable,
    ExportCancelled,
    ExportFailure,
    LeaseLost,
    ProviderTooSlow,
    StorageFull,
    TransientExportError,
    WorkerInterrupted,
    WorkerStopping,
)
from export_center.outages import is_database_blip
from export_center.repository import AttemptEnd, Task
from export_center.writers.file_mark import mark_of, marked

__all__ = ["ExportRun"]

log = logging.getLogger(__name__)


class ExportRun:
    """Runs one claimed attempt to its end: picks its producer, settles its task row.

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

    Attributes:
        attempt: the claimed attempt (an instance of :attr:`steps`).
        producer: the producer picked for it, once the export type was read.
    """

    steps: ClassVar[type[Attempt]] = Attempt
    """The class of the attempt's steps. A subclass of the run that names a subclass of
    :class:`Attempt` here changes what a step does for every producer (the seam through
    which :mod:`export_center.testing` injects faults); :meth:`commit` is the settle
    step such a subclass may wrap."""

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
        self.attempt = self.steps(
            engine, context, task, version, owner, object_key=object_key, claimed_at=claimed_at
        )
        self.ctx = context
        self.task = task
        self.producer: Producer | None = None

    # ------------------------------------------------------------------ driver

    def run(self) -> AttemptOutcome:
        """Execute and settle the attempt; never raises.

        Returns:
            How the attempt ended: ``succeeded``, ``retry`` (transient failure, another
            attempt follows), ``failed``, ``cancelled``, ``released`` (handed back on
            shutdown) or ``lease_lost`` (another attempt owns the task; nothing written).
        """
        started = time.perf_counter()
        self.attempt.watchdog.start()
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
            self.attempt.watchdog.stop()
        metrics.TASKS_COMPLETED.labels(self.task.export_type, outcome).inc()
        return outcome

    def _settle(self, started: float) -> AttemptOutcome:
        """Produce and commit the file, or end the attempt by what stopped it.

        Raises:
            DatabaseUnavailable: a settle write got no answer (see :meth:`run`).
        """
        try:
            stored = self._produce()
            return self.commit(stored, started)
        except ExportCancelled:
            self.attempt.discard()
            return self._settle_cancel()
        except WorkerStopping:
            self.attempt.discard()
            return self._release()
        except WorkerInterrupted as exc:
            self.attempt.discard()
            return self._hand_back(exc.message)
        except LeaseLost as exc:
            self.attempt.discard()
            log.warning("attempt stopped without writing: %s", exc, extra=self._log())
            return AttemptOutcome.LEASE_LOST
        except ExportFailure as exc:
            self.attempt.discard()
            # During a shutdown the provider may vanish first (the embedded default
            # serves it): that is the shutdown, not the export's fault.
            if self.ctx.stopping.is_set():
                return self._release()
            paused = self._paused_during(exc)
            if paused:
                return self._hand_back(paused)
            return self._settle_failure(exc)
        except Exception as exc:
            self.attempt.discard()
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
        watchdog = self.attempt.watchdog
        paused = watchdog.paused_within(limit + watchdog.cancel_poll_seconds)
        if paused < limit / 2:
            return None
        return (
            f"this worker did not run for {paused:.0f} s (the process was stopped, its "
            f"machine paused or starved), so a batch passed its {limit:g} s time limit; "
            "the provider is not at fault"
        )

    def _produce(self) -> repository.StoredFile:
        """Pick the producer the export type needs and let it make the stored file.

        Raises:
            PermanentExportError: the type is gone or the format unknown.
            ExportFailure, ExportCancelled, ...: what the producer raised.
        """
        etype = self.attempt.export_type()
        if etype.shards is not None and self.ctx.settings.task.distributed_shards:
            self.producer = DistributedProducer(self.attempt, etype)
        elif etype.shards is not None:
            self.producer = ShardedProducer(self.attempt, etype)
        else:
            self.producer = SingleStreamProducer(self.attempt, etype)
        t = self.task  # XLSX files carry task, requester and time (writers.file_mark)
        footer = etype.files.trace_footer
        with marked(mark_of(t.task_no, t.tenant_id, t.requested_by, t.requested_at, footer)):
            return self.producer.produce()

    # ------------------------------------------------------------------ settle

    def commit(self, stored: repository.StoredFile, started: float) -> AttemptOutcome:
        """RUNNING -> SUCCEEDED, fenced by lease owner, version and deadline; then the
        producer's leftovers go (:meth:`Producer.cleanup`).

        Args:
            stored: what the producer stored.
            started: ``time.perf_counter()`` at the start of :meth:`run` (the duration
                metric).

        Returns:
            ``succeeded``.

        Raises:
            DeadlinePassed: the deadline passed before the commit (transient).
            LeaseLost: the commit touched no row otherwise.
            DatabaseUnavailable: the database did not answer (the file is deleted; the
                task is recovered by the reconciler).
        """
        try:
            self.attempt.writes.commit(
                stored, retention_seconds=self.ctx.settings.task.retention_days * 86400
            )
        except DatabaseUnavailable:
            self.attempt.discard()
            raise
        if self.producer is not None:
            self.producer.cleanup()
        metrics.TASK_DURATION.labels(self.task.export_type, self.attempt.file_format.name).observe(
            time.perf_counter() - started
        )
        log.info(
            "export succeeded: %d rows, %d bytes",
            stored.row_count,
            stored.size_bytes,
            extra=self._log(),
        )
        return AttemptOutcome.SUCCEEDED

    def _release(self) -> AttemptOutcome:
        ok = self.attempt.writes.release()
        log.info("shutting down: attempt handed back for another worker", extra=self._log())
        return AttemptOutcome.RELEASED if ok else AttemptOutcome.LEASE_LOST

    def _hand_back(self, reason: str) -> AttemptOutcome:
        """Hand the task back after an interruption outside the export (not counted),
        written the moment the database answers; ``reason`` goes to the log and the
        audit trail."""
        log.warning("attempt interrupted: %s; handing the task back", reason, extra=self._log())
        if self.attempt.writes.hand_back(reason):
            log.info("attempt handed back: the task is queued again", extra=self._log())
            return AttemptOutcome.RELEASED
        log.warning(
            "the task was no longer this attempt's (another worker has it)", extra=self._log()
        )
        return AttemptOutcome.LEASE_LOST

    def _settle_cancel(self) -> AttemptOutcome:
        ok = self.attempt.writes.cancel()
        if ok and self.producer is not None:
            self.producer.cleanup()
        log.info(
            "export cancelled" if ok else "cancel arrived after the lease was lost",
            extra=self._log(),
        )
        return AttemptOutcome.CANCELLED if ok else AttemptOutcome.LEASE_LOST

    def _settle_failure(self, exc: ExportFailure) -> AttemptOutcome:
        attempt = self.attempt
        cursor = f" (cursor {attempt.cursor[:40]})" if attempt.cursor else ""
        where = attempt.location or f"batch {max(attempt.batch_no, 1)}{cursor}"
        message = f"{attempt.phase.value}: {where}: {exc.message}"
        outcome = attempt.writes.record_failure(
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
        if self.producer is not None and exc.code in RETRY_CANNOT_HELP:
            # A retry meets the same limit again: the parts could never be reused.
            self.producer.cleanup(forget_counts=True)
        return AttemptOutcome(outcome.value)

    def _log(self) -> dict[str, Any]:
        return self.attempt.log_fields()


def _line(exc: BaseException) -> str:
    """The first line of an error's text (at most 300 characters)."""
    text = str(getattr(exc, "orig", None) or exc) or type(exc).__name__
    return text.splitlines()[0][:300]
