"""The scheduler loop: claims due schedules and fires each fire exactly once.

One pass (:meth:`Scheduler.run_once`):

1. read the ids of due schedules (``next_fire_at <= db now``, lease free or expired);
2. per id, claim it with a lease on the database clock (own short transaction; a
   schedule another instance claimed is skipped);
3. per claimed schedule, **in one transaction**: read the database clock; gather the
   fires due since ``next_fire_at`` (missed fires coalesce: one run with ``fires = N``
   and the window of the *latest* one; fires after ``endAt`` do not count); check the
   owner's permission as last seen (``export_principal``); create the task through the
   create path (limits, duplicate guard, outbox) with the idempotency key
   ``schedule:{id}:{fire time ISO UTC}`` (:func:`~.definition.fire_key`); write the run;
   set ``next_fire_at`` to the first fire after now (``ENDED`` and NULL past ``endAt``)
   and release the lease, naming the claim's owner and version. If that last UPDATE
   touches no row the claim was lost and the whole transaction rolls back.

A fire that cannot create its task writes a ``FAILED`` run with the code and the
sentence (a limit, a disabled type, a definition that no longer passes the checks).
When the owner lost the permission the schedule is also ``PAUSED`` with that sentence
as ``pause_reason``, and the same transaction writes the ``schedule.paused``
notification (:func:`export_center.notify.outbox.schedule_paused`) to the schedule's
notify targets (else the owner's defaults, else the page); a schedule whose stored cron
no longer parses pauses the same way.

Exactly once: the lease keeps two schedulers off one schedule; the version fence makes
a scheduler whose lease expired roll back; the idempotency key and the unique
``(schedule_id, fire_time)`` of runs make even a replayed fire create nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine

from export_center import metrics, repository
from export_center.api.create_rules import create_in
from export_center.auth import Identity
from export_center.db import reading
from export_center.errors import Forbidden, RequestError
from export_center.notify.outbox import schedule_paused
from export_center.registry import Registry
from export_center.repository import CreateReason
from export_center.repository import schedules as srepo
from export_center.repository.schedules import Schedule
from export_center.schedules.cron import parse_cron
from export_center.schedules.definition import fire_key, fire_task
from export_center.settings import Settings

__all__ = ["FireResult", "PAUSED_EVENT", "Scheduler", "fire_once"]

log = logging.getLogger(__name__)

#: The event a pause announces.
PAUSED_EVENT = "schedule.paused"
#: Missed fires counted one by one at most; beyond (over 69 days of a once-a-minute
#: schedule), the run stands for the first this many and the count is a lower bound.
MAX_COUNTED_FIRES = 100_000


def _announce_pause(
    conn: Connection,
    schedule: Schedule,
    reason: str,
    code: str | None,
    permission: str | None = None,
) -> None:
    """Write the ``schedule.paused`` event in the transaction that paused the schedule."""
    event_id = schedule_paused(
        conn,
        schedule_id=schedule.id,
        tenant_id=schedule.tenant_id,
        owner=schedule.owner,
        name=schedule.name,
        reason=reason,
        notify_json=schedule.notify_json,
        reason_code=code,
        permission=permission,
    )
    log.info("schedule %s paused: %s (event %s %s)", schedule.id, reason, PAUSED_EVENT, event_id)


class _LostClaim(Exception):
    """The schedule's lease was lost during the fire: roll back."""


@dataclass(frozen=True, slots=True)
class FireResult:
    """What one fire did: the run, its task (None when it failed), the outcome
    (``CREATED``; ``DUPLICATE`` when an identical export of the owner was still queued
    or running and the run is that task; ``FAILED``), the failure code and sentence,
    and whether the owner lost the permission (the caller pauses the schedule)."""

    run_id: int
    task: repository.Task | None
    outcome: str
    code: str | None
    message: str | None
    permission_lost: bool
    created: bool


