"""The row caps a run enforces while writing: the type's ``max_rows`` and the
requester's row ceiling (``export_task.row_ceiling``, copied at creation)."""

from __future__ import annotations

from export_center.errors import RowCeilingCrossed, RowLimitExceeded
from export_center.registry import ExportType
from export_center.repository import Task

__all__ = ["check_row_caps"]


def check_row_caps(etype: ExportType, task: Task, rows: int) -> None:
    """Raise before a batch that would bring the export to ``rows`` rows is written
    past a cap, so no file is ever silently cut short: the attempt fails permanently
    and deletes its file.

    Raises:
        RowLimitExceeded: ``rows`` above the type's ``max_rows``.
        RowCeilingCrossed: ``rows`` above the task's ``row_ceiling`` (``ROW_CEILING``).
    """
    if rows > etype.max_rows:
        raise RowLimitExceeded(f"more than {etype.max_rows:,} rows (the type's max_rows)")
    if task.row_ceiling is not None and rows > task.row_ceiling:
        raise RowCeilingCrossed(
            f"more than {task.row_ceiling:,} rows (the requester's row ceiling); the "
            "estimate at creation was lower, so the file was deleted"
        )
