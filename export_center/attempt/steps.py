"""The claimed attempt and its public steps; the protocol every producer implements.

:class:`Attempt` is one claimed execution attempt of an export: its identity (task row,
dispatch version, lease owner, object key), its watchdog and fenced database writes
(:class:`~export_center.attempt.writes.AttemptWrites`), what it reports (phase, batch,
cursor, rows done, total, where it failed) and the steps a producer is made of, each a
public method:

* :meth:`Attempt.export_type` and :meth:`Attempt.provider_request`: what to ask whom;
* :meth:`Attempt.fetch`: one batch through the provider client, at a stream's page size;
* :meth:`Attempt.convert`: a batch to typed columns, the row offset given by the caller
  (each stream counts its own rows: a shard's thread never reads another's counter);
* :meth:`Attempt.write`: typed columns into a writer;
* :meth:`Attempt.open_file`, :meth:`Attempt.store`, :meth:`Attempt.stored`: the file
  behind the lease check, its commit to storage, and what the task row records;
* :meth:`Attempt.progress`: the fenced progress write (a lost lease stops the attempt);
* :meth:`Attempt.log_fields`: the fields every log line of the attempt carries.

A :class:`Producer` turns the attempt into a stored file: the single-stream producer
(:mod:`export_center.attempt.single`) and the sharded one
(:mod:`export_center.attempt.sharded`) both use only these steps and attributes.

Changing a step is done by subclassing :class:`Attempt` and overriding its public
methods, then naming the subclass as :attr:`ExportRun.steps
<export_center.attempt.run.ExportRun.steps>` of a subclass of the run; the producers
then call the overridden steps, from whatever thread they run them in (a shard's
thread, a fetch thread). :class:`export_center.testing.FaultInjectingRun` injects
faults this way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, BinaryIO, Protocol

import orjson
from sqlalchemy import Engine

from export_center import metrics, repository
from export_center.attempt.batches import (
    BatchConverter,
    InexactNumber,
    InvalidRow,
    MissingColumns,
)
from export_center.attempt.context import RunContext, change_warning
from export_center.attempt.fetching import PageSizer
from export_center.attempt.stream_guard import GuardedStream
from export_center.attempt.watchdog import ShardWatchdog, Watchdog
from export_center.attempt.writes import AttemptWrites
from export_center.columns import Column
from export_center.errors import PermanentExportError, ProviderContractError
from export_center.filenames import content_disposition, download_file_name
from export_center.filespec import GZIP_MEDIA_TYPE, ZIP_MEDIA_TYPE, FileSpec
from export_center.packaging import ControlTotals, FileEntry, build_manifest, sign_manifest
from export_center.packaging.package import Package, open_package
from export_center.provider_client import Batch, ProviderRequest
from export_center.registry import ExportType
from export_center.repository import Task
from export_center.states import Phase
from export_center.storage.base import storage_error
from export_center.storage.keys import new_object_key
from export_center.writers import ExportWriter, WriterStats
from export_center.writers.formats import FileFormat, find_format, format_choices, task_format

__all__ = ["Attempt", "Producer", "abandon_file", "convert", "delivered", "task_spec"]

log = logging.getLogger(__name__)


def _aware(moment: datetime) -> datetime:
    """A task time (naive UTC from the database) as an aware UTC datetime."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def task_spec(task: Task) -> FileSpec:
    """The file a task's row asks for (its ``file_spec_json``; None: the defaults)."""
    return (
        FileSpec.from_json(orjson.loads(task.file_spec_json)) if task.file_spec_json else FileSpec()
    )


def delivered(file_format: FileFormat, spec: FileSpec) -> tuple[str, str]:
    """``(extension, content type)`` of the file a user downloads.

    Rule: a ZIP (``zip`` or a split) is ``zip``/``application/zip``; gzip adds ``.gz``
    to the format's extension (``csv.gz``, ``application/gzip``); else the format's own.
    """
    if spec.archived:
        return "zip", ZIP_MEDIA_TYPE
    if spec.compression == "gzip":
        return f"{file_format.extension}.gz", GZIP_MEDIA_TYPE
    return file_format.extension, file_format.content_type_for(spec.csv)


