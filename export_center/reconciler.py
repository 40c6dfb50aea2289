"""The reconciler: the only redispatch path.

``run_once()`` (every 30 s) does, each step bounded and idempotent:

1. **redispatch** without a version change: a PENDING task past its retry time plus
   grace with no outbox row for its version gets one; a SENT row older than the stale
   window whose task still waits in PENDING goes back to PENDING and is sent again.
   QUARANTINED rows are never touched, and ``max_attempts`` does not limit this: a
   re-sent command is not a new attempt.
2. **lease_recover**: a RUNNING task whose lease ran out gets ``dispatch_version + 1``
   and PENDING with a new outbox row (the attempt not counted: a lost worker is not the
   export's fault), or FAILED when its lease recoveries (``task.max_lease_recoveries``,
   counted apart from the attempts) are used; the dead
   attempt's partial file (its key is recorded at claim) is deleted at once
   (**partial_delete**), the orphan scan staying the net; the recovery is written to the
   audit trail in the same transaction.
3. **outbox_release**: CLAIMED outbox rows whose publisher lease ran out return to
   PENDING.
4. **expire**: SUCCEEDED tasks past ``expires_at`` lose their file first, then become
   EXPIRED (a failed delete keeps the state and is retried next pass);
   **orphan_clean**: files under ``exports/`` older than the orphan age that belong to
   no SUCCEEDED task (and to no running one) are deleted; **upload_abort**: temporary
   objects (unfinished S3 multipart uploads, ``.part`` files) older than the upload
   orphan age whose task is not running are aborted; **outbox_purge**: SENT rows
   older than the retention are deleted in batches; **audit_purge**: audit rows older
   than the audit retention are deleted in batches; **part_clean**: shard parts
   (``parts/{task}/...``) of a task that ended (SUCCEEDED, CANCELLED, EXPIRED, or
   gone) are deleted with its checkpoints, and those of a FAILED task once older than
   ``failed_parts_retention_days`` (until then a manual retry resumes from them);
   **part_yield**: while the file storage has less free space than
   ``storage.low_space_mb``, the parts kept for FAILED tasks are deleted at once,
   oldest first, until there is room again (a later retry of such a task starts from
   zero): free space for new exports comes before a resume that may never be asked for.
5. **approval_expire**: approval requests past their expiry (database clock) end
   REJECTED with ``APPROVAL_EXPIRED``, audited (:func:`export_center.approvals.expire_due`).

Database times use the database clock; file ages use the storage's modification time.

A database blip (:func:`export_center.outages.is_database_blip`) ends the pass at once
instead of failing each step with its own traceback; the loop runner backs off and logs
the outage once (:mod:`export_center.loops`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from datetime import UTC, datetime

from sqlalchemy import Engine

from export_center import metrics, repository
from export_center.approvals import expire_due
from export_center.commands import COMMAND_TAG
from export_center.outages import is_database_blip
from export_center.repository import shard_units
from export_center.repository.downloads import purge_downloads
from export_center.settings import ReconcilerSettings
from export_center.states import TaskStatus
from export_center.storage.base import Storage
from export_center.storage.keys import PART_PREFIX, task_no_of_key, task_no_of_part

__all__ = ["Reconciler"]

log = logging.getLogger(__name__)


class Reconciler:
    """One reconciler; several instances may run at once (every step is conditional).

    Args:
        engine: the export center's database.
        storage: file storage (expiry and orphans).
        settings: reconciler settings (grace, stale window, orphan age, batch size).
        topic: command topic for new outbox rows.
        max_lease_recoveries: lease recoveries a task may have before it fails
            ``WORKER_LOST`` (``task.max_lease_recoveries``).
        low_space_bytes: below this much free space on the storage the parts kept for
            FAILED tasks yield (``storage.low_space_mb``); 0: never.
    """

    def __init__(
        self,
        engine: Engine,
        storage: Storage,
        settings: ReconcilerSettings,
        *,
        topic: str,
        max_lease_recoveries: int = 3,
        low_space_bytes: int = 0,
    ) -> None:
        self.engine = engine
        self.storage = storage
        self.settings = settings
        self.topic = topic
        self.max_lease_recoveries = max_lease_recoveries
        self.low_space_bytes = low_space_bytes
        self.last: Counter[str] = Counter()

    def run_once(self) -> int:
        """One pass of every step; returns the number of actions taken."""
        actions: Counter[str] = Counter()
        for step in (
            self._redispatch,
            self._recover_leases,
            self._recover_shard_leases,
            self._release_outbox,
            self._expire_files,
            self._clean_orphans,
            self._yield_space,
            self._clean_parts,
            self._purge_outbox,
            self._purge_audit,
            self._expire_approvals,
        ):
            try:
                actions.update(step())
            except Exception as exc:  # one failing step must not stop the others
                if is_database_blip(exc):
                    self._count(actions)
                    raise  # the database is away: every further step would fail too
                log.exception("reconciler step %s failed", step.__name__)
        self._count(actions)
        return sum(actions.values())

    def _expire_approvals(self) -> Counter[str]:
        """**approval_expire**: approval requests past their time end REJECTED."""
        done = expire_due(self.engine, self.settings.batch_size)
        return Counter({"approval_expire": done} if done else {})

    def _count(self, actions: Counter[str]) -> None:
        for action, count in actions.items():
            metrics.RECONCILER_ACTIONS.labels(action).inc(count)
        self.last = actions

    def _redispatch(self) -> Counter[str]:
        done: Counter[str] = Counter()
        s = self.settings
        with self.engine.begin() as conn:
            for task in repository.tasks_missing_outbox(
                conn, s.redispatch_grace_seconds, s.batch_size
            ):
                if repository.insert_outbox(conn, task, topic=self.topic, tag=COMMAND_TAG):
                    done["redispatch"] += 1
                    log.warning(
                        "outbox row was missing; written again",
                        extra={
                            "taskId": task.task_no,
                            "dispatchVersion": task.dispatch_version,
                        },
                    )
        with self.engine.begin() as conn:
            ids = repository.stale_sent_outbox_ids(
                conn, s.sent_stale_seconds, s.redispatch_grace_seconds, s.batch_size
            )
            for row_id in ids:
                if repository.resend_outbox_row(conn, row_id):
                    done["redispatch"] += 1
        return done

    def _recover_leases(self) -> Counter[str]:
        done: Counter[str] = Counter()
        with self.engine.connect() as conn:
            tasks = repository.expired_running_tasks(conn, self.settings.batch_size)
        for task in tasks:
            with self.engine.begin() as conn:
                outcome = repository.recover_expired_lease(
                    conn,
                    task,
                    topic=self.topic,
                    tag=COMMAND_TAG,
                    max_recoveries=self.max_lease_recoveries,
                )
                if outcome:
                    repository.record_audit(
                        conn,
                        actor="system:reconciler",
                        action=repository.AuditAction.LEASE_RECOVERY,
                        outcome=outcome,
                        task=task,
                        reason=f"the worker {task.lease_owner} stopped renewing its lease "
                        f"during {task.phase}",
                    )
            if outcome:
                done["lease_recover"] += 1
                log.warning(
                    "recovered an expired lease: %s",
                    outcome,
                    extra={"taskId": task.task_no, "dispatchVersion": task.dispatch_version},
                )
                # The dead attempt's partial file goes now, not after the orphan age.
                if task.object_key and self._delete_quietly(task.object_key):
                    done["partial_delete"] += 1
        return done

    def _recover_shard_leases(self) -> Counter[str]:
        """**shard_lease_recover**: a shard of a distributed export whose runner stopped
        renewing its lease (killed, frozen) while the task still runs is freed and a new
        wake-up for it goes into the outbox, so any worker resumes it from its
        checkpoint (its coordinator also takes it over if nobody does)."""
        done: Counter[str] = Counter()
        with self.engine.connect() as conn:
            expired = shard_units.expired_shard_leases(conn, self.settings.batch_size)
        for shard in expired:
            with self.engine.begin() as conn:
                task = repository.read_task(conn, shard.task_id)
                if task is None or not shard_units.free_shard_lease(conn, shard):
                    continue
                shard_units.insert_shard_wake(
                    conn, task, shard.shard_no, shard.attempt_count, topic=self.topic
                )
            done["shard_lease_recover"] += 1
            log.warning(
                "recovered the expired lease of shard %d",
                shard.shard_no,
                extra={"taskId": task.task_no, "dispatchVersion": task.dispatch_version},
            )
        return done

    def _delete_quietly(self, key: str) -> bool:
        """Delete a file; on failure log and leave it to the orphan scan."""
        try:
            self.storage.delete(key)
        except Exception:
            log.warning("could not delete %s; the orphan scan will", key, exc_info=True)
            return False
        return True

    def _release_outbox(self) -> Counter[str]:
        with self.engine.begin() as conn:
            released = repository.release_expired_outbox_claims(conn)
        return Counter({"outbox_release": released}) if released else Counter()

    def _expire_files(self) -> Counter[str]:
        done: Counter[str] = Counter()
        with self.engine.connect() as conn:
            tasks = repository.tasks_past_retention(conn, self.settings.batch_size)
        for task in tasks:
            key = task.object_key
            try:
                if key:
                    self.storage.delete(key)
            except Exception:
                log.error(
                    "could not delete an expired file; will retry",
                    exc_info=True,
                    extra={"taskId": task.task_no},
                )
                continue
            with self.engine.begin() as conn:
                if repository.mark_expired(conn, task.id, key):
                    done["expire"] += 1
        return done

    def _clean_orphans(self) -> Counter[str]:
        """Delete files and temporary objects under ``exports/`` that no task keeps.

        A committed file is an orphan once older than ``orphan_age_seconds``; a temporary
        object (``.part`` file, unfinished S3 multipart upload) once older than
        ``upload_orphan_age_seconds``, shorter, because only an attempt that ended
        without cleaning up (its abort failed: the store was down) leaves one. Kept: the
        objects of a RUNNING task (an attempt may be writing them; judged again after
        it ends) and the file of a SUCCEEDED task. Keys that are not server-made are
        never touched.
        """
        now = time.time()
        file_cutoff = datetime.fromtimestamp(now - self.settings.orphan_age_seconds, UTC)
        upload_cutoff = datetime.fromtimestamp(now - self.settings.upload_orphan_age_seconds, UTC)
        candidates = [
            obj
            for obj in self.storage.list()
            if task_no_of_key(obj.key) is not None
            and obj.modified_at <= (upload_cutoff if obj.temporary else file_cutoff)
        ]
        if not candidates:
            return Counter()
        task_nos = sorted({str(task_no_of_key(obj.key)) for obj in candidates})
        with self.engine.connect() as conn:
            states = repository.task_file_states(conn, task_nos)
        done: Counter[str] = Counter()
        deleted: set[str] = set()
        for obj in candidates:
            status, current_key = states.get(str(task_no_of_key(obj.key)), (None, None))
            if status == TaskStatus.RUNNING:
                continue  # an attempt may be writing it; judged again after it ends
            if status == TaskStatus.SUCCEEDED and current_key == obj.key:
                continue
            if obj.key in deleted:
                continue  # one delete removes a key's file and its temporary objects
            try:
                self.storage.delete(obj.key)
                deleted.add(obj.key)
                action = "upload_abort" if obj.temporary else "orphan_clean"
                done[action] += 1
                log.info(
                    "%s %s (task %s)",
                    "aborted the dead upload of" if obj.temporary else "deleted the orphan file",
                    obj.key,
                    status or "gone",
                )
            except Exception:
                log.warning("could not delete orphan %s", obj.key, exc_info=True)
        return done

    def _clean_parts(self) -> Counter[str]:
        """Delete the shard parts and checkpoints of tasks that no longer need them."""
        oldest: dict[str, datetime] = {}
        for obj in self.storage.list(PART_PREFIX):
            task_no = task_no_of_part(obj.key)
            if task_no is not None and (task_no not in oldest or obj.modified_at > oldest[task_no]):
                oldest[task_no] = obj.modified_at  # the newest segment of the task
        if not oldest:
            return Counter()
        failed_cutoff = datetime.fromtimestamp(
            time.time() - self.settings.failed_parts_retention_days * 86400, UTC
        )
        with self.engine.connect() as conn:
            states = repository.task_file_states(conn, sorted(oldest))
            ids = repository.task_ids_by_no(conn, sorted(oldest))
        done: Counter[str] = Counter()
        for task_no, newest in oldest.items():
            status, _key = states.get(task_no, (None, None))
            ended = status in (None, TaskStatus.SUCCEEDED, TaskStatus.CANCELLED, TaskStatus.EXPIRED)
            stale_failure = status == TaskStatus.FAILED and newest <= failed_cutoff
            if not (ended or stale_failure):
                continue
            try:
                count = self.storage.delete_parts(task_no)
                if task_no in ids:
                    with self.engine.begin() as conn:
                        repository.delete_shards(conn, ids[task_no], forget_counts=True)
            except Exception:
                log.warning("could not delete the parts of %s", task_no, exc_info=True)
                continue
            done["part_clean"] += count
            log.info(
                "deleted %d shard part segment(s) of %s (task %s)", count, task_no, status or "gone"
            )
        return done

    def _yield_space(self) -> Counter[str]:
        """Delete the parts kept for FAILED tasks, oldest first, while the storage has
        less free space than ``low_space_bytes``."""
        space = self.storage.space() if self.low_space_bytes else None
        if space is None or not space.is_low(self.low_space_bytes):
            return Counter()
        kept: dict[str, tuple[datetime, int]] = {}
        for obj in self.storage.list(PART_PREFIX):
            task_no = task_no_of_part(obj.key)
            if task_no is None:
                continue
            newest, size = kept.get(task_no, (obj.modified_at, 0))
            kept[task_no] = (max(newest, obj.modified_at), size + obj.size)
        if not kept:
            return Counter()
        with self.engine.connect() as conn:
            states = repository.task_file_states(conn, sorted(kept))
            ids = repository.task_ids_by_no(conn, sorted(kept))
        failed = sorted(
            (newest, task_no, size)
            for task_no, (newest, size) in kept.items()
            if states.get(task_no, (None, None))[0] == TaskStatus.FAILED
        )
        done: Counter[str] = Counter()
        free = space.free_bytes
        for _newest, task_no, size in failed:
            if free >= self.low_space_bytes:
                break
            try:
                count = self.storage.delete_parts(task_no)
                if task_no in ids:
                    with self.engine.begin() as conn:
                        repository.delete_shards(conn, ids[task_no], forget_counts=True)
            except Exception as exc:
                if is_database_blip(exc):
                    raise
                log.warning("could not delete the parts of %s", task_no, exc_info=True)
                continue
            free += size
            done["part_yield"] += count
            log.warning(
                "low space on the file storage (%.0f MB free, below %.0f MB): deleted the "
                "%.1f MB of parts kept for failed task %s; a retry of it starts from zero",
                space.free_bytes / 2**20,
                self.low_space_bytes / 2**20,
                size / 2**20,
                task_no,
            )
        return done

    def _purge_outbox(self) -> Counter[str]:
        with self.engine.begin() as conn:
            purged = repository.purge_sent_outbox(conn, self.settings.outbox_retention_days, 5000)
        return Counter({"outbox_purge": purged}) if purged else Counter()

    def _purge_audit(self) -> Counter[str]:
        with self.engine.begin() as conn:
            purged = repository.purge_audit(conn, self.settings.audit_retention_days, 5000)
            # The download audit is kept as long as the audit trail.
            purged += purge_downloads(conn, self.settings.audit_retention_days, 5000)
        return Counter({"audit_purge": purged}) if purged else Counter()
