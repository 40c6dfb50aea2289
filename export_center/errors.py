"""The exception tree of the export center.

::

    ExportCenterError
    ├── RequestError                (the caller's fault: mapped to HTTP 4xx once, in api.app)
    │   ├── ValidationFailed        422, with a field path
    │   ├── NotFound                404 (also for tasks of other users: no existence oracle)
    │   ├── Conflict                409
    │   ├── Gone                    410 (file past its retention)
    │   ├── TooManyActiveTasks      429
    │   ├── Unauthorized            401
    │   └── Forbidden               403
    ├── ExportFailure               (one execution attempt ended; carries phase and code)
    │   ├── PermanentExportError    task -> FAILED at once
    │   │   ├── ProviderRejected    provider 4xx (not 408/429), 501, 505, 3xx; 410 snapshot expired
    │   │   ├── ProviderContractError the answer broke the provider contract (shape, limits,
    │   │   │                       a repeated cursor, a declared column in no row)
    │   │   ├── SchemaChanged       schemaHash changed between batches
    │   │   ├── RowLimitExceeded    more rows than max_rows
    │   │   ├── RowCeilingCrossed   more rows than the requester's row ceiling
    │   │   └── FileTooLarge        file size cap hit while writing
    │   └── TransientExportError    task -> PENDING with version + 1 and backoff
    │       ├── ProviderUnavailable provider 408, 429, 5xx, timeouts, connection errors
    │       │   └── ProviderTooSlow the batch took longer than its total time limit
    │       ├── PageTooLarge        the page was too large (413, over 4 MB, no memory to
    │       │                       decode it): the caller asks again with fewer rows
    │       ├── StorageError        the file could not be written or moved
    │       │   └── StorageFull     no space left on the file storage (longer backoff)
    │       └── DeadlinePassed      execution_deadline_at reached
    ├── LeaseLost                   the attempt lost its lease: stop, delete the file, write nothing
    ├── FetchAborted                the attempt stopped waiting for a fetch (raised in the
    │                               abandoned fetch thread; its result is never used)
    ├── WorkerStopping              graceful shutdown: hand the attempt back, no retry used
    ├── WorkerInterrupted           the worker could not go on for a reason outside the
    │                               export (the database did not answer while the lease
    │                               lasted, the process was paused): hand the attempt back
    │                               as soon as the database answers, no retry used
    ├── DatabaseUnavailable         the database did not answer for a caller's whole budget
    ├── TransportError              the broker did not take or hand out a message (the
    │                               publisher and the receive loops back off)
    └── ExportCancelled             the user asked to cancel: stop, delete the file, CANCELLED

Each failure carries a machine-readable ``code`` that lands in ``failure_code``.
:data:`RETRY_CANNOT_HELP` names the codes a retry of the same export meets again.
"""

from __future__ import annotations

__all__ = [
    "Conflict",
    "DatabaseUnavailable",
    "DeadlinePassed",
    "ExportCancelled",
    "ExportCenterError",
    "ExportFailure",
    "FetchAborted",
    "FileTooLarge",
    "Forbidden",
    "Gone",
    "LeaseLost",
    "NotFound",
    "PageTooLarge",
    "PermanentExportError",
    "RETRY_CANNOT_HELP",
    "ProviderContractError",
    "ProviderRejected",
    "ProviderTooSlow",
    "ProviderUnavailable",
    "RequestError",
    "RowCeilingCrossed",
    "RowLimitExceeded",
    "SchemaChanged",
    "StorageError",
    "StorageFull",
    "TooManyActiveTasks",
    "TransientExportError",
    "TransportError",
    "Unauthorized",
    "ValidationFailed",
    "WorkerInterrupted",
    "WorkerStopping",
]


class ExportCenterError(Exception):
    """Root of every error the export center raises on purpose."""


