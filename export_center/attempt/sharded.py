"""Sharded attempts: day shards fetched in parallel, checkpointed, resumed, then joined.

A type with ``shards`` in the registry runs each attempt as:

1. **Plan.** :func:`export_center.attempt.shards.plan_shards` splits the date range into day
   windows. The plan is written to ``export_shard`` under the attempt's lease; an
   attempt that finds the same plan there reuses its checkpoints (resume), any other
   plan starts from zero.
2. **Shards.** Up to ``min(type's parallel, task.shard_parallel_cap)`` shards run at
   once, one thread each (a shard's fetch thread prefetches its next page, so a shard
   holds at most two pages). A shard pages with its own keyset cursor and snapshot
   token, in order inside its window, and renders its rows into a *part*: header-less
   CSV, or XLSX ``<row>`` fragments without row numbers. At a page end (by default
   every page; at most every ``task.checkpoint_every_seconds`` when set, and always
   when the buffer passes 8 MB or the shard ends), the rendered bytes are stored as
   the part's next *segment*
   (``parts/{task}/{shard}/{segment}.v{version}``) and then, in one transaction with
   the task's progress and fenced by lease owner and dispatch version, the checkpoint
   ``{cursor, rows, pages, bytes, CRC-32, segments, writer counts}`` is written. A
   segment is stored before the checkpoint that names it, so a kill at any moment
   leaves either a checkpoint naming stored segments or an orphan segment that no
   checkpoint names (deleted with the parts at the end). The lease is checked right
   before each segment is stored (:meth:`Watchdog.check`, by the process's own clock):
   a worker that was paused past its lease stores nothing.
3. **Resume.** A later attempt (after a lost lease, a transient failure, a hand-back
   or a manual retry of a FAILED task) skips the ``DONE`` shards and restarts every
   other shard at its checkpoint's cursor with its snapshot token, appending new
   segments after the checkpoint's; nothing after the last checkpoint is kept, so both
   formats resume from the last committed segment. The rows kept are written as the
   task's progress at once, so the page never shows a resumed export at 0 rows. A
   snapshot token the provider no longer honours (410) makes the attempt drop every
   checkpoint and part and restart from zero, recorded in the task's history (audit
   ``resume``/``restarted``).
4. **Finalize.** When every shard is ``DONE`` the parts are joined in shard order
   into the file: CSV = BOM and header + every part; XLSX = the fragments numbered and
   split over sheets at 1,048,575 data rows with the header repeated, so the file is
   byte-identical to a run of the same shards one after the other. Each part's CRC-32
   is checked against its checkpoint while it is read. After the commit the parts and
   the shard rows are deleted; a cancel deletes them too; a failure keeps them for the
   next attempt (the reconciler deletes them once the task has ended).

One shard failing for good (after its own retries) fails the attempt, and the message
names the shard, its page and its cursor; the other shards stop at their next check.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

import orjson
from isal.isal_zlib import crc32  # zlib's CRC-32, computed 2-3x faster (a dependency)

from export_center import repository
from export_center.attempt.batches import BatchConverter
from export_center.attempt.ceiling import check_row_caps
from export_center.attempt.fetching import BatchFetcher, PageSizer
from export_center.attempt.finalize import assemble_file, read_part
from export_center.attempt.shard_state import ShardState, columns_json, columns_of, merged
from export_center.attempt.shards import Shard, plan_shards
from export_center.attempt.steps import Attempt
from export_center.columns import Column
from export_center.errors import (
    ExportFailure,
    FileTooLarge,
    PermanentExportError,
    ProviderContractError,
    SchemaChanged,
)
from export_center.packaging import ControlTotals
from export_center.provider_client import Batch, ProviderRequest
from export_center.registry import ExportType
from export_center.repository import ShardCheckpoint, ShardStatus
from export_center.states import Phase
from export_center.storage.base import storage_error
from export_center.storage.keys import part_key
from export_center.writers import RowsPartWriter, WriterStats
from export_center.writers.formats import PartWriter

__all__ = ["SEGMENT_FLUSH_BYTES", "ShardedProducer", "Stopped"]

log = logging.getLogger(__name__)

SEGMENT_FLUSH_BYTES = 8 << 20
"""A shard stores its segment (and checkpoints) once this many bytes are buffered."""
_WAIT_SLICE_SECONDS = 0.25
"""How often the attempt's thread checks the watchdog while shards run."""


