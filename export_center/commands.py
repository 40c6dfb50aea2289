"""The command message: the one format every part of the service agrees on.

A command tells a worker "run dispatch version V of task T". It carries identifiers
only, never the export's data or parameters (a command may sit in a broker, and the
database is the only source of truth):

* body (JSON): ``{schemaVersion, eventId, taskId, exportType, dispatchVersion,
  traceId}``, written into the outbox row in the transaction that changed the task
  (:func:`encode`), sent as is by the publisher, and read back by the consumer
  (:func:`decode`);
* user properties (strings): ``eventId``, ``taskId``, ``dispatchVersion``,
  ``schemaVersion`` and ``traceId`` (:func:`properties`), so that a dead-lettered
  message whose body cannot be read still names its task and version
  (:data:`REQUIRED_PROPERTIES`);
* tag :data:`COMMAND_TAG`; message key: the task id.

A *shard wake-up* of a distributed export (``kind: "shard"``) has the same fields plus
``kind`` and ``shardNo``: it asks any worker to claim a shard of that task's dispatch
version (:func:`encode_shard`; tag :data:`SHARD_TAG`). A body without ``kind`` is a task
command.

A body that does not parse, or whose ``schemaVersion`` this version does not support,
raises :class:`InvalidCommand`: the consumer releases such a message unacknowledged so
that the broker dead-letters it after its redeliveries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "COMMAND_SCHEMA_VERSION",
    "COMMAND_TAG",
    "Command",
    "SHARD_KIND",
    "SHARD_TAG",
    "InvalidCommand",
    "REQUIRED_PROPERTIES",
    "SUPPORTED_SCHEMA_VERSIONS",
    "decode",
    "encode",
    "encode_shard",
    "properties",
]

#: Version of the command body and of the ``schemaVersion`` property.
COMMAND_SCHEMA_VERSION = 1
#: Versions this code can read.
SUPPORTED_SCHEMA_VERSIONS = frozenset({COMMAND_SCHEMA_VERSION})
#: Tag of every command message.
COMMAND_TAG = "EXPORT_TASK"
#: Tag of every shard wake-up of a distributed export.
SHARD_TAG = "EXPORT_SHARD"
#: The ``kind`` of a shard wake-up.
SHARD_KIND = "shard"
#: Properties the dead-letter handler needs to find the task of a poison message.
REQUIRED_PROPERTIES = ("eventId", "taskId", "dispatchVersion", "schemaVersion")


class InvalidCommand(ValueError):
    """A message body that is not a command this version understands."""


@dataclass(frozen=True, slots=True)
class Command:
    """A decoded command: which event asks to run which version of which task.

    ``kind`` is ``task`` (run the attempt) or ``shard`` (claim a shard of the running
    attempt; ``shard_no`` names the one the wake-up was written for).
    """

    event_id: str
    task_no: str
    dispatch_version: int
    schema_version: int
    trace_id: str | None = None
    kind: str = "task"
    shard_no: int | None = None


def encode(
    *, event_id: str, task_no: str, export_type: str, dispatch_version: int, trace_id: str
) -> str:
    """The JSON body of the command of one dispatch version.

    Returns:
        Compact JSON text (what the outbox row's ``payload_json`` holds).
    """
    return orjson.dumps(
        {
            "schemaVersion": COMMAND_SCHEMA_VERSION,
            "eventId": event_id,
            "taskId": task_no,
            "exportType": export_type,
            "dispatchVersion": int(dispatch_version),
            "traceId": trace_id,
        }
    ).decode()


def decode(body: bytes) -> Command:
    """Parse and check a command body.

    Raises:
        InvalidCommand: not JSON, not an object, a field missing or mistyped, or an
            unsupported ``schemaVersion``.
    """
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidCommand(f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidCommand("body is not a JSON object")
    schema = data.get("schemaVersion")
    if schema not in SUPPORTED_SCHEMA_VERSIONS:
        raise InvalidCommand(f"unsupported schemaVersion {schema!r}")
    event_id, task_no, version = (
        data.get("eventId"),
        data.get("taskId"),
        data.get("dispatchVersion"),
    )
    if not isinstance(event_id, str) or not isinstance(task_no, str):
        raise InvalidCommand("eventId and taskId must be strings")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidCommand("dispatchVersion must be a positive integer")
    trace = data.get("traceId")
    kind = data.get("kind", "task")
    shard_no = data.get("shardNo")
    if kind not in ("task", SHARD_KIND):
        raise InvalidCommand(f"unknown kind {kind!r}")
    if kind == SHARD_KIND and (
        isinstance(shard_no, bool) or not isinstance(shard_no, int) or shard_no < 0
    ):
        raise InvalidCommand("a shard wake-up needs shardNo, a non-negative integer")
    return Command(
        event_id,
        task_no,
        version,
        int(schema),
        trace if isinstance(trace, str) else None,
        kind=kind,
        shard_no=shard_no if kind == SHARD_KIND else None,
    )


def encode_shard(
    *,
    event_id: str,
    task_no: str,
    export_type: str,
    dispatch_version: int,
    trace_id: str | None,
    shard_no: int,
) -> str:
    """The JSON body of the wake-up of shard ``shard_no`` of one dispatch version (the
    command's fields plus ``kind: "shard"`` and ``shardNo``)."""
    return orjson.dumps(
        {
            "schemaVersion": COMMAND_SCHEMA_VERSION,
            "eventId": event_id,
            "taskId": task_no,
            "exportType": export_type,
            "dispatchVersion": int(dispatch_version),
            "traceId": trace_id,
            "kind": SHARD_KIND,
            "shardNo": int(shard_no),
        }
    ).decode()


def properties(
    *, event_id: str, task_no: str, dispatch_version: int, payload_json: str
) -> dict[str, str]:
    """The message's user properties, from its outbox row (all values strings).

    ``schemaVersion`` and ``traceId`` are read from the stored body, so a row written by
    an older version keeps the version it was written with.
    """
    payload: Mapping[str, Any] = orjson.loads(payload_json)
    out = {
        "eventId": str(event_id),
        "taskId": str(task_no),
        "dispatchVersion": str(dispatch_version),
        "schemaVersion": str(payload.get("schemaVersion", COMMAND_SCHEMA_VERSION)),
    }
    if payload.get("traceId"):
        out["traceId"] = str(payload["traceId"])
    return out