def _utc_naive(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(tzinfo=None)


def fire_once(
    conn: Connection,
    schedule: Schedule,
    *,
    registry: Registry,
    settings: Settings,
    owner: Identity | None,
    fire_time: datetime,
    fires: int = 1,
    manual: bool = False,
) -> FireResult:
    """Fire ``schedule`` once at ``fire_time`` (aware) in the caller's transaction:
    create the task (or fail with a code and a sentence) and write its run.

    Args:
        owner: the owner as last seen (None: never seen: counts as permission lost).
        fires: the fires the run stands for (coalesced downtime).
        manual: a run now (``POST .../run``): key ``schedule:{id}:manual:{instant}``.

    Raises:
        _LostClaim: a run of this schedule and fire time exists already.
    """
    key = fire_key(schedule.id, fire_time, manual=manual)
    task = None
    code = message = None
    created = lost = duplicate = False
    window_from = window_to = None
    try:
        if owner is None:
            raise Forbidden(
                f"{schedule.owner} has not been seen with a token yet",
                code="PERMISSION_DENIED",
            )
        new, _, resolved = fire_task(schedule, registry, settings, owner, fire_time, key=key)
        if resolved:
            window_from, window_to = list(resolved.values())[:2]
        result = create_in(conn, settings, new)
        if result.reason is CreateReason.KEY_REUSED:
            code = "IDEMPOTENCY_KEY_REUSED"
            message = f"the key {key} already names another export"
        else:
            task, created = result.task, result.created
            if result.reason is CreateReason.DUPLICATE:
                duplicate = True
                message = "an identical export was still queued or running; this run is it"
    except Forbidden as exc:
        lost = True
        code = exc.code
        etype = registry.get(schedule.export_type)
        need = f" ({etype.required_permission} for app {etype.app_scope})" if etype else ""
        message = (
            f"the owner {schedule.owner} may no longer create {schedule.export_type} "
            f"exports: the latest token seen lacks the permission{need}; the schedule is "
            "paused until its owner resumes it"
        )
    except repository.LimitReached as exc:
        code = "TOO_MANY_ACTIVE_TASKS" if exc.scope == "user" else "TOO_MANY_ACTIVE_TASKS_FOR_TYPE"
        who = f"{schedule.owner} has" if exc.scope == "user" else f"{schedule.export_type} has"
        message = f"{who} {exc.limit} exports queued or running already; this fire made none"
    except RequestError as exc:
        code, message = exc.code, exc.message
    outcome = ("DUPLICATE" if duplicate else "CREATED") if task else "FAILED"
    run_id = srepo.insert_run(
        conn,
        {
            "schedule_id": schedule.id,
            "fire_time": _utc_naive(fire_time),
            "fires": fires,
            "manual": manual,
            "task_id": task.id if task else None,
            "outcome": outcome,
            "window_from": window_from,
            "window_to": window_to,
            "failure_code": None if task else code,
            "message": message[:1000] if message else None,
        },
    )
    if run_id is None:
        raise _LostClaim(f"schedule {schedule.id} already has a run at {fire_time.isoformat()}")
    return FireResult(run_id, task, outcome, code, message, lost, created)


class Scheduler:
    """Claims due schedules and fires them (module docstring).

    Args:
        engine: the export center's database.
        registry: the export types (the runtime's, replaced in place on reload).
        settings: process settings (``scheduler``: lease and batch; ``limits``).
        owner: this instance's lease owner id.
        on_created: called after a pass that committed new tasks (the runtime's
            ``publish_soon``).
    """

    def __init__(
        self,
        engine: Engine,
        registry: Registry,
        settings: Settings,
        *,
        owner: str,
        on_created: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.registry = registry
        self.settings = settings
        self.owner = owner
        self.on_created = on_created

    def run_once(self) -> int:
        """Claim and fire due schedules; return how many fired (runs written)."""
        cfg = self.settings.scheduler
        with reading(self.engine) as conn:  # no write lock for the idle look (SQLite)
            ids = srepo.due_schedule_ids(conn, cfg.batch_size)
        fired = created = 0
        for schedule_id in ids:
            with self.engine.begin() as conn:
                claimed = srepo.claim_schedule(conn, schedule_id, self.owner, cfg.lease_seconds)
            if claimed is None:
                continue
            try:
                with self.engine.begin() as conn:
                    result = self._fire(conn, claimed)
            except _LostClaim as exc:
                log.warning("schedule %s: claim lost, fire rolled back (%s)", schedule_id, exc)
                continue
            if result is not None:
                fired += 1
                created += result.created
        if created and self.on_created is not None:
            self.on_created()
        return fired

    def _fire(self, conn: Connection, schedule: Schedule) -> FireResult | None:
        now = srepo.database_now(conn)
        assert schedule.next_fire_at is not None
        first = schedule.next_fire_at.replace(tzinfo=UTC)
        end = schedule.end_at.replace(tzinfo=UTC) if schedule.end_at else None
        try:
            cron = parse_cron(schedule.cron, schedule.time_zone)
        except RequestError as exc:
            broken = f"{exc.code}: {exc.message}"
            self._finish(conn, schedule, first, "PAUSED", broken)
            _announce_pause(conn, schedule, broken, exc.code)
            return None
        horizon = min(now, end) if end else now
        latest, fires = None, 0
        at: datetime | None = first
        while at is not None and at <= horizon and fires < MAX_COUNTED_FIRES:
            latest, fires = at, fires + 1
            at = cron.next_after(at)
        result = None
        status, reason = "ACTIVE", None
        if latest is not None and srepo.run_exists(conn, schedule.id, _utc_naive(latest)):
            # Fired already (a replayed pass): nothing to create, only advance.
            log.info("schedule %s: the fire at %s has a run already", schedule.id, latest)
            latest = None
        if latest is not None:
            principal = srepo.read_principal(conn, schedule.tenant_id, schedule.owner)
            result = fire_once(
                conn,
                schedule,
                registry=self.registry,
                settings=self.settings,
                owner=principal.identity() if principal else None,
                fire_time=latest,
                fires=fires,
            )
            if result.created:
                metrics.TASKS_CREATED.labels(schedule.export_type).inc()
            if result.permission_lost:
                status, reason = "PAUSED", result.message
        upcoming = cron.next_after(now if latest is None else max(now, latest))
        if upcoming is None or (end is not None and upcoming > end):
            upcoming, status = None, "ENDED" if status == "ACTIVE" else status
        self._finish(conn, schedule, upcoming, status, reason)
        if status == "PAUSED" and reason is not None:
            etype = self.registry.get(schedule.export_type)
            permission = etype.required_permission if etype else None
            code = result.code if result is not None else None
            _announce_pause(conn, schedule, reason, code, permission)
        return result

    def _finish(
        self,
        conn: Connection,
        schedule: Schedule,
        upcoming: datetime | None,
        status: str,
        reason: str | None,
    ) -> None:
        ok = srepo.finish_fire(
            conn,
            schedule.id,
            owner=self.owner,
            version=schedule.version,
            next_fire_at=_utc_naive(upcoming) if upcoming else None,
            status=status,
            pause_reason=reason,
        )
        if not ok:
            raise _LostClaim(f"schedule {schedule.id} changed while firing")
