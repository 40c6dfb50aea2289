"""A shard runner: one worker running shards of another worker's distributed export.

A worker that receives a shard wake-up (``kind: "shard"``, tag ``EXPORT_SHARD``) calls
:func:`run_shard_units`. It claims a shard of that task's dispatch version
(:func:`~export_center.repository.shard_units.claim_shard`: the one the wake-up names
when it is free, else the first free one, never more than the type's ``parallel``
across the cluster), runs it exactly as a shard thread of a threaded attempt runs it
(same pages, same segments, same checkpoints: the part is the same bytes whoever writes
it), then claims the next free shard, until none is left, unless an export waits for a
worker: then it hands its consumer slot back, so a busy cluster starts waiting exports
before it helps a running one further (the coordinator goes on with its own threads).

Each claim has its own lease (``task.shard_lease_seconds``), kept by a
:class:`~export_center.attempt.watchdog.ShardWatchdog`: it renews the shard's lease every
third of it at most and polls the task's cancel flag and deadline like a task's
watchdog; a renewal that touches no row (another worker took the shard after the lease
ran out, the attempt ended or moved to another version) stops the runner before it
stores anything more. Every checkpoint is fenced by the shard's lease owner and the
attempt's version (:func:`~export_center.repository.shard_units.save_unit_checkpoint`).

How a runner ends:

* the shard is done: the last checkpoint marks it ``DONE`` and frees its lease;
* the export failed in this shard: ``FAILED`` (retrying cannot help) or
  ``FAILED_RETRY`` (transient), with the place (shard, page, cursor) and the cause; the
  coordinator ends the attempt naming it;
* the worker shuts down, or the database failed: the shard is given back (its lease
  ends, its checkpoint stays) for any worker to claim;
* cancel, deadline, a lost lease: it stops and writes nothing (the coordinator settles
  the task; the reconciler deletes any segment stored after the end).
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from export_center import metrics
from export_center.attempt.context import RunContext
from export_center.attempt.shard_state import ShardState, columns_of
from export_center.attempt.sharded import ShardedProducer, Stopped
from export_center.attempt.shards import Shard, plan_shards
from export_center.attempt.steps import Attempt
from export_center.errors import (
    DeadlinePassed,
    ExportCancelled,
    ExportFailure,
    LeaseLost,
    WorkerInterrupted,
    WorkerStopping,
)
from export_center.outages import is_database_blip, retry_transaction
from export_center.registry import ExportType
from export_center.repository import ShardCheckpoint, Task, load_shards, shard_units
from export_center.writers.file_mark import mark_of, marked

__all__ = ["CLAIM_SECONDS", "ShardUnitProducer", "run_shard_units"]

log = logging.getLogger(__name__)

CLAIM_SECONDS = 30.0
"""How long a shard claim is tried again through a database blip."""


class ShardUnitProducer(ShardedProducer):
    """Runs one claimed shard of a distributed export (:meth:`run_one`); its checkpoints
    write the shard's row only, fenced by the shard's lease.

    Args:
        run: the attempt's steps for this worker (its watchdog a
            :class:`~export_center.attempt.watchdog.ShardWatchdog`).
        etype: the task's export type.
        claimed: the claimed shard with its checkpoint.
        plan: the attempt's shard plan (the shard's window, the count the provider sees).
        known: the checkpoints of the task's other shards (their columns, when one has
            them, are the columns this shard must match).
    """

    def __init__(
        self,
        run: Attempt,
        etype: ExportType,
        claimed: ShardCheckpoint,
        plan: list[Shard],
        known: list[ShardCheckpoint],
    ) -> None:
        super().__init__(run, etype)
        self.shard_count = len(plan)
        self.states = [ShardState(claimed, plan[claimed.shard_no])]
        for cp in [claimed, *known]:
            stats = cp.stats or {}
            if stats.get("columns"):
                self.columns = columns_of(stats["columns"])
                self.schema_hash = stats.get("schemaHash")
                break

    def run_one(self) -> None:
        """Page the shard from its checkpoint to its end, checkpointing.

        Raises:
            ExportFailure: the export failed in this shard (``run.location`` names
                where).
            ExportCancelled, LeaseLost, WorkerStopping, ...: from the shard's watchdog.
        """
        self._run_shard(self.states[0])

    def save_checkpoint(
        self, cp: ShardCheckpoint, *, processed: int, shards: tuple[int, int]
    ) -> None:
        """Write the shard's checkpoint only (the coordinator writes the task's
        progress), fenced by the shard's lease."""
        run = self.run
        saved = run.writes.while_leased(
            lambda conn: shard_units.save_unit_checkpoint(
                conn, run.task_id, run.version, run.owner, cp
            ),
            f"write the checkpoint of shard {cp.key}",
        )
        if not saved:
            run.watchdog.abort("lease", "another worker has the shard, or the attempt ended")
            run.watchdog.check()


def _others_wait(engine: Engine) -> bool:
    try:
        with engine.connect() as conn:
            return shard_units.exports_waiting(conn)
    except Exception as exc:
        if not is_database_blip(exc):
            raise
        return True


def _left(deadline: float) -> float:
    return deadline - time.monotonic()


def _claim(
    task: Task,
    version: int,
    owner: str,
    lease_seconds: float,
    parallel: int,
    prefer: int | None,
    conn: Connection,
) -> ShardCheckpoint | None:
    return shard_units.claim_shard(
        conn, task.id, version, owner, lease_seconds=lease_seconds, parallel=parallel, prefer=prefer
    )