class Stopped(Exception):
    """Another shard failed or the attempt stopped: this shard ends quietly."""


class _SnapshotExpired(Exception):
    """A resumed shard's snapshot token was refused (410): restart from zero."""


class ShardedProducer:
    """Produces one sharded attempt's file (:meth:`produce`); a
    :class:`~export_center.attempt.steps.Producer`.

    Each shard's thread calls the attempt's steps with its own counters (row offset,
    page number); only the attempt's thread writes the attempt's reported state, except
    :attr:`Attempt.location`, set under :attr:`lock` by the shard that failed first.

    Args:
        run: the claimed attempt (its task, lease, watchdog, storage and steps).
        etype: the task's export type (has ``shards``).
    """

    def __init__(self, run: Attempt, etype: ExportType) -> None:
        self.run = run
        self.etype = etype
        self.settings = run.ctx.settings.task
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.states: list[ShardState] = []
        self.columns: list[Column] | None = None
        self.schema_hash: str | None = None
        self.resumed = False
        #: The failure of the shard that failed first (the one :attr:`Attempt.location`
        #: names); raised in place of a sibling's failure seen earlier.
        self.failure: ExportFailure | None = None
        #: Shards in the plan when :attr:`states` holds only some of them (a shard
        #: runner of another worker), else None.
        self.shard_count: int | None = None

    # ------------------------------------------------------------------ driver

    def produce(self) -> repository.StoredFile:
        """Run every unfinished shard, then join the parts into the stored file.

        Raises:
            ExportFailure: a shard failed (message names shard, page and cursor), the
                parts cannot be read back, or the file is too large.
            ExportCancelled, WorkerStopping, LeaseLost, DeadlinePassed: from the watchdog.
        """
        run = self.run
        plan = plan_shards(self.etype, orjson.loads(run.task.parameters_json), run.task.time_zone)
        checkpoints = self._prepare(plan)
        try:
            self._run_shards(plan, checkpoints)
        except _SnapshotExpired:
            self._restart_from_zero()
            checkpoints = self._prepare(plan)
            self._run_shards(plan, checkpoints)
        return self._finalize()

    def _prepare(self, plan: list[Shard]) -> list[ShardCheckpoint]:
        """Write the plan (or keep the same one with its checkpoints) under the lease."""
        run = self.run
        planned = [ShardCheckpoint(s.no, s.key, s.start, s.end) for s in plan]
        kept, replaced = run.writes.plan_shards(planned)
        if replaced:
            log.warning(
                "the shard plan changed since the checkpoints (registry or parameters): "
                "restarting the export from zero",
                extra=run.log_fields(),
            )
            self.delete_parts()
            self._audit(
                "restarted",
                "the shard plan changed since the checkpoints were written (for example "
                "the registry's max_shards): every shard starts again from zero",
                {"cause": "plan_changed"},
            )
        started = [cp for cp in kept if cp.done or cp.segments]
        if started and not self.resumed:
            self.resumed = True
            done = sum(cp.done for cp in kept)
            rows = sum(cp.rows_written for cp in kept)
            log.info(
                "resuming from checkpoints: %d of %d shards done, %d rows kept",
                done,
                len(kept),
                rows,
                extra=run.log_fields(),
            )
            facts = {"shardsDone": done, "shardsTotal": len(kept), "rowsKept": rows}
            self._audit("resumed", f"{done} of {len(kept)} shards done, {rows:,} rows kept", facts)
            # The rows kept are the progress from the start (not "0 rows so far").
            run.writes.progress(
                processed=rows,
                total=None,
                phase=Phase.FETCH,
                shards=(done, len(kept)),
            )
        return kept

    def _audit(self, outcome: str, reason: str, details: Mapping[str, object]) -> None:
        # ``details`` carries the facts (counts, cause): a reader says them in any language.
        self.run.writes.audit_resume(outcome, reason, details)

    def _restart_from_zero(self) -> None:
        run = self.run
        log.warning(
            "a resumed shard's snapshot expired (410): restarting the export from zero",
            extra=run.log_fields(),
        )
        self.stop.clear()
        self.states = []
        self.columns = None
        self.schema_hash = None
        self.failure = None
        run.writes.forget_shards()
        self.delete_parts()
        self._audit(
            "restarted",
            "the provider no longer honours the snapshot of the checkpoints (410): "
            "every shard starts again from zero",
            {"cause": "snapshot_expired"},
        )

    def delete_parts(self) -> None:
        """Delete every stored segment of the task (success, cancel, fresh run)."""
        try:
            self.run.ctx.storage.delete_parts(self.run.task.task_no)
        except Exception:  # the reconciler deletes them later
            log.warning(
                "could not delete the shard parts", extra=self.run.log_fields(), exc_info=True
            )

    def cleanup(self, *, forget_counts: bool = False) -> None:
        """Forget the shards and delete the parts (after a commit, a cancel, or a failure
        that a retry would meet again); ``forget_counts`` also clears the task's shard
        counts."""
        try:
            self.run.writes.forget_shards(forget_counts=forget_counts)
        except Exception:
            log.warning(
                "could not delete the shard rows", extra=self.run.log_fields(), exc_info=True
            )
        self.delete_parts()

    # ------------------------------------------------------------------ shards

    def _run_shards(self, plan: list[Shard], checkpoints: list[ShardCheckpoint]) -> None:
        run = self.run
        self.states = [ShardState(cp, plan[cp.shard_no]) for cp in checkpoints]
        for state in self.states:
            stats = state.cp.stats or {}
            if self.columns is None and stats.get("columns"):
                self.columns = columns_of(stats["columns"])
                self.schema_hash = stats.get("schemaHash")
        todo = [s for s in self.states if not s.cp.done]
        spec = self.etype.shards
        if not todo:
            return
        parallel = max(1, min(spec.parallel if spec else 1, self.settings.shard_parallel_cap))
        pool = ThreadPoolExecutor(
            max_workers=min(parallel, len(todo)), thread_name_prefix=f"shard-{run.task_id}"
        )
        futures: list[Future[None]] = []
        try:
            # Shards are submitted in file order, so the earliest shards finish first.
            futures = [
                pool.submit(contextvars.copy_context().run, self._run_shard, state)
                for state in todo
            ]
            pending: set[Future[None]] = set(futures)
            while pending:
                finished, pending = wait(
                    pending, timeout=_WAIT_SLICE_SECONDS, return_when=FIRST_EXCEPTION
                )
                for future in finished:
                    error = future.exception()
                    if error is not None and not isinstance(error, Stopped):
                        raise self._first(error)
                run.watchdog.check()
        finally:
            self.stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
        for future in futures:
            error = future.exception()
            if error is not None and not isinstance(error, Stopped):
                raise self._first(error)

    def _first(self, error: BaseException) -> BaseException:
        """The error to raise for a shard's ``error``: the failure of the shard that
        :attr:`Attempt.location` names when ``error`` is another shard's failure (two
        shards failing at once: the message and its location come from one shard)."""
        with self.lock:
            first = self.failure
        if first is not None and isinstance(error, ExportFailure):
            return first
        return error

    @property
    def total(self) -> int | None:
        """The export's row estimate: the sum of the shards' own estimates once every
        shard gave one; before, the shards that did, scaled to all shards (None when
        none did yet). Never below the rows written, so progress never passes 100 %."""
        with self.lock:
            known = [s.total for s in self.states if s.total is not None]
            written = sum(s.rows for s in self.states)
        if not known:
            return None
        estimate = sum(known) * len(self.states) // len(known)
        return max(estimate, written)

    def _check(self) -> None:
        """Between pages and while waiting: stop when the attempt or a sibling did."""
        self.run.watchdog.check()
        if self.stop.is_set():
            raise Stopped

    def _request(self, shard: Shard) -> ProviderRequest:
        base = self.run.provider_request(self.etype)
        return ProviderRequest(
            export_type=base.export_type,
            url=base.url,
            task_id=base.task_id,
            tenant_id=base.tenant_id,
            app_code=base.app_code,
            requested_by=base.requested_by,
            dispatch_version=base.dispatch_version,
            parameters=shard.parameters(base.parameters, self.etype.date_range),
            limit=base.limit,
            trace_id=base.trace_id,
            time_zone=base.time_zone,
            shard=shard.describe(self.shard_count or len(self.states)),
        )

    def _run_shard(self, state: ShardState) -> None:
        """One shard's thread: page from its checkpoint to its end, checkpointing."""
        run = self.run
        request = self._request(state.shard)
        time_limit = float(
            self.etype.batch_timeout_seconds or run.ctx.settings.provider.batch_timeout_seconds
        )
        pages = PageSizer(request.limit)  # this shard's page size (halved on a 413)
        fetcher = BatchFetcher(
            lambda cursor, snapshot, abort, limit: run.fetch(
                request, cursor, snapshot, abort, limit, pages
            ),
            self._check,
            time_limit,
            f"fetch-{run.task_id}-{state.cp.shard_no}",
        )
        resumed = state.cp.cursor is not None
        try:
            state.batch_no += 1
            batch = self._first_batch(fetcher, state, resumed)
            converter, writer = self._open(state, batch)
            last_checkpoint = time.monotonic()
            while True:
                self._check()
                if batch.schema_hash != self.schema_hash:
                    raise SchemaChanged(
                        f"schemaHash changed from {self.schema_hash} to {batch.schema_hash}"
                    )
                following = None
                if batch.has_more:
                    fetcher.cursors.add(batch.next_cursor, state.batch_no, len(batch.rows))
                    following = fetcher.submit(batch.next_cursor, state.cp.snapshot_token)
                self._write(state, writer, converter, batch)
                ended = following is None
                if (
                    ended
                    or state.buffer.tell() >= SEGMENT_FLUSH_BYTES
                    or time.monotonic() - last_checkpoint >= self.settings.checkpoint_every_seconds
                ):
                    self._checkpoint(state, writer, converter, batch, ended=ended)
                    last_checkpoint = time.monotonic()
                if following is None:
                    break
                state.batch_no += 1
                batch = fetcher.wait(following)
        except (Stopped, _SnapshotExpired):
            fetcher.abandon()
            raise
        except ExportFailure as exc:
            fetcher.abandon()
            if self.stop.is_set() and not isinstance(exc, PermanentExportError):
                raise Stopped from exc
            self.stop.set()
            with self.lock:
                if run.location is None:
                    cursor = f" (cursor {state.cp.cursor[:40]})" if state.cp.cursor else ""
                    run.location = f"shard {state.shard.key}, page {state.batch_no}{cursor}"
                    self.failure = exc
            raise
        except BaseException:
            fetcher.abandon()
            self.stop.set()
            raise
        fetcher.close()

    def _first_batch(self, fetcher: BatchFetcher, state: ShardState, resumed: bool) -> Batch:
        try:
            return fetcher.wait(fetcher.submit(state.cp.cursor, state.cp.snapshot_token))
        except ExportFailure as exc:
            if resumed and exc.code == "SNAPSHOT_EXPIRED":
                self.stop.set()
                raise _SnapshotExpired from exc
            raise

    def _open(self, state: ShardState, first: Batch) -> tuple[BatchConverter, Any]:
        """The shard's converter and part writer; the first page of the export fixes
        the columns and schema hash every other shard must match."""
        with self.lock:
            if self.columns is None:
                if first.columns is None:
                    raise ProviderContractError("the first batch has no columns")
                self.columns = first.columns
                self.schema_hash = first.schema_hash
            if first.total_rows is not None and state.cp.cursor is None:
                state.total = first.total_rows
            columns = self.columns
        if state.cp.snapshot_token is None:
            state.cp.snapshot_token = first.snapshot_token
        run = self.run
        file_columns = run.file_columns(columns)
        if state.totals is None:
            state.totals = ControlTotals(file_columns)
        writer: PartWriter
        if run.renders_parts:
            writer = RowsPartWriter(
                state.buffer,
                file_columns,
                time_zone=run.task.time_zone,
                resume_from=state.resume_from,
            )
        else:
            writer = run.file_format.open_part(
                state.buffer,
                file_columns,
                time_zone=run.task.time_zone,
                resume_from=state.resume_from,
                csv=run.spec.csv,
            )
        return BatchConverter(columns, run.chosen_keys), writer

    def _write(
        self, state: ShardState, writer: Any, converter: BatchConverter, batch: Batch
    ) -> None:
        run = self.run
        with self.lock:
            done = sum(s.rows for s in self.states)
        check_row_caps(self.etype, run.task, done + len(batch.rows))
        # Row numbers in messages count from the shard's start, pages from its first.
        typed = run.project(
            run.convert(batch, converter, offset=state.rows, batch_no=state.batch_no)
        )
        if state.totals is not None and not run.renders_parts:
            state.totals.add(typed)
        run.write(writer, typed)
        state.live_rows += len(batch.rows)
        state.cp.cursor = batch.next_cursor

    def _checkpoint(
        self,
        state: ShardState,
        writer: Any,
        converter: BatchConverter,
        batch: Batch,
        *,
        ended: bool,
    ) -> None:
        """Store the buffered segment, then write the checkpoint with the progress."""
        run = self.run
        stats = writer.checkpoint()
        if ended:
            writer.close()
        data = state.buffer.getvalue()
        state.buffer.seek(0)
        state.buffer.truncate()
        cp = state.cp
        segments = list(cp.segments or [])
        if data or ended:
            key = part_key(run.task.task_no, cp.shard_no, len(segments), run.version)
            self._check()  # the lease, right before storage: a paused worker stores nothing
            try:
                run.ctx.storage.put_part(key, data)
            except OSError as exc:
                raise storage_error(exc, f"cannot store {key}") from exc
            segments.append(run.version)
        cp.segments = segments
        cp.bytes += len(data)
        cp.checksum = crc32(data, cp.checksum)
        cp.rows_written += state.live_rows
        cp.pages = state.batch_no
        state.live_rows = 0
        cp.status = ShardStatus.DONE if ended else ShardStatus.PENDING
        if ended:
            cp.cursor = None
        cp.stats = {
            "columns": columns_json(self.columns or []),
            "schemaHash": self.schema_hash,
            "writer": stats.to_dict(),
            "notes": merged((cp.stats or {}).get("notes") or [], converter.notes()),
            "total": state.rows if ended else state.total,
            "totals": None if state.totals is None else state.totals.to_dict(),
        }
        cap = run.ctx.settings.file_size_cap_bytes
        # A compressed file (XLSX, gzip, a ZIP) is checked by its assembler or package,
        # on the delivered bytes.
        if run.file_format.parts_sum_to_file and not run.renders_parts and cap is not None:
            with self.lock:
                size = sum(s.cp.bytes for s in self.states)
            if size > cap:
                raise FileTooLarge(f"the file passes the size cap of {cap:,} bytes")
        with self.lock:
            processed = sum(s.rows for s in self.states)
            shards = (sum(s.cp.done for s in self.states), len(self.states))
        self.save_checkpoint(cp, processed=processed, shards=shards)

    def save_checkpoint(
        self, cp: ShardCheckpoint, *, processed: int, shards: tuple[int, int]
    ) -> None:
        """Write one shard's checkpoint with the task's progress, in one transaction; a
        deadlock or lock-wait victim (against a sibling shard or the lease renewal) is
        rolled back whole and tried again, like any database blip, while the lease
        lasts. A shard runner of another worker writes only its shard (``shard_unit``).

        Raises:
            LeaseLost, WorkerInterrupted: the attempt lost its lease, or the database
                did not answer while it lasted.
        """
        self.run.writes.checkpoint(cp, processed=processed, total=self.total, shards=shards)

    # ------------------------------------------------------------------ finalize

    def _finalize(self) -> repository.StoredFile:
        run = self.run
        run.phase = Phase.STORE
        self.run.watchdog.check()
        if self.columns is None:
            raise ProviderContractError("no shard declared columns")
        run.location = f"assembling the file from {len(self.states)} shard parts"
        run.processed = run.total = sum(s.cp.rows_written for s in self.states)
        # Shards finishing at once may have written their counts out of order.
        run.progress(force=True, shards=(len(self.states), len(self.states)))
        part_stats = WriterStats.total(
            WriterStats.from_dict((s.cp.stats or {}).get("writer") or {}) for s in self.states
        )
        parts = (read_part(run, s.cp) for s in self.states)
        columns = run.file_columns(self.columns)
        totals = ControlTotals(columns)
        for s in self.states:
            if s.totals is not None:
                totals = totals.merge(s.totals)
        notes: list[str] = []
        for s in self.states:
            notes = merged(notes, (s.cp.stats or {}).get("notes") or [])
        # The first shard's snapshot token stands for the file's (each shard has its own).
        return assemble_file(
            run,
            columns,
            parts,
            part_stats=part_stats,
            totals=totals,
            snapshot_token=self.states[0].cp.snapshot_token if self.states else None,
            notes=notes,
        )
