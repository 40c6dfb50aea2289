"""The signed manifest of an export: what was asked, what was delivered, and its proof.

A manifest is a JSON object (camelCase): the task (``taskId``, ``exportType``,
``parameters``, ``format``, ``options``, ``timeZone``), the chosen ``columns``
(``[{key, title, type}]``), ``totalRows``, the delivered ``files`` (``[{name, rows,
bytes, sha256}]``: the downloaded file itself, or each part inside the ZIP), the
``archive`` (``{name, bytes, sha256}`` of the ZIP, or null), the ``controlTotals``
(:class:`~export_center.packaging.totals.ControlTotals`), the ``snapshotToken``, the
times (``createdAt``, ``finishedAt``, ISO 8601 UTC) and the ``signature``. Hashes are
lowercase hexadecimal SHA-256 of the bytes.

Signature: HMAC-SHA256 (RFC 2104) with the installation's manifest key
(``api.manifest_secret``) over the *canonical JSON* of the manifest without its
``signature`` member: keys sorted, no insignificant white space (``,`` and ``:``
separators), non-ASCII characters as themselves, UTF-8 bytes. The ``signature`` member
is ``{"alg": "HMAC-SHA256", "keyId": first 8 hex digits of SHA-256 of the key,
"value": lowercase hex HMAC}``; ``keyId`` tells which key signed without revealing it,
so a rotated key is recognised as "another key" instead of "tampered".

Why HMAC and not Ed25519: the manifest is checked by the installation that made it,
either by ``export-center verify`` run where the settings (and so the key) are, or by
asking the installation's API for the manifest of a task over an authenticated
connection, which is itself the proof of origin. A symmetric key needs nothing
beyond the standard library, follows the pattern of the download-link secret
(generated for the embedded default, required in production) and has no public key to
publish, rotate and distribute. Ed25519 would only pay off when outsiders without
access to the installation must check a manifest offline; then the manifest gains a
second signature member, and this one stays.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from export_center.columns import Column

__all__ = [
    "SIGNATURE_ALG",
    "ArchiveEntry",
    "FileEntry",
    "build_manifest",
    "canonical_json",
    "check_signature",
    "key_id",
    "sign_manifest",
]

SIGNATURE_ALG = "HMAC-SHA256"
"""The ``signature.alg`` of every manifest this module signs."""


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One delivered file: the download itself, or one part inside the ZIP.

    Attributes:
        name: the file name (``orders-part-0001.csv``).
        rows: data rows it holds (header rows not counted).
        bytes: its size in bytes (for a part: uncompressed, as extracted).
        sha256: lowercase hex SHA-256 of those bytes.
    """

    name: str
    rows: int
    bytes: int
    sha256: str

    def as_json(self) -> dict[str, Any]:
        """``{"name", "rows", "bytes", "sha256"}``."""
        return {"name": self.name, "rows": self.rows, "bytes": self.bytes, "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """The delivered ZIP: its name, size in bytes and lowercase hex SHA-256."""

    name: str
    bytes: int
    sha256: str

    def as_json(self) -> dict[str, Any]:
        """``{"name", "bytes", "sha256"}``."""
        return {"name": self.name, "bytes": self.bytes, "sha256": self.sha256}


def _utc_text(moment: _dt.datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise ValueError(f"manifest times must be aware datetimes, got {moment!r}")
    return moment.astimezone(_dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build_manifest(
    *,
    task_id: str,
    export_type: str,
    parameters: Mapping[str, Any],
    file_format: str,
    options: Mapping[str, Any],
    time_zone: str,
    columns: Sequence[Column],
    files: Sequence[FileEntry],
    archive: ArchiveEntry | None,
    control_totals: Mapping[str, Any],
    snapshot_token: str | None,
    created_at: _dt.datetime | None,
    finished_at: _dt.datetime | None,
) -> dict[str, Any]:
    """The unsigned manifest body of one export (sign it with :func:`sign_manifest`).

    Args:
        task_id: the public task id (``exp_...``).
        export_type: the export type (``ORDERS``).
        parameters: the task's normalized parameters.
        file_format: the format's API name (``csv``).
        options: the file options as the task stores them (``FileSpec.to_json()["options"]``).
        time_zone: IANA name of the export time zone (wall times in the file are in it).
        columns: the file's columns in output order, with their header titles.
        files: the delivered file, or the parts inside the ZIP in order.
        archive: the ZIP, or None when the file is delivered as it is (or when the
            manifest is the one inside the ZIP, which cannot hold its own hash).
        control_totals: ``ControlTotals.as_json()``.
        snapshot_token: the provider's snapshot token, or None.
        created_at: when the task was created (aware), or None.
        finished_at: when it succeeded (aware), or None.

    Returns:
        A JSON-able dict; ``totalRows`` is the sum of the files' rows.

    Raises:
        ValueError: a naive time, or control totals whose row count differs from the
            files' rows.
    """
    total_rows = sum(entry.rows for entry in files)
    counted = control_totals.get("rowCount")
    if counted is not None and counted != total_rows:
        raise ValueError(f"control totals count {counted} rows, the files hold {total_rows}")
    return {
        "manifestVersion": 1,
        "taskId": task_id,
        "exportType": export_type,
        "parameters": dict(parameters),
        "format": file_format,
        "options": dict(options),
        "timeZone": time_zone,
        "columns": [{"key": c.key, "title": c.title, "type": str(c.type)} for c in columns],
        "totalRows": total_rows,
        "files": [entry.as_json() for entry in files],
        "archive": None if archive is None else archive.as_json(),
        "controlTotals": dict(control_totals),
        "snapshotToken": snapshot_token,
        "createdAt": _utc_text(created_at),
        "finishedAt": _utc_text(finished_at),
    }


def canonical_json(body: Mapping[str, Any]) -> bytes:
    """The bytes a signature covers: ``body`` without ``signature``, keys sorted,
    compact separators, non-ASCII as itself, UTF-8.

    Raises:
        TypeError: a value JSON cannot hold (a float is allowed but never produced).
        ValueError: a lone surrogate, which UTF-8 cannot encode.
    """
    unsigned = {key: value for key, value in body.items() if key != "signature"}
    text = json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def key_id(key: str | bytes) -> str:
    """The first 8 lowercase hex digits of SHA-256 of the key (names it, hides it)."""
    raw = key.encode("utf-8") if isinstance(key, str) else key
    return hashlib.sha256(raw).hexdigest()[:8]


def _mac(body: Mapping[str, Any], key: str | bytes) -> str:
    raw = key.encode("utf-8") if isinstance(key, str) else key
    return hmac.new(raw, canonical_json(body), hashlib.sha256).hexdigest()


def sign_manifest(body: Mapping[str, Any], key: str | bytes) -> dict[str, Any]:
    """Sign a manifest body with the installation's manifest key.

    Args:
        body: the manifest (a ``signature`` already in it is replaced).
        key: the manifest secret (text is taken as its UTF-8 bytes); not empty.

    Returns:
        A new dict: ``body`` plus ``signature = {"alg": "HMAC-SHA256", "keyId", "value"}``.

    Raises:
        ValueError: an empty key.
    """
    if not key:
        raise ValueError("a manifest needs a non-empty signing key")
    signed = {k: v for k, v in body.items() if k != "signature"}
    signed["signature"] = {"alg": SIGNATURE_ALG, "keyId": key_id(key), "value": _mac(body, key)}
    return signed


def check_signature(manifest: Mapping[str, Any], key: str | bytes) -> bool:
    """Tell whether ``manifest`` carries a valid HMAC-SHA256 signature made with ``key``.

    Args:
        manifest: a parsed manifest.
        key: the manifest secret.

    Returns:
        True only when ``signature.alg`` is HMAC-SHA256, its ``keyId`` is this key's
        and its ``value`` equals the HMAC of the canonical JSON (constant-time compare);
        False for a missing or malformed signature, another key or any changed member.
    """
    signature = manifest.get("signature")
    if not isinstance(signature, Mapping) or not key:
        return False
    value = signature.get("value")
    if signature.get("alg") != SIGNATURE_ALG or not isinstance(value, str):
        return False
    if signature.get("keyId") != key_id(key):
        return False
    try:
        expected = _mac(manifest, key)
    except (TypeError, ValueError):
        return False
    return hmac.compare_digest(expected, value)
