"""Distributed shards: the coordinating attempt of a sharded export (``task.distributed_shards``).

The worker that claimed the task keeps the task's lease for the whole export and
*coordinates*; the shards are units of work that any worker of the cluster claims
(:mod:`export_center.repository.shard_units`), so one export uses the cluster instead of
one interpreter:

1. **Plan** as a sharded attempt does (:class:`~export_center.attempt.sharded.
   ShardedProducer`): the shard rows, reused with their checkpoints on a resume.
2. **Dispatch.** One wake-up per shard beyond those the coordinator runs itself, up to
   the type's ``parallel``, goes into the outbox in one fenced transaction (tag
   ``EXPORT_SHARD``); the publisher sends them like commands and any worker that gets
   one claims a shard (:mod:`export_center.attempt.shard_unit`) and, once it is done,
   the next free one.
3. **Run and watch.** ``task.local_shards`` threads of the coordinator claim and run
   shards like any worker (their leases live with the task's: the watchdog renews both).
   Every :data:`POLL_SECONDS` the coordinator checks its watchdog (cancel, lease,
   deadline, shutdown), reads the shard rows, writes the task's progress from them,
   checks the row and size caps on their sums, and starts a thread of its own for a
   shard nobody runs (its runner died and its lease ran out, or no other worker took the
   wake-up within :data:`TAKEOVER_SECONDS`). A shard whose runner failed ends the
   attempt naming it: ``FAILED`` as a permanent failure, ``FAILED_RETRY`` as a transient
   one (the task is retried with backoff and resumes every shard from its checkpoint).
4. **Finalize** once every shard is ``DONE``: the checkpoints are read back from the
   database, their columns and schema hashes must agree, and the parts are joined in
   shard order exactly as a threaded attempt joins them, so the file is byte-identical
   to a sequential run. The commit is fenced by the task's lease, so it happens once;
   when the coordinator dies the reconciler recovers the task like any other, and the
   next attempt finds every shard done and only assembles.

Cancel: the coordinator's watchdog sees it within 2 s and settles the task; each
runner's watchdog polls the same flag and stops within 2 s, storing nothing more.
"""

from __future__ import annotations

import contextvars
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor

from sqlalchemy import Connection

from export_center import metrics
from export_center.attempt.ceiling import check_row_caps
from export_center.attempt.shard_state import ShardState, columns_of
from export_center.attempt.sharded import ShardedProducer, Stopped
from export_center.attempt.shards import Shard
from export_center.errors import (
    ExportFailure,
    FileTooLarge,
    PermanentExportError,
    SchemaChanged,
    TransientExportError,
)
from export_center.repository import ShardCheckpoint, ShardStatus, load_shards, shard_units
from export_center.repository.shard_units import FAILED, FAILED_RETRY, ShardUnit
from export_center.repository.shards import hold_attempt
from export_center.states import Phase

__all__ = ["POLL_SECONDS", "TAKEOVER_SECONDS", "DistributedProducer", "split_failure"]

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25
"""How often the coordinator reads the shard rows and checks its watchdog."""
TAKEOVER_SECONDS = 5.0
"""How long a free shard waits for another worker before the coordinator runs it."""


def split_failure(message: str | None) -> tuple[str | None, str]:
    """``(location, cause)`` of a shard runner's failure message ``"shard K, page N
    (cursor C): cause"``; ``(None, message)`` when it names no place."""
    text = message or "the shard's runner failed"
    if text.startswith("shard ") and ": " in text:
        location, cause = text.split(": ", 1)
        return location, cause
    return None, text