class RequestError(ExportCenterError):
    """A request the caller can fix; answered with ``status`` and a JSON body."""

    status = 400
    code = "BAD_REQUEST"
    #: The same sentence in Chinese, for the refusals a person in the page meets with
    #: their own figures in it (quotas, row ceilings); None elsewhere (the page words
    #: every code itself). Answered as ``messageZh`` when set.
    message_zh: str | None = None

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.field = field


class ValidationFailed(RequestError):
    """422: a field is missing, malformed or out of range."""

    status = 422
    code = "VALIDATION_FAILED"


class NotFound(RequestError):
    """404: no such task for this caller (other users' tasks look the same)."""

    status = 404
    code = "NOT_FOUND"


class Conflict(RequestError):
    """409: the task is not in a state that allows the action."""

    status = 409
    code = "CONFLICT"


class Gone(RequestError):
    """410: the file existed but its retention ended and it was deleted."""

    status = 410
    code = "FILE_EXPIRED"


class TooManyActiveTasks(RequestError):
    """429: the per-user or per-type active-task limit is reached.

    Attributes:
        retry_after: seconds after which a new try may succeed (the ``Retry-After``
            header): when the first of the active exports is expected to end.
    """

    status = 429
    code = "TOO_MANY_ACTIVE_TASKS"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        field: str | None = None,
        retry_after: int = 10,
    ):
        super().__init__(message, code=code, field=field)
        self.retry_after = retry_after


class Unauthorized(RequestError):
    """401: no valid bearer token."""

    status = 401
    code = "UNAUTHORIZED"


class Forbidden(RequestError):
    """403: authenticated, but not allowed (or a bad or expired download link)."""

    status = 403
    code = "FORBIDDEN"