class Producer(Protocol):
    """Turns a claimed attempt into its stored file.

    The run (:class:`~export_center.attempt.run.ExportRun`) picks one per attempt by the
    export type, calls :meth:`produce` once, and :meth:`cleanup` when the attempt's
    leftovers must go (after the commit, after a cancel, after a failure a retry would
    meet again).
    """

    def produce(self) -> repository.StoredFile:
        """Fetch every batch, write the file and store it.

        Returns:
            What the commit records (key, name, type, size, rows, warning).

        Raises:
            ExportFailure: the export failed (permanent or transient).
            ExportCancelled, WorkerStopping, LeaseLost, WorkerInterrupted: from the
                watchdog, checked between batches and before every write to storage.
        """
        ...

    def cleanup(self, *, forget_counts: bool = False) -> None:
        """Delete what the producer keeps between attempts (nothing, or shard parts and
        checkpoints); ``forget_counts`` also clears the task's shard counts. Never
        raises."""
        ...


def convert(
    batch: Batch, converter: BatchConverter, *, offset: int, batch_no: int | None
) -> list[list[Any]]:
    """One batch of provider rows -> typed columns; a bad row fails the export.

    A batch whose values hold a float (a number orjson may have rounded) is decoded
    again exactly (:meth:`Batch.exact_rows`) and converted from that.

    Args:
        batch: the provider's answer.
        converter: the stream's converter (its declared columns).
        offset: rows of the same stream before this batch; the ``i``-th row of the
            batch (0-based) is named row ``offset + i + 1`` in messages.
        batch_no: the batch's number in its stream (1-based), named when a declared
            column is in no row; None: "the batch".

    Returns:
        The typed values, column-major.

    Raises:
        ProviderContractError: ``PROVIDER_CONTRACT`` when a row is not a JSON object
            (with ``rowFormat: "array"``: not an array of one value per column) or a
            declared column is in no row of the batch (naming the column and the unknown
            keys the rows carry).
        PermanentExportError: ``INVALID_VALUE`` when a value does not fit its column
            ("row N, column KEY: ...").
    """
    try:
        try:
            return converter.columns_of(batch.rows, batch.arrays)
        except InexactNumber:
            return converter.columns_of(batch.exact_rows(), batch.arrays)
    except MissingColumns as exc:
        raise ProviderContractError(exc.describe(batch_no)) from None
    except InvalidRow as exc:
        row = offset + exc.index + 1
        if exc.column is None:
            raise ProviderContractError(f"row {row} is {exc.message}") from None
        raise PermanentExportError(
            f"row {row}, column {exc.column}: {exc.message}", code="INVALID_VALUE"
        ) from None


