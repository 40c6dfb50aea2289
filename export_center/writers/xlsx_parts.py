"""The static parts of an XLSX package, and the style indices its cells refer to.

An XLSX file is a ZIP package of XML parts (ECMA-376 Office Open XML, SpreadsheetML).
The XLSX writer (``writers.xlsx``) streams the worksheets' rows; everything else is
fixed or depends only on the columns and the number of sheets, and is built here:

* the worksheet around the rows: :func:`sheet_head` (XML declaration, frozen header
  row, column widths, up to ``<sheetData>``) and :data:`SHEET_END`;
* ``xl/styles.xml`` (:data:`STYLES_XML`): the cell formats that the ``s="N"``
  attributes of the cells name, see the ``STYLE_*`` indices below;
* the package parts written when the file is closed (:func:`package_parts`):
  ``xl/workbook.xml`` (the sheet list), ``xl/_rels/workbook.xml.rels``,
  ``docProps/app.xml``, ``docProps/core.xml`` (creator, creation time in UTC),
  ``_rels/.rels`` and ``[Content_Types].xml``.

Sheet rules: a frozen header row (bold titles, style 1); each column's width is
``Column.width`` (0..255) or else the larger of a default per type and the title's
length plus 2 (that one at most 50); the first sheet is selected. Sheets are named
``Sheet1`` ... ``SheetN``.

Styles (``cellXfs``), fixed for every file: 0 General, 1 bold header, 2 quote prefix
(text that starts like a formula, E07), 3 date ``yyyy-mm-dd``, 4 date-time
``yyyy-mm-dd hh:mm:ss``, then 5 + k for a DECIMAL of scale k = 0..15 (``#,##0``,
``#,##0.0``, ... with k zeros after the point).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from xml.sax.saxutils import quoteattr as _xml_quoteattr

from export_center.columns import Column, ColumnType
from export_center.writers.file_mark import (
    CUSTOM_CONTENT_TYPE,
    CUSTOM_REL_TYPE,
    core_mark_xml,
    custom_xml,
    footer_xml,
)

__all__ = [
    "MAX_FORMAT_SCALE",
    "SCALE_STYLES",
    "SHEET_END",
    "sheet_end",
    "STYLES_XML",
    "STYLE_DATE",
    "STYLE_DATETIME",
    "STYLE_HEADER",
    "STYLE_QUOTED",
    "package_parts",
    "sheet_head",
]

STYLE_HEADER = 1
"""Bold column titles in row 1."""
STYLE_QUOTED = 2
"""``quotePrefix``: Excel keeps a text that starts like a formula as text on edit (E07)."""
STYLE_DATE = 3
"""DATE serials, ``yyyy-mm-dd``."""
STYLE_DATETIME = 4
"""DATETIME serials, ``yyyy-mm-dd hh:mm:ss``."""
_FIRST_DECIMAL_STYLE = 5
MAX_FORMAT_SCALE = 15
"""Largest DECIMAL scale with its own number format; larger scales use General (0)."""
SCALE_STYLES = [_FIRST_DECIMAL_STYLE + scale for scale in range(MAX_FORMAT_SCALE + 1)]
"""Style index of a DECIMAL value by its scale (digits after the point), 0..15."""

_FIRST_CUSTOM_NUMFMT = 164
_DATE_FORMAT = "yyyy-mm-dd"
_DATETIME_FORMAT = "yyyy-mm-dd hh:mm:ss"
_DECIMAL_FORMATS = [
    "#,##0" + ("." + "0" * scale if scale else "") for scale in range(MAX_FORMAT_SCALE + 1)
]
"""Number formats of DECIMAL cells by the value's scale: ``#,##0``, ``#,##0.0``, ..."""

_DEFAULT_WIDTHS = {
    ColumnType.STRING: 24,
    ColumnType.INTEGER: 14,
    ColumnType.DECIMAL: 16,
    ColumnType.BOOLEAN: 9,
    ColumnType.DATE: 12,
    ColumnType.DATETIME: 20,
}
"""Column width (in characters) by type when the column sets none."""

_CONTENT_TYPE_SHEET = "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"
_XML_HEAD = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
_NS_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_NS_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_NS_PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships"

SHEET_END = b"</sheetData></worksheet>"
"""What ends every worksheet after its last row."""


def sheet_end() -> bytes:
    """:data:`SHEET_END`, with the trace footer of a marked file between the rows and
    the end (:func:`export_center.writers.file_mark.footer_xml`)."""
    return b"</sheetData>" + footer_xml() + b"</worksheet>"


