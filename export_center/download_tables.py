"""How the operator CLI prints download rows (``tasks show``, ``downloads list``,
``trace``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich.console import Console

from export_center.repository.downloads import DownloadRow
from export_center.terminal import print_table

__all__ = ["DOWNLOAD_COLUMNS", "download_cells", "print_downloads"]

#: The columns of a download table.
DOWNLOAD_COLUMNS = ["when", "type", "user", "address", "link", "range", "answer", "user agent"]


def _when(value: datetime | str) -> str:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def download_cells(row: DownloadRow) -> list[object]:
    """One row's cells, in :data:`DOWNLOAD_COLUMNS` order (the answer with its code)."""
    answer = f"{row.status} {row.code}" if row.code else str(row.status)
    return [
        _when(row.at),
        row.kind,
        row.user,
        row.client_address,
        row.link_id or "-",
        row.byte_range or "-",
        answer,
        row.user_agent or "-",
    ]


def print_downloads(out: Console, title: str, rows: Sequence[DownloadRow]) -> None:
    """Print ``rows`` (newest first) as a table titled ``title``."""
    print_table(out, title, DOWNLOAD_COLUMNS, [download_cells(r) for r in rows])
