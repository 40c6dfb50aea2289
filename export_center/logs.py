"""JSON logs carrying task identifiers, never row data (DESIGN.md "Observability")."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["JsonFormatter", "configure_logging", "log_context"]

_CONTEXT: ContextVar[Mapping[str, object] | None] = ContextVar("export_center_log", default=None)

_FIELDS = (
    "taskId",
    "eventId",
    "dispatchVersion",
    "exportType",
    "tenantId",
    "traceId",
    "spanId",
    "messageId",
    "branch",
    "reason",
    "deliveryAttempt",
    "attempt",
    "properties",
)


@contextmanager
def log_context(**fields: object) -> Iterator[None]:
    """Add ``fields`` (task id, trace id, ...) to every log line written inside the block,
    in this thread or context (a thread pool sees them when its work is submitted with
    ``contextvars.copy_context().run``). A field given on the log call itself wins."""
    known = {k: v for k, v in fields.items() if v is not None}
    token = _CONTEXT.set({**(_CONTEXT.get() or {}), **known})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the known ids (from
    the log call's ``extra`` or the surrounding :func:`log_context`)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = _CONTEXT.get() or {}
        for name in _FIELDS:
            if hasattr(record, name):
                out[name] = getattr(record, name)
            elif name in context:
                out[name] = context[name]
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(level: str = "INFO", *, file: Path | None = None) -> None:
    """Send every log line, the export center's and uvicorn's, as JSON to ``file``
    (appending) or to stderr; uvicorn's access log is off (it would carry signed links)."""
    handler: logging.Handler
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # uvicorn's own loggers write through the root handler too (uvicorn runs with
    # log_config=None), so one format covers every line. Access lines stay off: they
    # would carry signed download links.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    for noisy in ("apscheduler", "httpx", "httpcore", "uvicorn.access", "rocketmq-python-client"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
