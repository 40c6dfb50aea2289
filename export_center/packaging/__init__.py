"""The delivered file: compression, split parts, control totals and the signed manifest.

* ``totals``: :class:`ControlTotals`, the row count and per-column sums and ranges.
* ``manifest``: :func:`build_manifest`, :func:`sign_manifest`, :func:`check_signature`.
"""

from export_center.packaging.manifest import (
    ArchiveEntry,
    FileEntry,
    build_manifest,
    canonical_json,
    check_signature,
    key_id,
    sign_manifest,
)
from export_center.packaging.totals import ControlTotals

__all__ = [
    "ArchiveEntry",
    "ControlTotals",
    "FileEntry",
    "build_manifest",
    "canonical_json",
    "check_signature",
    "key_id",
    "sign_manifest",
]