def sheet_head(columns: Sequence[Column]) -> Callable[[bool], str]:
    """Build ``head(first_sheet)``: a worksheet's XML up to ``<sheetData>``.

    Args:
        columns: the export's columns, in file order (their widths are computed once).

    Returns:
        ``head(first_sheet) -> str``: the XML declaration, the frozen pane below row 1,
        the column widths and ``<sheetData>``; ``first_sheet`` marks the sheet selected
        when the file opens.
    """
    widths = []
    for index, column in enumerate(columns, start=1):
        width = column.width
        if width is None:
            width = max(_DEFAULT_WIDTHS[ColumnType(column.type)], min(len(column.title) + 2, 50))
        width = min(max(width, 0), 255)
        widths.append(f'<col min="{index}" max="{index}" width="{width}" customWidth="1"/>')
    cols = "".join(widths)

    def head(first_sheet: bool) -> str:
        selected = ' tabSelected="1"' if first_sheet else ""
        return (
            f'{_XML_HEAD}<worksheet xmlns="{_NS_MAIN}" xmlns:r="{_NS_REL}">'
            f'<sheetViews><sheetView workbookViewId="0"{selected}>'
            '<pane ySplit="1" topLeftCell="A2" activePane="bottomLeft" state="frozen"/>'
            '<selection pane="bottomLeft" activeCell="A2" sqref="A2"/>'
            "</sheetView></sheetViews>"
            '<sheetFormatPr defaultRowHeight="15"/>'
            f"<cols>{cols}</cols><sheetData>"
        )

    return head


def _styles_xml() -> str:
    """``xl/styles.xml``: fixed styles 0-4, then the decimal styles of scale 0-15."""
    formats = [
        (_FIRST_CUSTOM_NUMFMT, _DATE_FORMAT),
        (_FIRST_CUSTOM_NUMFMT + 1, _DATETIME_FORMAT),
    ]
    formats += [(_FIRST_CUSTOM_NUMFMT + 2 + i, code) for i, code in enumerate(_DECIMAL_FORMATS)]
    numfmts = "".join(
        f'<numFmt numFmtId="{fmt_id}" formatCode={_xml_quoteattr(code)}/>'
        for fmt_id, code in formats
    )
    base = 'fontId="0" fillId="0" borderId="0" xfId="0"'
    xfs = [
        f'<xf numFmtId="0" {base}/>',
        '<xf numFmtId="0" fontId="1" fillId="0" borderId="0" xfId="0" applyFont="1"/>',
        f'<xf numFmtId="0" {base} quotePrefix="1"/>',
        f'<xf numFmtId="{_FIRST_CUSTOM_NUMFMT}" {base} applyNumberFormat="1"/>',
        f'<xf numFmtId="{_FIRST_CUSTOM_NUMFMT + 1}" {base} applyNumberFormat="1"/>',
    ]
    xfs += [
        f'<xf numFmtId="{_FIRST_CUSTOM_NUMFMT + 2 + i}" {base} applyNumberFormat="1"/>'
        for i in range(len(_DECIMAL_FORMATS))
    ]
    font = '<sz val="11"/><name val="Calibri"/><family val="2"/><scheme val="minor"/>'
    return (
        f'{_XML_HEAD}<styleSheet xmlns="{_NS_MAIN}">'
        f'<numFmts count="{len(formats)}">{numfmts}</numFmts>'
        f'<fonts count="2"><font>{font}</font><font><b/>{font}</font></fonts>'
        '<fills count="2"><fill><patternFill patternType="none"/></fill>'
        '<fill><patternFill patternType="gray125"/></fill></fills>'
        '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/>'
        "</border></borders>"
        '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/>'
        "</cellStyleXfs>"
        f'<cellXfs count="{len(xfs)}">{"".join(xfs)}</cellXfs>'
        '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/>'
        "</cellStyles>"
        "</styleSheet>"
    )


STYLES_XML = _styles_xml()
"""``xl/styles.xml``, the same for every file."""


def _sheet_names(sheet_count: int) -> list[str]:
    """``Sheet1`` ... ``SheetN``."""
    return [f"Sheet{i}" for i in range(1, sheet_count + 1)]


def _workbook_xml(sheet_count: int) -> str:
    """``xl/workbook.xml``: the sheet list."""
    sheets = "".join(
        f'<sheet name="{name}" sheetId="{i}" r:id="rId{i}"/>'
        for i, name in enumerate(_sheet_names(sheet_count), start=1)
    )
    return (
        f'{_XML_HEAD}<workbook xmlns="{_NS_MAIN}" xmlns:r="{_NS_REL}">'
        '<bookViews><workbookView activeTab="0"/></bookViews>'
        f"<sheets>{sheets}</sheets></workbook>"
    )


def _workbook_rels_xml(sheet_count: int) -> str:
    """``xl/_rels/workbook.xml.rels``: sheets rId1..N, then styles."""
    rels = [
        f'<Relationship Id="rId{i}" Type="{_NS_REL}/worksheet" Target="worksheets/sheet{i}.xml"/>'
        for i in range(1, sheet_count + 1)
    ]
    rels.append(
        f'<Relationship Id="rId{sheet_count + 1}" Type="{_NS_REL}/styles" Target="styles.xml"/>'
    )
    return f'{_XML_HEAD}<Relationships xmlns="{_NS_PKG_REL}">{"".join(rels)}</Relationships>'


