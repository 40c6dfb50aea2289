"""What a split download holds, against the API manifest: figures, never assertions.

A CSV or XLSX export asked with ``options.split`` is delivered as one ZIP: the parts in
order (each a complete file with its own header: a CSV file, or a workbook whose every
sheet starts with the header row) and ``manifest.json``. The
:func:`inspect_split` figures say what the downloaded bytes hold and whether they are
what ``GET /api/v1/exports/{taskId}/manifest`` says was delivered: the archive's bytes
and SHA-256 against the served bytes, each file entry's rows, bytes and SHA-256 against
its part, and the ZIP's own ``manifest.json`` against the API's file list. Each part is
read alone, as a user opening one part would: a CSV part with the ``csv`` module, an
XLSX part opened with openpyxl (read-only) and every row of every sheet read.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

from export_center.filespec import ENCODINGS

__all__ = ["inspect_split", "read_part", "read_xlsx_part"]

_PYTHON_CODECS = {"utf-8-bom": "utf-8-sig", "utf-8": "utf-8", "gb18030": "gb18030"}
"""The Python codec reading each CSV ``encoding`` option (``utf-8-sig`` drops the BOM)."""


def read_part(data: bytes, *, encoding: str, delimiter: str, header: bool) -> dict[str, Any]:
    """Read one CSV part alone with the ``csv`` module.

    Args:
        data: the part's bytes, as stored in the ZIP.
        encoding: the CSV ``encoding`` option (``utf-8-bom``, ``utf-8``, ``gb18030``).
        delimiter: the CSV field delimiter (one character).
        header: whether the part starts with a header row.

    Returns:
        ``rows`` (data rows, the header not counted), ``header`` (the first row as a
        list, or None without one), ``widths`` (the distinct field counts seen, sorted)
        and ``error`` (None, or why the part could not be read: a codec or ``csv``
        error, with its message).
    """
    rows, widths, first = 0, set(), None
    try:
        text = io.TextIOWrapper(io.BytesIO(data), encoding=_PYTHON_CODECS[encoding], newline="")
        for record in csv.reader(text, delimiter=delimiter, strict=True):
            if first is None and header:
                first = record
            else:
                rows += 1
            widths.add(len(record))
    except (UnicodeDecodeError, csv.Error) as exc:
        return {"rows": rows, "header": first, "widths": sorted(widths), "error": str(exc)}
    return {"rows": rows, "header": first, "widths": sorted(widths), "error": None}


def read_xlsx_part(data: bytes, titles: list[str]) -> dict[str, Any]:
    """Open one XLSX part alone with openpyxl (read-only) and read every row.

    Args:
        data: the part's bytes, as stored in the ZIP.
        titles: the header expected in row 1 of every sheet.

    Returns:
        ``rows`` (data rows of all sheets, the header rows not counted), ``sheets``,
        ``header`` (None, or the first bad header seen), ``widths`` (the distinct row
        widths seen, sorted) and ``error`` (None, or why the workbook could not be
        opened or read).
    """
    import openpyxl

    rows, sheets, widths, bad = 0, 0, set(), None
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            for sheet in book.worksheets:
                sheets += 1
                values = sheet.iter_rows(values_only=True)
                first = [str(v) for v in next(values, ())]
                if first != titles and bad is None:
                    bad = first
                for record in values:
                    rows += 1
                    widths.add(len(record))
        finally:
            book.close()
    except Exception as exc:  # noqa: BLE001 - any failure to open is the figure
        return {"rows": rows, "sheets": sheets, "header": bad, "widths": [], "error": repr(exc)}
    return {"rows": rows, "sheets": sheets, "header": bad, "widths": sorted(widths), "error": None}


def _bad_header(read: dict[str, Any], header: bool, titles: list[str]) -> bool:
    """Whether a part's header is wrong: an XLSX part names a bad sheet header, a CSV
    part with the header on does not start with ``titles``."""
    if "sheets" in read:
        return read["header"] is not None
    return header and read["header"] != titles


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def inspect_split(path: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """The figures of a split CSV download checked against its API manifest.

    Args:
        path: the downloaded ZIP (the bytes the signed link served).
        manifest: the answer of ``GET /api/v1/exports/{taskId}/manifest`` (its
            ``options`` give the encoding, delimiter and header of the parts).

    Returns:
        ``entries`` (the ZIP's member names in order), ``parts`` (CSV or XLSX members),
        ``hasManifestJson``, ``partRows`` (data rows of each part, counted with the
        ``csv`` module or openpyxl), ``partSheets`` (an XLSX part's sheets, None for
        CSV), ``rowsTotal``, ``manifestTotalRows``, ``partsReadableAlone``
        (every part parsed without error, each row as wide as the columns, and a
        header equal to the manifest's titles when the header is on),
        ``partErrors``, ``servedBytes``, ``archiveBytesEqual`` and
        ``archiveSha256Equal`` (the manifest's ``archive`` against the served
        bytes), ``fileNamesEqual`` (the manifest's file names are the parts, in
        order), ``fileRowsEqual``, ``fileBytesEqual`` and ``fileSha256Equal`` (per
        file entry against its part), and ``zipManifestFilesEqual`` (the ZIP's
        ``manifest.json`` lists the same files as the API). A ZIP that cannot be
        opened gives ``{"error": ...}`` and the served bytes.
    """
    served = path.read_bytes()
    options = manifest.get("options") or {}
    encoding = str(options.get("encoding") or ENCODINGS[0])
    delimiter = str(options.get("delimiter") or ",")
    header = options.get("header", True) is not False
    titles = [c["title"] for c in manifest.get("columns", [])]
    archive = manifest.get("archive") or {}
    figures: dict[str, Any] = {
        "servedBytes": len(served),
        "archiveBytesEqual": archive.get("bytes") == len(served),
        "archiveSha256Equal": archive.get("sha256") == _sha256(served),
    }
    try:
        zf = zipfile.ZipFile(io.BytesIO(served))
    except zipfile.BadZipFile as exc:
        return {**figures, "error": f"not a ZIP: {exc}"}
    with zf:
        names = zf.namelist()
        parts = [n for n in names if n.lower().endswith((".csv", ".xlsx"))]
        contents = {n: zf.read(n) for n in parts}
        inner = json.loads(zf.read("manifest.json")) if "manifest.json" in names else None
    read = {
        n: read_xlsx_part(contents[n], titles)
        if n.lower().endswith(".xlsx")
        else read_part(contents[n], encoding=encoding, delimiter=delimiter, header=header)
        for n in parts
    }
    errors = {
        n: r["error"]
        or (f"field counts {r['widths']}" if r["widths"] not in ([], [len(titles)]) else None)
        or (f"header {r['header']}" if _bad_header(r, header, titles) else None)
        for n, r in read.items()
    }
    files = manifest.get("files", [])
    by_name = {f["name"]: f for f in files}
    return {
        **figures,
        "entries": names,
        "parts": len(parts),
        "hasManifestJson": inner is not None,
        "partRows": [read[n]["rows"] for n in parts],
        "partSheets": [read[n].get("sheets") for n in parts],
        "rowsTotal": sum(read[n]["rows"] for n in parts),
        "manifestTotalRows": manifest.get("totalRows"),
        "partsReadableAlone": bool(parts) and not any(errors.values()),
        "partErrors": {n: e for n, e in errors.items() if e},
        "fileNamesEqual": [f["name"] for f in files] == parts,
        "fileRowsEqual": all(by_name.get(n, {}).get("rows") == read[n]["rows"] for n in parts),
        "fileBytesEqual": all(by_name.get(n, {}).get("bytes") == len(contents[n]) for n in parts),
        "fileSha256Equal": all(
            by_name.get(n, {}).get("sha256") == _sha256(contents[n]) for n in parts
        ),
        "zipManifestFilesEqual": inner is not None and inner.get("files") == files,
    }