class DistributedProducer(ShardedProducer):
    """The coordinator of a sharded attempt whose shards run on the cluster (module
    docstring); a :class:`~export_center.attempt.steps.Producer` like its parent, whose
    planning, resume, restart and finalize it keeps."""

    def _run_shards(self, plan: list[Shard], checkpoints: list[ShardCheckpoint]) -> None:
        run = self.run
        self.states = [ShardState(cp, plan[cp.shard_no]) for cp in checkpoints]
        self._adopt_columns()
        todo = [s.cp for s in self.states if not s.cp.done]
        if not todo:
            return
        spec = self.etype.shards
        parallel = max(1, spec.parallel if spec else 1)
        local = min(self.settings.local_shards, parallel)
        self._wake(todo[local:parallel])
        pool = ThreadPoolExecutor(
            max_workers=max(local, 1), thread_name_prefix=f"shard-{run.task_id}"
        )
        futures: set[Future[None]] = set()
        running: set[int] = set()  # shards this coordinator's threads run now
        free_since: float | None = None
        last_progress = 0.0
        try:
            while True:
                for future in [f for f in futures if f.done()]:
                    futures.discard(future)
                    error = future.exception()
                    if error is not None and not isinstance(error, Stopped):
                        raise self._first(error)
                run.watchdog.check()
                board = self._board()
                self._follow(board, running)
                if all(u.status == ShardStatus.DONE for u in board):
                    break
                free = [u for u in board if u.status == ShardStatus.PENDING and not u.leased]
                held = sum(u.status == ShardStatus.PENDING and u.leased for u in board)
                now = time.monotonic()
                free_since = (free_since or now) if free else None
                wanted = local
                if free and free_since is not None and now - free_since >= TAKEOVER_SECONDS:
                    wanted = max(local, 1)  # nobody else runs them: take one over
                if free and held < parallel and len(futures) < wanted:
                    futures.add(pool.submit(contextvars.copy_context().run, self._local, running))
                if now - last_progress >= max(self.settings.progress_every_seconds, 1.0):
                    self._progress(board)
                    last_progress = now
                time.sleep(POLL_SECONDS)
        finally:
            self.stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
        for future in futures:
            error = future.exception()
            if error is not None and not isinstance(error, Stopped):
                raise self._first(error)
        self._collect(plan)

    # ------------------------------------------------------------------ local threads

    def _local(self, running: set[int]) -> None:
        """A coordinator thread: claim a free shard, run it, and the next, until none."""
        run = self.run
        spec = self.etype.shards
        while True:
            self._check()
            claimed = run.writes.while_leased(
                lambda conn: shard_units.claim_shard(
                    conn,
                    run.task_id,
                    run.version,
                    run.owner,
                    lease_seconds=self.settings.lease_seconds,
                    parallel=max(1, spec.parallel if spec else 1),
                ),
                "claim a shard",
            )
            if claimed is None:
                return
            state = ShardState(claimed, self.states[claimed.shard_no].shard)
            with self.lock:
                self.states[claimed.shard_no] = state
                running.add(claimed.shard_no)
            outcome = "stopped"
            try:
                self._run_shard(state)
                outcome = "done"
            except ExportFailure:
                outcome = "failed"
                raise
            finally:
                with self.lock:
                    running.discard(claimed.shard_no)
                metrics.SHARDS_RUN.labels(run.task.export_type, "coordinator", outcome).inc()

    # ------------------------------------------------------------------ the cluster's

    def _wake(self, shards: list[ShardCheckpoint]) -> None:
        """One outbox wake-up per shard to start elsewhere (fenced by the task's lease)."""
        if not shards:
            return
        run = self.run
        topic = run.ctx.topic

        def work(conn: Connection) -> int:
            if not hold_attempt(conn, run.task_id, run.version, run.owner):
                return -1
            attempts = {
                u.shard_no: u.attempt_count for u in shard_units.shard_board(conn, run.task_id)
            }
            return sum(
                shard_units.insert_shard_wake(
                    conn, run.task, cp.shard_no, attempts.get(cp.shard_no, 0), topic=topic
                )
                is not None
                for cp in shards
            )

        woken = run.writes.while_leased(work, "write the shard wake-ups")
        if woken < 0:
            run.watchdog.abort("lease")
            run.watchdog.check()
        log.info(
            "%d shards of %d offered to the cluster",
            woken,
            len(self.states),
            extra=run.log_fields(),
        )

    def _board(self) -> list[ShardUnit]:
        run = self.run
        return run.writes.while_leased(
            lambda conn: shard_units.shard_board(conn, run.task_id), "read the shards"
        )

    def _follow(self, board: list[ShardUnit], running: set[int]) -> None:
        """Take in what other workers did: their rows and estimates (progress, caps), and
        end the attempt when one of their shards failed."""
        run = self.run
        with self.lock:
            for unit in board:
                if unit.shard_no in running:
                    continue
                state = self.states[unit.shard_no]
                state.cp.rows_written = unit.rows_written
                state.cp.bytes = unit.bytes
                if unit.status == ShardStatus.DONE:
                    state.cp.status = ShardStatus.DONE
                if unit.total is not None:
                    state.total = unit.total
            processed = sum(s.rows for s in self.states)
            size = sum(s.cp.bytes for s in self.states)
        for unit in board:
            if unit.status in (FAILED, FAILED_RETRY):
                location, cause = split_failure(unit.failure_message)
                with self.lock:
                    if run.location is None:
                        run.location = location or f"shard {unit.key}"
                error_type = PermanentExportError if unit.status == FAILED else TransientExportError
                raise error_type(cause, code=unit.failure_code or None)
        check_row_caps(self.etype, run.task, processed)
        cap = run.ctx.settings.file_size_cap_bytes
        summed = run.file_format.parts_sum_to_file and not run.renders_parts
        if summed and cap is not None and size > cap:
            raise FileTooLarge(f"the file passes the size cap of {cap:,} bytes")

    def _progress(self, board: list[ShardUnit]) -> None:
        with self.lock:
            processed = sum(s.rows for s in self.states)
        done = sum(u.status == ShardStatus.DONE for u in board)
        self.run.writes.progress(
            processed=processed, total=self.total, phase=Phase.FETCH, shards=(done, len(board))
        )

    # ------------------------------------------------------------------ finalize

    def _collect(self, plan: list[Shard]) -> None:
        """Every shard is done: read the checkpoints back (other workers wrote most of
        them) for the finalize, and check that every shard had the same columns."""
        run = self.run
        checkpoints = run.writes.while_leased(
            lambda conn: load_shards(conn, run.task_id), "read the checkpoints"
        )
        self.states = [ShardState(cp, plan[cp.shard_no]) for cp in checkpoints]
        self.columns = None
        self._adopt_columns()
        hashes = {(s.cp.stats or {}).get("schemaHash") for s in self.states if s.cp.rows_written}
        hashes.discard(None)
        if len(hashes) > 1:
            raise SchemaChanged(
                f"the shards' schemaHash differ ({', '.join(sorted(map(str, hashes)))})"
            )

    def _adopt_columns(self) -> None:
        for state in self.states:
            stats = state.cp.stats or {}
            if self.columns is None and stats.get("columns"):
                self.columns = columns_of(stats["columns"])
                self.schema_hash = stats.get("schemaHash")
