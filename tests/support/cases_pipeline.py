"""What the end-to-end tests of ../shared/cases/CASES.md share: a provider answer page
built from rows, one export run to its end, and readers of the XLSX it wrote."""

from __future__ import annotations

import io
import zipfile

import openpyxl
import orjson

from tests.support.helpers import create, download, wait_state

__all__ = ["PERMS", "page", "run", "sheet_xml", "xlsx_cells"]

PERMS = ["export:cases:create", "export:orders:create"]


def page(
    rows,
    *,
    columns=None,
    more=False,
    cursor=None,
    raw_rows: str | None = None,
    row_format: str | None = None,
) -> str:
    body = {
        "schemaVersion": 1,
        "schemaHash": "sha256:cases",
        "snapshotToken": "snap",
        "rows": [],
        "nextCursor": cursor,
        "hasMore": more,
        "totalRows": None,
    }
    if columns is not None:
        body["columns"] = [{"key": k, "title": k, "type": t} for k, t in columns]
    if row_format is not None:
        body["rowFormat"] = row_format
    text = orjson.dumps(body).decode()
    return text.replace(
        '"rows":[]', '"rows":' + (raw_rows if raw_rows is not None else orjson.dumps(rows).decode())
    )


def run(stack, fmt: str, export_type: str = "CASES", **params):
    client = stack.client(perms=PERMS)
    answer = create(client, fmt, exportType=export_type, parameters=params)
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"], timeout=60)
    data = download(client, detail) if detail["state"] == "succeeded" else b""
    return detail, data


def xlsx_cells(data: bytes):
    wb = openpyxl.load_workbook(io.BytesIO(data))
    return wb.worksheets[0]


def sheet_xml(data: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return "".join(zf.read(n).decode() for n in zf.namelist() if n.startswith("xl/worksheets/"))
