"""The checks a create and a preview share: the type, the format, the task name, and
the file the body asks for.

:func:`checked_type` and :func:`checked_format` answer the create's codes;
:func:`checked_notify` checks a ``notify`` list (a create's, a schedule's, a user's
defaults) with the caller's own address;
:func:`file_spec_of` turns the body's ``columns`` and ``options`` into a
:class:`~export_center.filespec.FileSpec` (the rules are in ``filespec``), checking the
chosen keys against the type's declared columns; :func:`stored_spec` is what a task row
keeps of it. The rules themselves are in :mod:`export_center.api.create_rules` (which
needs no runtime, so the scheduler shares them); this module applies them to a request.
"""

from __future__ import annotations

from export_center.api.create_rules import (
    checked_format,
    checked_task_name,
    checked_type_in,
    spec_of,
    stored_spec,
)
from export_center.api.schemas import ExportCreate
from export_center.api.type_columns import declared_columns
from export_center.auth import Identity
from export_center.filespec import FileSpec
from export_center.notify.targets import Target, check_owner_address, parse_targets
from export_center.registry import ExportType
from export_center.repository.inbox import known_address
from export_center.runtime import Runtime
from export_center.writers.formats import FileFormat

__all__ = [
    "checked_format",
    "checked_notify",
    "checked_task_name",
    "checked_type",
    "file_spec_of",
    "stored_spec",
]


def checked_notify(runtime: Runtime, user: Identity, notify: object) -> tuple[Target, ...] | None:
    """A body's ``notify`` list checked (:func:`~export_center.notify.targets.parse_targets`)
    and, for an e-mail target without ``to``, the caller's own address known
    (:func:`~export_center.notify.targets.check_owner_address`); None: the defaults.

    Raises:
        ValidationFailed: the notify codes and ``RECIPIENT_UNKNOWN``.
    """
    targets = parse_targets(notify, runtime.settings.notify)
    check_owner_address(targets, lambda: known_address(runtime.engine, user))
    return targets


def checked_type(runtime: Runtime, user: Identity, code: str) -> ExportType:
    """The registered type ``code`` when ``user`` may create it
    (:func:`~export_center.api.create_rules.checked_type_in` on the runtime's registry).

    Raises:
        ValidationFailed: ``UNKNOWN_EXPORT_TYPE``.
        Forbidden: ``PERMISSION_DENIED`` (the caller can list the types it may use).
        Conflict: ``EXPORT_TYPE_DISABLED``.
    """
    return checked_type_in(runtime.registry, user, code)


def file_spec_of(
    runtime: Runtime,
    etype: ExportType,
    body: ExportCreate,
    file_format: FileFormat,
    accept_language: str | None,
) -> FileSpec:
    """The :class:`FileSpec` of a create (or preview) body, checked against the type.

    The chosen keys are checked against the type's declared columns (the registry's,
    or the provider's schema answer) when the body chooses any; the header language
    defaults to the request's ``Accept-Language``.

    Raises:
        ValidationFailed: the codes of :func:`filespec.parse_file_spec`.
        ProviderNotAnswering, ProviderAnswerInvalid: columns were chosen and the
            provider's schema answer is needed but failed (503 / 502).
    """
    return spec_of(
        etype,
        body,
        file_format,
        accept_language,
        declared=declared_columns(runtime, etype) if body.columns else None,
        byte_cap=runtime.settings.file_size_cap_bytes,
    )