def _content_types_xml(sheet_count: int, custom: bool = False) -> str:
    """``[Content_Types].xml`` for every part written."""
    sheets = "".join(
        f'<Override PartName="/xl/worksheets/sheet{i}.xml" ContentType="{_CONTENT_TYPE_SHEET}"/>'
        for i in range(1, sheet_count + 1)
    )
    office = "application/vnd.openxmlformats-officedocument"
    package = "application/vnd.openxmlformats-package"
    return (
        f"{_XML_HEAD}"
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        f'<Default Extension="rels" ContentType="{package}.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/xl/workbook.xml" '
        f'ContentType="{office}.spreadsheetml.sheet.main+xml"/>'
        f'<Override PartName="/xl/styles.xml" ContentType="{office}.spreadsheetml.styles+xml"/>'
        f"{sheets}"
        f'<Override PartName="/docProps/core.xml" ContentType="{package}.core-properties+xml"/>'
        '<Override PartName="/docProps/app.xml" '
        f'ContentType="{office}.extended-properties+xml"/>'
        + (
            f'<Override PartName="/docProps/custom.xml" ContentType="{CUSTOM_CONTENT_TYPE}"/>'
            if custom
            else ""
        )
        + "</Types>"
    )


def _app_xml(sheet_count: int) -> str:
    """``docProps/app.xml``: application name and sheet titles."""
    names = _sheet_names(sheet_count)
    titles = "".join(f"<vt:lpstr>{name}</vt:lpstr>" for name in names)
    return (
        f"{_XML_HEAD}<Properties "
        'xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-properties" '
        'xmlns:vt="http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes">'
        "<Application>Export Center</Application>"
        '<HeadingPairs><vt:vector size="2" baseType="variant">'
        "<vt:variant><vt:lpstr>Worksheets</vt:lpstr></vt:variant>"
        f"<vt:variant><vt:i4>{len(names)}</vt:i4></vt:variant></vt:vector></HeadingPairs>"
        f'<TitlesOfParts><vt:vector size="{len(names)}" baseType="lpstr">{titles}</vt:vector>'
        "</TitlesOfParts></Properties>"
    )


def _written_at() -> str:
    """When the package is written: now in UTC, ``YYYY-MM-DDTHH:MM:SSZ``."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _core_xml() -> str:
    """``docProps/core.xml``: creator, the file's mark (if any) and creation time (UTC)."""
    now = _written_at()
    return (
        f"{_XML_HEAD}<cp:coreProperties "
        'xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" '
        'xmlns:dcmitype="http://purl.org/dc/dcmitype/" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
        f"<dc:creator>Export Center</dc:creator>{core_mark_xml()}"
        f'<dcterms:created xsi:type="dcterms:W3CDTF">{now}</dcterms:created>'
        f'<dcterms:modified xsi:type="dcterms:W3CDTF">{now}</dcterms:modified>'
        "</cp:coreProperties>"
    )


_ROOT_RELS = (
    f'{_XML_HEAD}<Relationships xmlns="{_NS_PKG_REL}">'
    f'<Relationship Id="rId1" Type="{_NS_REL}/officeDocument" Target="xl/workbook.xml"/>'
    f'<Relationship Id="rId2" Type="{_NS_PKG_REL}/metadata/core-properties" '
    'Target="docProps/core.xml"/>'
    f'<Relationship Id="rId3" Type="{_NS_REL}/extended-properties" '
    'Target="docProps/app.xml"/>'
    "</Relationships>"
)


#: How the package relationships name the custom properties of a marked file.
_CUSTOM_REL = (
    "</Relationships>",
    f'<Relationship Id="rId4" Type="{CUSTOM_REL_TYPE}" Target="docProps/custom.xml"/>'
    "</Relationships>",
)


def package_parts(sheet_count: int) -> dict[str, str]:
    """The parts written after the last worksheet, by ZIP entry name, in writing order.

    Args:
        sheet_count: the worksheets written (``xl/worksheets/sheet1.xml`` ... N), >= 1.

    Returns:
        ``{entry name: XML text}`` for the styles, the workbook and its relationships,
        the document properties (created now, UTC), the package relationships and the
        content types of every part.
    """
    custom = custom_xml()  # a marked file's custom properties (writers.file_mark)
    return {
        "xl/styles.xml": STYLES_XML,
        "xl/workbook.xml": _workbook_xml(sheet_count),
        "xl/_rels/workbook.xml.rels": _workbook_rels_xml(sheet_count),
        "docProps/app.xml": _app_xml(sheet_count),
        "docProps/core.xml": _core_xml(),
        **({} if custom is None else {"docProps/custom.xml": custom}),
        "_rels/.rels": _ROOT_RELS if custom is None else _ROOT_RELS.replace(*_CUSTOM_REL),
        "[Content_Types].xml": _content_types_xml(sheet_count, custom is not None),
    }
