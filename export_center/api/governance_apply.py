"""The governance rules of a create once the estimate is known (or not): the caller's
row ceiling and the approval need, applied to a :class:`~export_center.repository.NewTask`.

No runtime and no provider here, so a schedule's fire (which runs inside the
scheduler's transaction and asks no provider) applies the same rules with no estimate:
the ceiling is copied onto the task and enforced while writing, and a ``rows_over``
rule asks for approval (an unknown count is not below the limit).
:mod:`export_center.api.governance` asks the estimate first for a request.
"""

from __future__ import annotations

import dataclasses
import json

from export_center.auth import Identity
from export_center.errors import Forbidden
from export_center.filespec import FileSpec
from export_center.governance_rules import reason_text
from export_center.registry import ExportType
from export_center.repository.rows import ApprovalNeed, NewTask

__all__ = ["RowCeilingExceeded", "apply_governance", "row_ceiling_of"]


class RowCeilingExceeded(Forbidden):
    """403 ``ROW_CEILING``: the estimate is above the caller's row ceiling."""

    code = "ROW_CEILING"

    def __init__(self, message: str, *, message_zh: str) -> None:
        super().__init__(message)
        self.message_zh = message_zh


def row_ceiling_of(etype: ExportType, user: Identity) -> int | None:
    """The caller's row ceiling for ``etype`` (None: no ceiling but ``max_rows``)."""
    return etype.row_ceilings.for_permissions(user.permissions)


def apply_governance(
    etype: ExportType,
    user: Identity,
    spec: FileSpec,
    new: NewTask,
    *,
    estimate: int | None,
    expire_seconds: float,
) -> NewTask:
    """``new`` with the caller's row ceiling, the estimate (``total_rows``) and the
    approval need (``expire_seconds`` on the database clock).

    Raises:
        RowCeilingExceeded: 403 ``ROW_CEILING`` (``estimate`` above the ceiling).
    """
    ceiling = row_ceiling_of(etype, user)
    if ceiling is not None and estimate is not None and estimate > ceiling:
        raise RowCeilingExceeded(
            f"this export would have about {estimate:,} rows, more than your row ceiling "
            f"of {ceiling:,} for {etype.code} exports; narrow the filters or ask for a "
            "permission with a higher ceiling",
            message_zh=f"此导出约有 {estimate:,} 行，超过您 {etype.code} 导出的行数上限 "
            f"{ceiling:,} 行，本次未创建导出。请缩小筛选范围，或申请上限更高的权限",
        )
    need = None
    rule = etype.approval
    if rule is not None:
        matches = rule.matches(estimate, [c.key for c in spec.columns] or None)
        if matches:
            need = ApprovalNeed(
                approver_permission=rule.approver_permission,
                reasons="; ".join(reason_text(m) for m in matches),
                expire_seconds=expire_seconds,
                rules_json=json.dumps(matches, separators=(",", ":")),
            )
    return dataclasses.replace(new, row_ceiling=ceiling, estimated_rows=estimate, approval=need)
