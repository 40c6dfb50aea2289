"""Who may see a task: the one visibility rule of list, detail, download, cancel and retry.

A caller sees a task when the task's tenant and app are the caller's, and the task is
the caller's own or the caller holds the download-all permission
(``platform:download:all``), which widens the view to every owner of the same tenant
and app, never to another tenant or app. Identifiers compare byte for byte: ``acme``,
``ACME`` and ``acme `` are three tenants (the database columns use a binary, no-pad
collation so that SQL agrees with this module; see :class:`~export_center.db.ExactString`).

:class:`Scope` is the rule's input: the list query filters by it in SQL, and
:func:`in_scope` decides for one task row in Python (the list re-checks every row with
it, so a database whose collation were wrong still could not widen the view). A signed
download link carries the scope it was issued for (:func:`link_scope`, signed by
:mod:`export_center.links`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from export_center.auth import DOWNLOAD_ALL, Identity

__all__ = ["Owned", "Scope", "in_scope", "link_scope", "scope_of"]


@dataclass(frozen=True, slots=True)
class Scope:
    """The tasks a caller may see.

    Attributes:
        tenant_id: the caller's tenant; always required.
        app_code: the caller's app code (PLATFORM or MERCHANT); always required.
        owner: the caller's user id, or None when the caller may see every owner's tasks
            of this tenant and app (download-all).
    """

    tenant_id: str
    app_code: str
    owner: str | None


class Owned(Protocol):
    """What the rule reads of a task: its tenant, app and owner.

    :class:`export_center.repository.Task` satisfies it; the rule names only these
    three columns so that the repository, which filters by :class:`Scope`, need not be
    imported here.
    """

    @property
    def tenant_id(self) -> str:
        """The task's tenant."""

    @property
    def app_code(self) -> str:
        """The task's app code (PLATFORM or MERCHANT)."""

    @property
    def requested_by(self) -> str:
        """The user id of the task's owner."""


def scope_of(identity: Identity) -> Scope:
    """The scope of a signed-in caller: own tasks, or all of the tenant and app with the
    download-all permission."""
    owner = None if identity.can(DOWNLOAD_ALL) else identity.user
    return Scope(tenant_id=identity.tenant, app_code=identity.app_code, owner=owner)


def _same(a: Any, b: Any) -> bool:
    """Exact equality of two identifiers: both ``str`` and equal code point by code point."""
    return type(a) is str and type(b) is str and a == b


def in_scope(task: Owned, scope: Scope) -> bool:
    """True when the task row (``tenant_id``, ``app_code``, ``requested_by``) is visible in
    ``scope``; compares byte for byte (no case folding, no trimming, no normalization)."""
    if not (_same(task.tenant_id, scope.tenant_id) and _same(task.app_code, scope.app_code)):
        return False
    return scope.owner is None or _same(task.requested_by, scope.owner)


def link_scope(task: Owned, viewer: Identity) -> Scope:
    """The narrowest scope in which ``viewer`` sees ``task``, for its download link: the
    owner's own scope, else the tenant-wide scope of the download-all permission."""
    scope = scope_of(viewer)
    if task.requested_by == viewer.user:
        return Scope(tenant_id=scope.tenant_id, app_code=scope.app_code, owner=viewer.user)
    return scope
