"""The governance checks of a create: the row ceiling and the approval rule.

:func:`governed` runs after every other check of a create, before anything is written:

* the caller's ceiling is the highest ``row_ceilings`` entry among the permissions they
  hold (:meth:`~export_center.governance_rules.RowCeilings.for_permissions`);
* when the type has a ceiling for the caller or an approval ``rows_over`` rule, the
  provider is asked its estimate (a schema request, ``limit: 0``, as the preview does);
  an estimate above the ceiling answers 403 ``ROW_CEILING`` naming the ceiling, before
  any task exists; the ceiling is copied onto the task so the run enforces it while
  writing (a task crossing it fails ``ROW_CEILING`` and its file is deleted);
* the approval rule (always, ``rows_over``, ``columns`` against the chosen columns, or
  every column when none are chosen) decides whether the task waits in
  ``AWAITING_APPROVAL``.

Provider failures answer as in the preview (503 ``PROVIDER_UNAVAILABLE``, 502
``PROVIDER_CONTRACT`` / ``PROVIDER_REJECTED``), never a 500.
"""

from __future__ import annotations

from export_center.api.governance_apply import (
    RowCeilingExceeded,
    apply_governance,
    row_ceiling_of,
)
from export_center.api.type_columns import (
    PROVIDER_TIME_LIMIT_SECONDS,
    provider_call,
    provider_request,
)
from export_center.auth import Identity
from export_center.filespec import FileSpec
from export_center.registry import ExportType
from export_center.repository import NewTask
from export_center.runtime import Runtime

__all__ = ["RowCeilingExceeded", "governed", "row_ceiling_of"]


def _estimate(
    runtime: Runtime, user: Identity, etype: ExportType, new: NewTask, spec: FileSpec
) -> int | None:
    """The provider's row estimate of the export (None: it gives none).

    Raises:
        ProviderNotAnswering, ProviderAnswerInvalid: the provider failed.
    """
    request = provider_request(
        runtime,
        etype,
        tenant=user.tenant,
        app=user.app_code,
        user=user.user,
        parameters=new.parameters,
        time_zone=new.time_zone,
        trace_id=new.trace_id,
    )
    chosen = [c.key for c in spec.columns] or None
    with provider_call(etype):
        schema = runtime.provider_client.schema(
            request, columns=chosen, time_limit=PROVIDER_TIME_LIMIT_SECONDS
        )
    return schema.total_rows


def governed(
    runtime: Runtime, user: Identity, etype: ExportType, spec: FileSpec, new: NewTask
) -> NewTask:
    """``new`` with the caller's row ceiling, the estimate and the approval need; the
    provider is asked its estimate only when a ceiling or a ``rows_over`` rule needs it.

    Raises:
        RowCeilingExceeded: 403 ``ROW_CEILING`` (estimate above the ceiling).
        ProviderNotAnswering, ProviderAnswerInvalid: the estimate could not be had.
    """
    rule = etype.approval
    estimate = None
    if row_ceiling_of(etype, user) is not None or (rule is not None and rule.rows_over is not None):
        estimate = _estimate(runtime, user, etype, new, spec)
    return apply_governance(
        etype,
        user,
        spec,
        new,
        estimate=estimate,
        expire_seconds=runtime.settings.approvals.expire_hours * 3600.0,
    )
