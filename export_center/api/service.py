"""What the routes do besides HTTP: the task lookup every route shares.

:func:`visible_task` is the one lookup of list cursors, detail, download, cancel and
retry: a task the caller may not see answers exactly like a task that does not exist
(404 ``TASK_NOT_FOUND``), so no route is an existence oracle for other tenants' tasks.
The rule itself is :mod:`export_center.access`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from export_center import repository
from export_center.access import Scope, in_scope, scope_of
from export_center.auth import Identity
from export_center.errors import NotFound
from export_center.ids import TASK_NO_PATTERN
from export_center.runtime import Runtime

__all__ = ["link_scope", "task_in_scope", "visible_task"]


def task_in_scope(runtime: Runtime, task_no: str, scope: Scope) -> Mapping[str, Any]:
    """The task row with public id ``task_no`` when it is visible in ``scope``.

    Raises:
        NotFound: ``TASK_NOT_FOUND`` when the id is malformed, the task does not exist,
            or it is outside ``scope`` (the same answer in all three cases).
    """
    missing = NotFound("no such export task", code="TASK_NOT_FOUND")
    if not TASK_NO_PATTERN.match(task_no):
        raise missing
    with runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_no)
    if task is None or not in_scope(task, scope):
        raise missing
    return task


def visible_task(runtime: Runtime, task_no: str, user: Identity) -> Mapping[str, Any]:
    """The task when the signed-in ``user`` may see it (:func:`task_in_scope` with the
    user's scope).

    Raises:
        NotFound: ``TASK_NOT_FOUND``, also for tasks of other users and tenants.
    """
    return task_in_scope(runtime, task_no, scope_of(user))


def link_scope(task: Mapping[str, Any], viewer: Identity) -> Scope:
    """The narrowest scope in which ``viewer`` sees ``task``, for its download link: the
    owner's own scope, else the tenant-wide scope of the download-all permission."""
    scope = scope_of(viewer)
    if task["requested_by"] == viewer.user:
        return Scope(tenant_id=scope.tenant_id, app_code=scope.app_code, owner=viewer.user)
    return scope