class Attempt:
    """One claimed attempt: identity, lease, fenced writes, what it reports, its steps.

    The reported state (:attr:`phase`, :attr:`batch_no`, :attr:`cursor`,
    :attr:`processed`, :attr:`total`, :attr:`location`) is written by the producer on
    the attempt's own thread, except :attr:`location`, which a sharded producer sets
    under its own lock from the shard that failed first. Steps called from other threads
    (:meth:`fetch`, :meth:`convert`, :meth:`write` in a shard's thread) take what they
    need as arguments and read none of it.

    Args:
        engine: the export center's database.
        context: what every attempt of the process shares.
        task: the task row as read at claim time.
        version: the claimed ``dispatch_version``.
        owner: the lease owner that claimed it.
        object_key: the key recorded at claim for this attempt's file (a new one when
            None).
        claimed_at: ``time.monotonic()`` just before the claim was sent (the start of
            the lease by this process's clock; default: now).
        shard_lease_seconds: set for a shard runner of another worker: its watchdog
            keeps the claimed shard's lease of this length
            (:class:`~export_center.attempt.watchdog.ShardWatchdog`, renewed every third
            of it at most) instead of the task's.

    Attributes:
        phase: the phase written with progress and named in a failure message.
        batch_no: the single stream's batch number (1-based; 0 before the first).
        cursor: the cursor of the batch being fetched (single stream), or None.
        processed: rows written so far (the file's rows once stored).
        total: the provider's row estimate, or None.
        location: where the attempt failed when that is not "batch N", or None.
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
        shard_lease_seconds: float | None = None,
    ) -> None:
        self.engine = engine
        self.ctx = context
        self.task = task
        self.task_id: int = task.id
        self.version = version
        self.owner = owner
        self.file_format = task_format(task.format)
        self.spec = task_spec(task)
        self.ext, self._content_type = delivered(self.file_format, self.spec)
        #: For each file column the index of its values among the provider's columns,
        #: None while the file has the provider's columns as they are.
        self.indexes: list[int] | None = None
        #: The chosen keys every batch request carries (a provider may send only
        #: these), None when the file has every column.
        self.chosen_keys = [c.key for c in self.spec.columns] or None
        #: A sharded attempt stores typed rows parts and renders the delivered file from
        #: them through :meth:`open_package` (gzip, zip, split); else the format's parts
        #: are joined as they are (``attempt.finalize``).
        self.renders_parts = not self.spec.is_plain
        #: The provider's snapshot token of the file (the first batch's), for the manifest.
        self.snapshot_token: str | None = None
        self.object_key = object_key or new_object_key(
            task.task_no, self.ext, tenant=task.tenant_id
        )
        self.file_name = download_file_name(task.task_name, self.ext)
        self.phase = Phase.FETCH
        self.batch_no = 0
        self.cursor: str | None = None
        self.processed = 0
        self.total: int | None = None
        self.location: str | None = None
        self._last_progress = 0.0
        settings = context.settings.task
        lease, heartbeat = float(settings.lease_seconds), settings.heartbeat_seconds
        if shard_lease_seconds is not None:
            lease, heartbeat = shard_lease_seconds, min(heartbeat, shard_lease_seconds / 3)
        self.watchdog = (Watchdog if shard_lease_seconds is None else ShardWatchdog)(
            engine,
            task_id=self.task_id,
            version=version,
            owner=owner,
            lease_seconds=lease,
            heartbeat_seconds=heartbeat,
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

    # ------------------------------------------------------------------ what to ask

    def export_type(self) -> ExportType:
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
        if find_format(self.task.format) is None:
            raise PermanentExportError(
                f"unknown file format {self.task.format!r} ({format_choices()})",
                code="UNKNOWN_FORMAT",
            )
        return etype

    def provider_request(self, etype: ExportType) -> ProviderRequest:
        """The identity part of every batch request of this attempt (no shard)."""
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

    # ------------------------------------------------------------------ batches

    def fetch(
        self,
        request: ProviderRequest,
        cursor: str | None,
        snapshot: str | None,
        abort: threading.Event,
        time_limit: float,
        pages: PageSizer,
    ) -> Batch:
        """One batch at the page size ``pages`` holds for this stream (halved after a
        page too large), stopping when ``abort`` is set; runs in a fetch thread.

        Raises:
            ExportFailure: the provider failed for good or broke the contract.
            ExportCancelled, LeaseLost, ...: from the watchdog, checked first.
        """
        self.watchdog.check()
        return pages.fetch(
            lambda limit: self.ctx.provider.fetch(
                request,
                cursor=cursor,
                snapshot_token=snapshot,
                limit=limit,
                time_limit=time_limit,
                abort=abort,
                columns=self.chosen_keys,
            )
        )

    def convert(
        self, batch: Batch, converter: BatchConverter, *, offset: int, batch_no: int | None
    ) -> list[list[Any]]:
        """:func:`convert` (rows named from ``offset + 1``, the stream's own count).

        Raises:
            ProviderContractError, PermanentExportError: see :func:`convert`.
        """
        return convert(batch, converter, offset=offset, batch_no=batch_no)

    def file_columns(self, declared: Sequence[Column]) -> list[Column]:
        """The file's columns: the chosen ones among the provider's ``declared``, in the
        chosen order, titled in the chosen language or renamed (:meth:`FileSpec.project`);
        sets :attr:`indexes`, which :meth:`write` projects every batch with.

        Raises:
            PermanentExportError: ``UNKNOWN_COLUMN``, a chosen key the provider does not
                declare (it changed since the export was asked for).
        """
        try:
            indexes, columns = self.spec.project(declared)
        except KeyError as exc:
            keys = ", ".join(c.key for c in declared)
            raise PermanentExportError(
                f"column {exc.args[0]!r} was chosen, but the provider does not declare it "
                f"(its columns: {keys}); ask again with its columns",
                code="UNKNOWN_COLUMN",
            ) from None
        self.indexes = None if indexes == list(range(len(declared))) else indexes
        return columns

    def open_package(self, stream: BinaryIO, columns: Sequence[Column]) -> Package:
        """The delivered file's writer (:func:`~export_center.packaging.package.
        open_package`): the format's writer, in gzip or a ZIP of parts as the spec asks,
        hashing what it delivers and counting the control totals; the size cap applies
        to the delivered bytes, and a ZIP's ``manifest.json`` is signed."""
        return open_package(
            stream,
            self.file_format,
            columns,
            self.spec,
            time_zone=self.task.time_zone,
            max_bytes=self.ctx.settings.file_size_cap_bytes,
            file_stem=self.file_name[: -len(self.ext) - 1],
            zip_time=_aware(self.task.requested_at),
            manifest=lambda files, totals: self._inner_manifest(columns, files, totals),
        )

    def _inner_manifest(
        self, columns: Sequence[Column], files: Sequence[FileEntry], totals: ControlTotals
    ) -> dict[str, Any]:
        """The signed ``manifest.json`` inside a ZIP: the task's manifest without the
        archive's own hash and the finish time (neither is known inside the ZIP)."""
        task = self.task
        body = build_manifest(
            task_id=task.task_no,
            export_type=task.export_type,
            parameters=orjson.loads(task.parameters_json),
            file_format=self.file_format.name,
            options=self.spec.options_for(self.file_format),
            time_zone=task.time_zone,
            columns=columns,
            files=files,
            archive=None,
            control_totals=totals.as_json(),
            snapshot_token=self.snapshot_token,
            created_at=_aware(task.requested_at),
            finished_at=None,
        )
        return sign_manifest(body, self.ctx.settings.manifest_secret)

    def project(self, typed: list[list[Any]]) -> list[list[Any]]:
        """A batch of the provider's typed columns as the file's columns (:attr:`indexes`)."""
        indexes = self.indexes
        return typed if indexes is None else [typed[i] for i in indexes]

    def write(self, writer: ExportWriter, typed: list[list[Any]]) -> None:
        """Write one batch of the file's typed columns (:meth:`project` them first) to the
        file's writer or a shard's part writer.

        Raises:
            StorageError: the file cannot be written.
        """
        try:
            writer.write_columns(typed)
        except OSError as exc:
            raise storage_error(exc, "cannot write the file") from exc

    # ------------------------------------------------------------------ the file

    @property
    def content_type(self) -> str:
        """The delivered file's MIME type (:func:`delivered`)."""
        return self._content_type

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
                content_type=self.content_type,
                content_disposition=content_disposition(self.file_name),
            )
        except OSError as exc:
            raise storage_error(exc, "cannot open the file") from exc
        return GuardedStream(raw, self.watchdog.check, "cannot write the file")  # type: ignore[return-value]

    def store(self, stream: BinaryIO) -> int:
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

    def stored(
        self,
        stats: WriterStats,
        size: int,
        notes: Sequence[str],
        manifest: dict[str, Any] | None = None,
    ) -> repository.StoredFile:
        """What the commit records: key, name, type, size, :attr:`processed` rows, the
        warning (the writer's changes and the converter's ``notes``) and the manifest's
        body (files, hashes, control totals), signed when it is read."""
        warning = change_warning(stats, notes)
        if warning:
            log.warning("export succeeded with changes: %s", warning, extra=self.log_fields())
        metrics.ROWS_PROCESSED.labels(self.task.export_type).inc(self.processed)
        metrics.STORAGE_BYTES.inc(size)
        return repository.StoredFile(
            object_key=self.object_key,
            file_name=self.file_name,
            content_type=self.content_type,
            size_bytes=size,
            row_count=self.processed,
            warning=warning,
            manifest_json=None if manifest is None else orjson.dumps(manifest).decode(),
        )

    @staticmethod
    def abandon_file(stream: BinaryIO) -> None:
        """:func:`abandon_file`."""
        abandon_file(stream)

    def discard(self) -> None:
        """Delete the attempt's partial or uncommitted file (every failure path); never
        raises (the reconciler's orphan scan removes what is left)."""
        try:
            self.ctx.storage.delete(self.object_key)
        except Exception:
            log.warning("could not delete the partial file", extra=self.log_fields(), exc_info=True)

    # ------------------------------------------------------------------ reporting

    def progress(self, *, force: bool = False, shards: tuple[int, int] | None = None) -> None:
        """Write :attr:`processed`, :attr:`total` and :attr:`phase` (and a sharded
        export's ``(done, total)`` shard counts), at most every
        ``task.progress_every_seconds`` unless ``force``; fenced by lease owner and
        dispatch version.

        Raises:
            LeaseLost: the write touched no row (another attempt owns the task).
            WorkerInterrupted: the database did not answer while the lease lasted.
        """
        now = time.monotonic()
        if not force and now - self._last_progress < self.ctx.settings.task.progress_every_seconds:
            return
        self._last_progress = now
        self.writes.progress(
            processed=self.processed, total=self.total, phase=self.phase, shards=shards
        )

    def log_fields(self) -> dict[str, Any]:
        """The ``extra`` of every log line of the attempt: task number, dispatch version,
        export type, tenant and trace id (camelCase keys)."""
        return {
            "taskId": self.task.task_no,
            "dispatchVersion": self.version,
            "exportType": self.task.export_type,
            "tenantId": self.task.tenant_id,
            "traceId": self.task.trace_id,
        }


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
