"""The error codes of row ceilings and approvals, with an example sentence each (merged
into :data:`export_center.api.openapi.CATALOGUE`)."""

from __future__ import annotations

__all__ = ["GOVERNANCE_CODES"]

#: ``code: (example message, field)``.
GOVERNANCE_CODES: dict[str, tuple[str, str | None]] = {
    "ROW_CEILING": (
        "this export would have about 250,000 rows, more than your row ceiling of 100,000 "
        "for ORDERS exports; narrow the filters or ask for a permission with a higher ceiling",
        None,
    ),
    "SELF_APPROVAL": (
        "you cannot approve or reject your own export request; another approver must",
        None,
    ),
    "NOT_AWAITING_APPROVAL": (
        "the export is queued; only an export awaiting approval can be approved or rejected",
        None,
    ),
    "REASON_REQUIRED": ("give a reason: the requester reads it", "reason"),
}
