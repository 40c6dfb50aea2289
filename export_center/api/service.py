"""What the API does, apart from HTTP: create, list, find, cancel, retry, download.

The routes are thin: they parse the request, call one function here and present the
result. The rules live here, in one place:

* :func:`task_in_scope` / :func:`visible_task`: the one lookup of detail, download,
  cancel, retry and list cursors. A task the caller may not see answers exactly like a
  task that does not exist (404 ``TASK_NOT_FOUND``), so no route is an existence oracle
  for other tenants' tasks. The rule itself is :mod:`export_center.access`.
* :func:`create_export`: validation against the registry, idempotency, the duplicate
  window and the limits, in one transaction with the first outbox row.
* :func:`list_visible`: the list in the caller's scope, re-checked row by row.
* :func:`cancel_task`, :func:`retry_task`, :func:`signed_link_for`,
  :func:`file_for_link`.

Every error is an :class:`~export_center.errors.RequestError` with a code, a field and a
sentence; the API maps them to HTTP in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError

from export_center import metrics, operations, repository
from export_center.access import Scope, in_scope, link_scope, scope_of
from export_center.api.create_rules import create_in, new_task_of
from export_center.api.file_spec import checked_format, checked_notify, checked_type, file_spec_of
from export_center.api.governance import governed
from export_center.api.schemas import ExportCreate
from export_center.auth import Identity, header_language_of
from export_center.db import reading
from export_center.errors import (
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    TooManyActiveTasks,
    ValidationFailed,
)
from export_center.ids import TASK_NO_PATTERN
from export_center.link_limits import link_ttl
from export_center.links import LinkGrant, sign_download, verify_download
from export_center.notify.targets import (
    targets_json,
)
from export_center.outages import is_deadlock
from export_center.repository import CreateReason, Task
from export_center.runtime import Runtime
from export_center.states import TaskStatus, state_phrase

__all__ = [
    "STATE_FILTER",
    "Created",
    "actor_of",
    "cancel_task",
    "create_export",
    "FileGrant",
    "file_for_link",
    "list_visible",
    "new_task_for",
    "retry_task",
    "signed_link_for",
    "task_in_scope",
    "visible_task",
]

#: Characters a task name may not hold: it is shown in lists, mail and file names.

#: API state names to stored statuses (the list's ``state`` filter).
STATE_FILTER = {
    "queued": TaskStatus.PENDING,
    "running": TaskStatus.RUNNING,
    "succeeded": TaskStatus.SUCCEEDED,
    "failed": TaskStatus.FAILED,
    "cancelled": TaskStatus.CANCELLED,
    "expired": TaskStatus.EXPIRED,
    "awaiting_approval": TaskStatus.AWAITING_APPROVAL,
    "rejected": TaskStatus.REJECTED,
}


def task_in_scope(runtime: Runtime, task_no: str, scope: Scope) -> Task:
    """The task with public id ``task_no`` when it is visible in ``scope``.

    Raises:
        NotFound: ``TASK_NOT_FOUND`` when the id is malformed, the task does not exist,
            or it is outside ``scope`` (the same answer in all three cases).
    """
    missing = NotFound("no such export task", code="TASK_NOT_FOUND")
    if not TASK_NO_PATTERN.match(task_no):
        raise missing
    with reading(runtime.engine) as conn:
        task = repository.read_task_by_no(conn, task_no)
    if task is None or not in_scope(task, scope):
        raise missing
    return task


def visible_task(runtime: Runtime, task_no: str, user: Identity) -> Task:
    """The task when the signed-in ``user`` may see it (:func:`task_in_scope` with the
    user's scope).

    Raises:
        NotFound: ``TASK_NOT_FOUND``, also for tasks of other users and tenants.
    """
    return task_in_scope(runtime, task_no, scope_of(user))


# --------------------------------------------------------------------------- create


@dataclass(frozen=True, slots=True)
class Created:
    """What a create answered: the task, and whether it was made now, replayed for an
    idempotency key, or the active duplicate of the same export."""

    task: Task
    reason: CreateReason


def _request_key(body: ExportCreate, header: str | None) -> tuple[str | None, str]:
    """The idempotency key of a create, from ``requestId`` or the ``Idempotency-Key``
    header, and the name the caller used for it.

    Raises:
        ValidationFailed: the two differ, or the key is not 1..128 characters.
    """
    if header is not None and body.requestId is not None and header != body.requestId:
        raise ValidationFailed(
            "Idempotency-Key and requestId differ",
            code="IDEMPOTENCY_KEY_MISMATCH",
            field="requestId",
        )
    key = body.requestId or header
    if key is not None and not 0 < len(key) <= 128:
        raise ValidationFailed(
            "Idempotency-Key must have 1..128 characters",
            code="INVALID_IDEMPOTENCY_KEY",
            field="requestId",
        )
    return key, "requestId" if body.requestId is not None else "Idempotency-Key"


def new_task_for(
    runtime: Runtime,
    user: Identity,
    body: ExportCreate,
    idempotency_key: str | None,
    trace_id: str | None = None,
    accept_language: str | None = None,
) -> repository.NewTask:
    """The checked :class:`~export_center.repository.NewTask` of a create body, without
    writing anything: type, permission, format, file spec, idempotency key, task name,
    parameters and time zone, in that order (the create's codes).

    Raises:
        ValidationFailed, Forbidden, Conflict: as :func:`create_export`.
    """
    etype = checked_type(runtime, user, body.exportType)
    file_format = checked_format(body.format)
    spec = file_spec_of(
        runtime, etype, body, file_format, accept_language or header_language_of(user)
    )
    key, _ = _request_key(body, idempotency_key)
    new = new_task_of(
        etype,
        runtime.settings,
        user,
        body,
        spec,
        request_id=key,
        trace_id=trace_id,
        notify_json=targets_json(checked_notify(runtime, user, body.notify)),
    )
    return governed(runtime, user, etype, spec, new)  # ceiling, estimate, approval


def create_export(
    runtime: Runtime,
    user: Identity,
    body: ExportCreate,
    idempotency_key: str | None,
    trace_id: str | None = None,
    accept_language: str | None = None,
) -> Created:
    """Validate and create one export for ``user`` (or return the task it names).

    ``trace_id`` (from the caller's ``traceparent``) becomes the task's trace id, which
    its commands, logs and provider calls carry; None starts a new trace.
    ``accept_language`` (the request's header) picks the header language when the body's
    ``options.language`` does not.

    Raises:
        ValidationFailed, Forbidden, Conflict: a field at fault, a type the user may not
            use, a disabled type, or a key used for another export
            (``IDEMPOTENCY_KEY_REUSED``, naming what differs).
        TooManyActiveTasks: a limit is reached; ``retry_after`` is when the first active
            export is expected to end.
    """
    new = new_task_for(runtime, user, body, idempotency_key, trace_id, accept_language)
    key_name = "requestId" if body.requestId is not None else "Idempotency-Key"
    try:
        result = _create_once(runtime, new)
    except repository.LimitReached as exc:
        raise _limit_error(runtime, user, new.export_type, exc) from None
    if result.reason is CreateReason.KEY_REUSED:
        raise _key_reused(result.task, new, key_name)
    if result.created:
        metrics.TASKS_CREATED.labels(new.export_type).inc()
        runtime.publish_soon()  # the outbox row is committed: dispatch it now
    return Created(result.task, result.reason)


def _create_once(runtime: Runtime, new: repository.NewTask) -> repository.CreateResult:
    """Run the create transaction; a deadlock victim (two creates making the same new
    guard row at once) is rolled back whole by the server and run again, up to 3 tries."""
    tries = 3
    while True:
        tries -= 1
        try:
            with runtime.engine.begin() as conn:
                return create_in(conn, runtime.settings, new)
        except DBAPIError as exc:
            if tries == 0 or not is_deadlock(exc):
                raise


def _limit_error(
    runtime: Runtime, user: Identity, export_type: str, exc: repository.LimitReached
) -> TooManyActiveTasks:
    from export_center.api.present import first_end_seconds

    by_user = exc.scope == "user"
    with reading(runtime.engine) as conn:
        active = repository.active_tasks(
            conn,
            tenant_id=user.tenant if by_user else None,
            requested_by=user.user if by_user else None,
            export_type=None if by_user else export_type,
        )
    retry_after = first_end_seconds(active)
    message = (
        f"you already have {exc.limit} exports queued or running; wait for one to finish"
        if by_user
        else f"too many {export_type} exports are running right now; try again in about "
        f"{retry_after} s"
    )
    return TooManyActiveTasks(
        message,
        code="TOO_MANY_ACTIVE_TASKS" if by_user else "TOO_MANY_ACTIVE_TASKS_FOR_TYPE",
        retry_after=retry_after,
    )


def _key_reused(task: Task, new: repository.NewTask, key_name: str) -> Conflict:
    differs = [
        name
        for name, same in (
            ("export type", task.export_type == new.export_type),
            ("format", task.format == new.format),
            ("time zone", task.time_zone == new.time_zone),
            ("columns and options", task.file_spec_json == new.file_spec_json),
            ("notify", task.notify_json == new.notify_json),
            (
                "parameters",
                task.parameters_hash == repository.canonical_parameters(new.parameters)[1],
            ),
        )
        if not same
    ]
    return Conflict(
        f"{key_name} {new.request_id!r} was already used for another export "
        f"({task.export_type}, {task.format.lower()}); this request differs "
        f"in {' and '.join(differs) or 'its content'}; use a new key",
        code="IDEMPOTENCY_KEY_REUSED",
        field=key_name,
    )


# --------------------------------------------------------------------------- list


def _statuses(state: str | None) -> list[str] | None:
    if not state:
        return None
    try:
        return [STATE_FILTER[s.strip().lower()].value for s in state.split(",") if s.strip()]
    except KeyError:
        raise ValidationFailed(
            f"state must be among {', '.join(STATE_FILTER)}", code="INVALID_STATE", field="state"
        ) from None


def list_visible(
    runtime: Runtime,
    user: Identity,
    *,
    state: str | None,
    export_types: Sequence[str] | None,
    owner: str | None,
    limit: int,
    cursor: str | None,
) -> tuple[list[Task], str | None]:
    """One page of the tasks ``user`` sees, newest first.

    Args:
        state: comma-separated API states, or None for all.
        export_types: only these types, or None for all.
        owner: only this user's tasks (needs download-all for another user).
        limit: page size.
        cursor: the ``nextCursor`` of the previous page.

    Returns:
        ``(tasks, next_cursor)``; ``next_cursor`` is None on the last page.

    Raises:
        ValidationFailed: ``INVALID_STATE`` or ``INVALID_CURSOR``.
        Forbidden: ``PERMISSION_DENIED`` for another user's tasks without download-all.
    """
    statuses = _statuses(state)
    before_id = None
    if cursor:
        invalid = ValidationFailed(
            "cursor must be the nextCursor of a previous page of this list",
            code="INVALID_CURSOR",
            field="cursor",
        )
        try:
            before_id = visible_task(runtime, cursor, user).id
        except NotFound:
            raise invalid from None
    scope = scope_of(user)
    if owner is not None and owner != user.user and scope.owner is not None:
        raise Forbidden(
            "only platform:download:all may list other users' tasks", code="PERMISSION_DENIED"
        )
    if owner is not None:
        scope = Scope(tenant_id=scope.tenant_id, app_code=scope.app_code, owner=owner)
    with reading(runtime.engine) as conn:
        rows = repository.list_tasks(
            conn,
            scope=scope,
            statuses=statuses,
            export_types=export_types,
            limit=limit + 1,
            before_id=before_id,
        )
    next_cursor = rows[limit - 1].task_no if len(rows) > limit else None
    # The same rule in Python on every row: a database whose collation ignored case or
    # trailing spaces still could not widen the list.
    return [row for row in rows[:limit] if in_scope(row, scope)], next_cursor


# --------------------------------------------------------------------------- actions


def actor_of(user: Identity) -> str:
    """How the audit trail names a signed-in caller: ``user:<tenant>/<user>``."""
    return f"user:{user.tenant}/{user.user}"


def cancel_task(
    runtime: Runtime, user: Identity, task_no: str, *, reason: str | None = None
) -> Task:
    """Cancel a task the caller sees: a queued one at once, a running one within 10 s;
    written to the audit trail with the caller and ``reason``.

    Returns:
        The task after the request.

    Raises:
        NotFound: ``TASK_NOT_FOUND``.
        Conflict: ``NOT_CANCELLABLE`` (it already ended).
    """
    task = visible_task(runtime, task_no, user)
    return operations.cancel_task(runtime, task, actor=actor_of(user), reason=reason)


def retry_task(
    runtime: Runtime,
    user: Identity,
    task_no: str,
    *,
    reason: str | None = None,
    fresh: bool = False,
) -> Task:
    """Run a failed export the caller sees again (new dispatch version, counters and error
    reset), if the caller may still run its type; written to the audit trail. A sharded
    export resumes from its checkpoints unless ``fresh``.

    Returns:
        The requeued task.

    Raises:
        NotFound: ``TASK_NOT_FOUND``.
        Forbidden: ``PERMISSION_DENIED`` (the user may no longer run this type).
        Conflict: ``EXPORT_TYPE_DISABLED``, or ``NOT_RETRYABLE`` when it is not FAILED.
    """
    task = visible_task(runtime, task_no, user)
    etype = runtime.registry.get(task.export_type)
    if etype is None or not etype.enabled:
        raise Conflict(f"{task.export_type} exports are disabled", code="EXPORT_TYPE_DISABLED")
    if not user.can(etype.required_permission) or user.app_code != etype.app_scope:
        raise Forbidden(f"you may not run {etype.code} exports", code="PERMISSION_DENIED")
    again = operations.retry_task(runtime, task, actor=actor_of(user), reason=reason, fresh=fresh)
    runtime.publish_soon()
    return again


# --------------------------------------------------------------------------- download


def _require_file(task: Task) -> None:
    """Raise unless ``task`` has a file to serve.

    Raises:
        Gone: ``FILE_EXPIRED``.
        Conflict: ``NO_FILE`` (failed or cancelled) or ``NOT_READY``.
    """
    status = TaskStatus(task.status)
    if status == TaskStatus.EXPIRED:
        raise Gone("the file has expired and was deleted; export again")
    if status in (TaskStatus.FAILED, TaskStatus.CANCELLED):
        raise Conflict(f"the export {state_phrase(status)}; it has no file", code="NO_FILE")
    if status != TaskStatus.SUCCEEDED or not task.object_key:
        raise Conflict(
            f"the export {state_phrase(status)}; its file is not ready yet", code="NOT_READY"
        )


def signed_link_for(runtime: Runtime, user: Identity, task_no: str) -> str:
    """A new signed download link of ``user``'s visible task, valid for the link TTL.

    Raises:
        NotFound, Gone, Conflict: as :func:`visible_task` and the file checks.
    """
    task = visible_task(runtime, task_no, user)
    _require_file(task)
    return sign_download(
        runtime.settings.download_secret,
        task.task_no,
        user.user,
        link_scope(task, user),
        link_ttl(
            runtime.settings.api.download_link_ttl_seconds, runtime.registry.get(task.export_type)
        ),
    )


def file_for_link(
    runtime: Runtime, task_no: str, link: Mapping[str, str], caller: Identity | None
) -> FileGrant:
    """The task whose file a signed link may serve, and its retention left.

    The signature binds the task, the user, the tenant, the app, the scope and the
    expiry; the task is then looked up in the link's own scope, with the rule every
    route applies, so a link never serves a file its user could not see.

    Args:
        link: the link's query fields (``expires``, ``user``, ``tenant``, ``app``,
            ``scope``, ``link``, ``issued``, ``signature``).
        caller: the bearer identity sent along, if any: it must be the link's user.

    Raises:
        Forbidden: ``LINK_INVALID``, ``LINK_EXPIRED``, ``LINK_NOT_YOURS``.
        NotFound: ``TASK_NOT_FOUND`` or ``FILE_GONE``.
        Gone, Conflict: the file expired or does not exist yet.
    """
    if not TASK_NO_PATTERN.match(task_no):
        raise NotFound("no such export task", code="TASK_NOT_FOUND")
    grant: LinkGrant = verify_download(
        runtime.settings.download_secret,
        task_no,
        user=link.get("user", ""),
        tenant=link.get("tenant", ""),
        app=link.get("app", ""),
        scope=link.get("scope", ""),
        expires=link.get("expires", ""),
        signature=link.get("signature", ""),
        link=link.get("link") or None,
        issued=link.get("issued") or None,
    )
    if caller is not None and (
        caller.user != grant.user
        or caller.tenant != grant.scope.tenant_id
        or caller.app_code != grant.scope.app_code
    ):
        raise Forbidden("this download link was issued to another user", code="LINK_NOT_YOURS")
    task = task_in_scope(runtime, task_no, grant.scope)
    _require_file(task)
    with reading(runtime.engine) as conn:
        left = repository.retention_left_seconds(conn, task.id)
    if left is not None and left <= 0:
        raise Gone("the file has expired; export again")
    assert task.object_key is not None
    if not runtime.storage.exists(task.object_key):
        raise NotFound("the file is no longer stored", code="FILE_GONE")
    return FileGrant(task, left, grant)


@dataclass(frozen=True, slots=True)
class FileGrant:
    """A file a signed link may serve: its task and the seconds its retention has left
    (database clock; None when the task has no end of retention)."""

    task: Task
    retention_left_seconds: float | None
    #: What the verified link grants (its user, scope, id and issue time).
    link: LinkGrant | None = None

    def presign_seconds(self, link_seconds: int) -> int:
        """Lifetime of a presigned GET: ``link_seconds``, cut to the retention left,
        at least 1 s (a file is never reachable past its retention)."""
        left = self.retention_left_seconds
        if left is None:
            return link_seconds
        return max(1, min(link_seconds, int(left)))