def _release(task: Task, owner: str, shard_no: int, conn: Connection) -> bool:
    return shard_units.release_shard(conn, task.id, owner, shard_no)


def _known(task_id: int, conn: Connection) -> list[ShardCheckpoint]:
    return load_shards(conn, task_id)


def _plan(etype: ExportType, task: Task) -> list[Shard]:
    return plan_shards(etype, orjson.loads(task.parameters_json), task.time_zone)


def run_shard_units(
    engine: Engine,
    context: RunContext,
    task: Task,
    version: int,
    owner: str,
    *,
    prefer: int | None = None,
) -> int:
    """Claim and run shards of attempt ``version`` of ``task`` until none is free.

    Args:
        task: the task row as read (RUNNING at ``version``).
        owner: the lease owner of this runner (new for every wake-up).
        prefer: the shard the wake-up names.

    Returns:
        How many shards this call claimed. Never raises for what a shard did (module
        docstring); raises only when the database stays away at a claim.
    """
    etype = context.registry.get(task.export_type)
    if etype is None or etype.shards is None:
        return 0
    plan = _plan(etype, task)
    settings = context.settings.task
    parallel = max(1, etype.shards.parallel)
    claimed_count = 0
    while not context.stopping.is_set():
        claimed_at = time.monotonic()
        claimed = retry_transaction(
            engine,
            partial(_claim, task, version, owner, settings.shard_lease_seconds, parallel, prefer),
            what=f"claim a shard of {task.task_no}",
            seconds_left=partial(_left, claimed_at + CLAIM_SECONDS),
            stop=context.stopping,
        )
        if claimed is None:
            break
        claimed_count += 1
        prefer = None
        if not _run_claimed(
            engine, context, task, version, owner, etype, plan, claimed, claimed_at
        ):
            break
        if _others_wait(engine):
            break  # exports wait for a worker: this slot goes to them first
    return claimed_count


def _run_claimed(
    engine: Engine,
    context: RunContext,
    task: Task,
    version: int,
    owner: str,
    etype: ExportType,
    plan: list[Shard],
    claimed: ShardCheckpoint,
    claimed_at: float,
) -> bool:
    """Run one claimed shard and settle its row; True when the runner may claim again."""
    if claimed.shard_no >= len(plan) or plan[claimed.shard_no].key != claimed.key:
        _settle(engine, partial(_release, task, owner, claimed.shard_no))
        return False  # this worker's registry plans otherwise: leave the shard to others
    attempt = Attempt(
        engine,
        context,
        task,
        version,
        owner,
        claimed_at=claimed_at,
        shard_lease_seconds=context.settings.task.shard_lease_seconds,
    )
    fields: dict[str, Any] = {**attempt.log_fields(), "shard": claimed.key}
    try:  # through blips, as every other read and write of a runner
        known = retry_transaction(
            engine,
            partial(_known, task.id),
            what=f"read the shards of {task.task_no}",
            seconds_left=partial(_left, time.monotonic() + CLAIM_SECONDS),
            stop=context.stopping,
        )
    except Exception:
        log.warning("could not read the shards; the shard is handed back", extra=fields)
        _settle(engine, partial(_release, task, owner, claimed.shard_no))
        metrics.SHARDS_RUN.labels(task.export_type, "helper", "handed_back").inc()
        return False
    producer = ShardUnitProducer(attempt, etype, claimed, plan, known)
    attempt.watchdog.start()
    footer = etype.files.trace_footer
    outcome = "stopped"
    try:
        with marked(
            mark_of(task.task_no, task.tenant_id, task.requested_by, task.requested_at, footer)
        ):
            producer.run_one()
        log.info("shard done: %d rows", producer.states[0].rows, extra=fields)
        outcome = "done"
        return True
    except (ExportCancelled, LeaseLost, WorkerInterrupted, DeadlinePassed, Stopped) as exc:
        log.info("shard runner stopped: %s", exc, extra=fields)
        return False
    except WorkerStopping:
        _settle(engine, partial(_release, task, owner, claimed.shard_no))
        log.info("shutting down: shard handed back", extra=fields)
        outcome = "handed_back"
        return False
    except ExportFailure as exc:
        where = attempt.location or f"shard {claimed.key}"
        message = f"{where}: {exc.message}"
        log.warning("shard failed (%s): %s", exc.code, message, extra=fields)
        failed = partial(
            shard_units.fail_shard,
            task_id=task.id,
            version=version,
            owner=owner,
            shard_no=claimed.shard_no,
            code=exc.code,
            message=message,
            permanent=exc.permanent,
        )
        _settle(engine, lambda conn: failed(conn))
        outcome = "failed"
        return False
    except Exception as error:
        if not is_database_blip(error):
            log.exception("shard runner crashed; the shard is handed back", extra=fields)
        _settle(engine, partial(_release, task, owner, claimed.shard_no))
        outcome = "handed_back"
        return False
    finally:
        attempt.watchdog.stop()
        metrics.SHARDS_RUN.labels(task.export_type, "helper", outcome).inc()


def _settle(engine: Engine, work: Any) -> None:
    """A runner's last write, tried through blips for a while; when the database stays
    away the shard's lease runs out and the reconciler frees it."""
    deadline = time.monotonic() + CLAIM_SECONDS
    try:
        retry_transaction(
            engine, work, what="settle a shard", seconds_left=lambda: deadline - time.monotonic()
        )
    except Exception:
        log.warning("could not settle the shard; its lease will run out", exc_info=True)
