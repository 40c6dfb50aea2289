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
    "InvalidCommand",
    "REQUIRED_PROPERTIES",
    "SUPPORTED_SCHEMA_VERSIONS",
    "decode",
    "encode",
    "properties",
]

#: Version of the command body and of the ``schemaVersion`` property.
COMMAND_SCHEMA_VERSION = 1
#: Versions this code can read.
SUPPORTED_SCHEMA_VERSIONS = frozenset({COMMAND_SCHEMA_VERSION})
#: Tag of every command message.
COMMAND_TAG = "EXPORT_TASK"
#: Properties the dead-letter handler needs to find the task of a poison message.
REQUIRED_PROPERTIES = ("eventId", "taskId", "dispatchVersion", "schemaVersion")


class InvalidCommand(ValueError):
    """A message body that is not a command this version understands."""


@dataclass(frozen=True, slots=True)
class Command:
    """A decoded command: which event asks to run which version of which task."""

    event_id: str
    task_no: str
    dispatch_version: int
    schema_version: int
    trace_id: str | None = None


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
    return Command(
        event_id, task_no, version, int(schema), trace if isinstance(trace, str) else None
    )


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
