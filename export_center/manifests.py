"""A task's signed manifest: what the attempt recorded, completed from the task row.

The attempt that commits a file records the manifest's *body* in ``manifest_json``
(:func:`manifest_body`: the file's columns, its files with rows, bytes and SHA-256, the
archive, the control totals and the snapshot token) in the same fenced UPDATE that
marks the task succeeded. :func:`signed_manifest` completes it with what the task row
holds (task id, type, parameters, format, options, time zone, created and finished
times) and signs it with the installation's manifest key
(:mod:`export_center.packaging.manifest`), so the API and the operator CLI answer the
same document, byte for byte, on every read.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

import orjson

from export_center.columns import Column, ColumnType
from export_center.filespec import FileSpec
from export_center.packaging.manifest import (
    ArchiveEntry,
    FileEntry,
    build_manifest,
    sign_manifest,
)
from export_center.repository import Task
from export_center.states import TaskStatus
from export_center.writers.formats import task_format

__all__ = ["manifest_body", "signed_manifest"]


def manifest_body(
    *,
    columns: Sequence[Column],
    files: Sequence[FileEntry],
    archive: ArchiveEntry | None,
    control_totals: dict[str, Any],
    snapshot_token: str | None,
) -> dict[str, Any]:
    """What an attempt records of its file for the manifest (JSON-able)."""
    return {
        "columns": [{"key": c.key, "title": c.title, "type": str(c.type)} for c in columns],
        "files": [f.as_json() for f in files],
        "archive": None if archive is None else archive.as_json(),
        "controlTotals": control_totals,
        "snapshotToken": snapshot_token,
    }


def _aware(moment: _dt.datetime | None) -> _dt.datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=_dt.UTC)


def signed_manifest(task: Task, key: str) -> dict[str, Any] | None:
    """The signed manifest of ``task``, or None when it has none.

    A task has a manifest once it succeeded with this release (it stays after the file
    expired: it still proves what was delivered); a task that has not succeeded, or
    succeeded before manifests were recorded, has none.

    Args:
        task: the task row.
        key: the installation's manifest key (``Settings.manifest_secret``).

    Returns:
        The manifest (``packaging.manifest`` names its members) with its ``signature``.
    """
    if task.manifest_json is None or task.status not in (
        TaskStatus.SUCCEEDED,
        TaskStatus.EXPIRED,
    ):
        return None
    body = orjson.loads(task.manifest_json)
    spec = FileSpec.from_text(task.file_spec_json)
    manifest = build_manifest(
        task_id=task.task_no,
        export_type=task.export_type,
        parameters=orjson.loads(task.parameters_json),
        file_format=task.format.lower(),
        options=spec.options_for(task_format(task.format)),
        time_zone=task.time_zone,
        columns=[Column(c["key"], c["title"], ColumnType(c["type"])) for c in body["columns"]],
        files=[FileEntry(**f) for f in body["files"]],
        archive=None if body["archive"] is None else ArchiveEntry(**body["archive"]),
        control_totals=body["controlTotals"],
        snapshot_token=body["snapshotToken"],
        created_at=_aware(task.requested_at),
        finished_at=_aware(task.completed_at),
    )
    return sign_manifest(manifest, key)