class ExportFailure(ExportCenterError):
    """An execution attempt ended with an error.

    Args:
        message: the cause, in a sentence.
        code: machine-readable failure code stored in ``failure_code``.
    """

    code = "EXPORT_FAILED"
    permanent = True

    def __init__(self, message: str, *, code: str | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


class PermanentExportError(ExportFailure):
    """Retrying cannot help: the task goes to FAILED at once."""

    permanent = True


class ProviderRejected(PermanentExportError):
    """The provider answered a status that retrying cannot change.

    A 4xx other than 408 and 429 (410: the snapshot token expired, code
    ``SNAPSHOT_EXPIRED``), 501 or 505, or a redirect (3xx, code ``PROVIDER_REDIRECTED``:
    never followed, as the new address could leave the allow-listed host).
    """

    code = "PROVIDER_REJECTED"


class ProviderContractError(PermanentExportError):
    """The provider's answer broke the provider contract; the message says how.

    The message always starts with ``"provider broke the contract: "``.

    Args:
        detail: what was wrong, e.g. ``"rows must be a list"``.
    """

    code = "PROVIDER_CONTRACT"

    def __init__(self, detail: str):
        super().__init__(f"provider broke the contract: {detail}")


class SchemaChanged(PermanentExportError):
    """The provider's ``schemaHash`` changed between batches."""

    code = "SCHEMA_CHANGED"


class RowLimitExceeded(PermanentExportError):
    """The export has more rows than the type's ``max_rows``."""

    code = "ROW_LIMIT_EXCEEDED"


class RowCeilingCrossed(PermanentExportError):
    """The export has more rows than the requester's row ceiling (copied at creation)."""

    code = "ROW_CEILING"


class FileTooLarge(PermanentExportError):
    """The file grew past the size cap while being written."""

    code = "FILE_TOO_LARGE"


#: Failure codes that a retry of the same export meets again: the same rows hit the same
#: row or size cap, and a type or format that is gone stays gone. The API marks such a
#: failed task ``retryable: false``, so the page offers "export again" (with narrower
#: filters) instead of a retry. An operator may still retry after raising the cap.
RETRY_CANNOT_HELP = frozenset(
    {
        "ROW_LIMIT_EXCEEDED",
        "ROW_CEILING",
        "FILE_TOO_LARGE",
        "UNKNOWN_EXPORT_TYPE",
        "UNKNOWN_FORMAT",
        "TOO_MANY_PARTS",
    }
)


class TransientExportError(ExportFailure):
    """Worth retrying: the task goes back to PENDING with a backoff."""

    code = "TRANSIENT"
    permanent = False


class ProviderUnavailable(TransientExportError):
    """Provider 408, 429, 5xx (not 501/505), timeout or connection error on every try."""

    code = "PROVIDER_UNAVAILABLE"


class ProviderTooSlow(ProviderUnavailable):
    """One batch took longer than its total time limit (retries and pauses included)."""

    code = "PROVIDER_TOO_SLOW"


class PageTooLarge(TransientExportError):
    """The page was too large: the provider answered 413, the answer was over the 4 MB
    cap, or decoding it ran out of memory.

    Raised at once, without asking for the same size again: the caller
    (:class:`export_center.attempt.fetching.PageSizer`) asks for the same cursor with half the
    rows, down to a floor, and turns the error into a permanent one at the floor.

    Args:
        reason: what said so, e.g. ``"provider answered 413 Payload Too Large"``.
        limit: the page size (rows) that was too large.
        cause: ``"413"`` (the provider refused), ``"body"`` (over the 4 MB cap) or
            ``"memory"`` (a MemoryError while decoding).
        detail: the provider's ``" (code: message)"``, if it sent one.
    """

    code = "PAGE_TOO_LARGE"

    def __init__(self, reason: str, *, limit: int, cause: str, detail: str = ""):
        super().__init__(f"{reason} for a page of {limit:,} rows{detail}")
        self.reason = reason
        self.limit = limit
        self.cause = cause
        self.detail = detail


class StorageError(TransientExportError):
    """The file could not be written, moved or deleted."""

    code = "STORAGE_ERROR"


class StorageFull(StorageError):
    """The file storage has no space left (``ENOSPC``, ``EDQUOT``).

    Still ``STORAGE_ERROR`` (what operators look for), but its automatic retry waits at
    least ``task.storage_full_backoff_seconds``: a retry a few seconds later would meet
    the same full disk.
    """


class DeadlinePassed(TransientExportError):
    """The attempt ran past ``execution_deadline_at``."""

    code = "DEADLINE_PASSED"


class LeaseLost(ExportCenterError):
    """This attempt lost its lease (or was aborted): delete the partial file, write nothing."""


class FetchAborted(ExportCenterError):
    """The attempt stopped waiting for this fetch (cancel, deadline, shutdown, an error).

    Raised inside the abandoned fetch thread only, so that it closes its response and
    ends; nobody reads it.
    """


class WorkerStopping(ExportCenterError):
    """The process is shutting down: the attempt is handed back without using a retry."""


class WorkerInterrupted(ExportCenterError):
    """The worker cannot go on for a reason outside the export; the message says which.

    The database did not answer for as long as the attempt's lease lasted, or the process
    did not run (SIGSTOP, a paused VM, heavy swapping) until its lease may have run out.
    The attempt stops writing at once and hands its task back (PENDING, a new dispatch
    version, the attempt not counted) the moment the database answers; when another
    worker took the task meanwhile, that write touches nothing.
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class DatabaseUnavailable(ExportCenterError):
    """The database did not answer for the whole budget of a caller (every try a blip).

    Attributes:
        what: what the caller tried to do ("renew the lease").
        seconds: how long it tried, seconds.
        cause: the last error, one line.
    """

    def __init__(self, what: str, seconds: float, cause: str) -> None:
        super().__init__(f"the database did not answer for {seconds:.0f} s ({what}): {cause}")
        self.what = what
        self.seconds = seconds
        self.cause = cause


class TransportError(ExportCenterError):
    """The transport could not take or hand out a message (the publisher backs off).

    Raised by the transport adapters (:mod:`export_center.transport`), which export it
    under the same name.
    """


class ExportCancelled(ExportCenterError):
    """The user asked to cancel; the worker stops, deletes its file, ends CANCELLED."""
