"""The bytes an XLSX package still writes when it closes: the ZIP arithmetic behind
``XlsxWriter.write_within``.

An XLSX file is written forward (``writers.xlsx``): each worksheet entry is a local
header, its deflated XML and a data descriptor; at close the package parts
(``writers.xlsx_parts.package_parts``) follow as entries of their own, then the central
directory and its end record. Once the open worksheet's remaining deflate output is
known (``XlsxPackage.size_if_closed`` gets it from a copy of the compressor), the rest
of the file is fixed by the entry names and the parts' texts. :func:`closing_bytes`
counts it with the record sizes of the ZIP format (PKWARE APPNOTE 6.3: local file
header 30 bytes + name, data descriptor 16 bytes with its signature or 24 with ZIP64
sizes, central directory header 46 bytes + name, end of central directory 22 bytes;
ZIP64 end record 56 and locator 20 bytes, a ZIP64 extra field of at most 4 + 3 x 8
bytes) as Python's ``zipfile`` writes them.

Rule: the count is exact while the file stays below ``zipfile.ZIP64_LIMIT`` (2 GiB - 1);
past it every ZIP64 record that could appear is added, so the count is then an upper
bound. Tested: ``size_if_closed`` equals the closed file's size.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Mapping, Sequence

__all__ = ["closing_bytes", "deflated_size"]

_LOCAL_HEADER = 30
_DESCRIPTOR = 16
_DESCRIPTOR_ZIP64 = 24
_CENTRAL_HEADER = 46
_END_RECORD = 22
_ZIP64_END = 56 + 20
_ZIP64_EXTRA = 4 + 3 * 8


def deflated_size(data: bytes, level: int) -> int:
    """Bytes of ``data`` deflated (raw, as a ZIP entry) at ``level`` 0-9 by zlib."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    return len(compressor.compress(data)) + len(compressor.flush())


def closing_bytes(
    *,
    sheet_names: Sequence[str],
    open_sheet_zip64: bool,
    parts: Mapping[str, int],
    written: int,
) -> int:
    """The bytes written after the open worksheet's last deflate output, up to the end.

    Args:
        sheet_names: the ZIP names of every worksheet, the open one included.
        open_sheet_zip64: the open worksheet was opened with ZIP64 sizes (its data
            descriptor is then 24 bytes).
        parts: the package parts still to be written, ``{name: deflated bytes}``.
        written: the file's bytes up to the end of the open sheet's deflate output
            (decides whether ZIP64 records may be needed).

    Returns:
        The sheet's data descriptor, each part's local header, data and descriptor,
        the central directory of every entry and its end record, in bytes (exact
        below 2 GiB, an upper bound above; module docstring).
    """
    size = _DESCRIPTOR_ZIP64 if open_sheet_zip64 else _DESCRIPTOR
    for name, deflated in parts.items():
        size += _LOCAL_HEADER + len(name.encode("utf-8")) + deflated + _DESCRIPTOR
    names = [*sheet_names, *parts]
    size += sum(_CENTRAL_HEADER + len(name.encode("utf-8")) for name in names)
    size += _END_RECORD
    if written + size > zipfile.ZIP64_LIMIT:
        size += len(names) * _ZIP64_EXTRA + _ZIP64_END
    return size
