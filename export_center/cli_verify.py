"""``export-center verify FILE``: check a downloaded export against its signed manifest.

The manifest comes from ``--manifest M.json``, else from ``manifest.json`` inside a
ZIP, else from the API (``GET {url}/api/v1/exports/{task}/manifest`` with the bearer
token) when ``--task`` is given. The file is recounted from its bytes alone
(``packaging.verify``). The signature is checked when this installation's manifest
key is at hand (``EXPORT_CENTER_API__MANIFEST_SECRET``, or the generated
``manifest-secret.txt`` in the data directory; never generated here): every manifest
this installation makes is signed, so with the key at hand a manifest without a
``signature`` is a difference (``signature: the manifest is not signed``), as is a
signature by another key or of other contents. Without the key the output says
``signature not checked`` (and whether the manifest carries a signature at all).

Exit status: 0 and ``matches`` when everything agrees; 1 and one line per difference;
2 on a usage error (no such file, no manifest to be had, unreadable manifest, API
refusal).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from export_center.packaging.manifest import check_signature, key_id
from export_center.packaging.verify import differences, read_zip_manifest

__all__ = ["load_manifest_key", "verify"]


def _usage(message: str) -> typer.Exit:
    typer.echo(f"verify: {message}", err=True)
    return typer.Exit(2)


def load_manifest_key() -> str | None:
    """This installation's manifest key if it is at hand, else None (never made here)."""
    from export_center.settings import Settings

    settings = Settings()
    value = settings.api.manifest_secret
    if value is not None and value.get_secret_value():
        return value.get_secret_value()
    path = settings.data_dir / "manifest-secret.txt"
    return path.read_text().strip() if path.exists() else None


def _from_api(url: str, task: str, token: str | None) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        answer = httpx.get(
            f"{url.rstrip('/')}/api/v1/exports/{task}/manifest", headers=headers, timeout=30
        )
    except httpx.HTTPError as exc:
        raise _usage(f"cannot reach {url}: {exc}") from None
    if answer.status_code != 200:
        raise _usage(f"the API answered {answer.status_code} for the manifest of {task}")
    try:
        loaded = answer.json()
    except ValueError:
        raise _usage(f"the API's answer for the manifest of {task} is not JSON") from None
    if not isinstance(loaded, dict):
        raise _usage("the API's manifest is not a JSON object")
    return loaded


def _manifest(
    data: bytes, manifest: Path | None, task: str | None, url: str | None, token: str | None
) -> tuple[dict[str, Any], str]:
    if manifest is not None:
        try:
            loaded = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise _usage(f"cannot read the manifest {manifest}: {exc}") from None
        if not isinstance(loaded, dict):
            raise _usage(f"{manifest} is not a JSON object")
        return loaded, str(manifest)
    if task is not None:
        if url is None:
            raise _usage("--task needs --url (and --token)")
        return _from_api(url, task, token), f"{url} task {task}"
    try:
        inside = read_zip_manifest(data)
    except ValueError as exc:
        raise _usage(f"the ZIP's manifest.json is unreadable: {exc}") from None
    if inside is None:
        raise _usage("no manifest: give --manifest M.json or --task TASK_ID --url URL")
    return inside, "manifest.json in the ZIP"


def _signature_lines(body: dict[str, Any]) -> list[str]:
    """Check the manifest's signature: print ``signature ok`` or ``signature not
    checked: ...`` (no key here), and return the differences (rules: module docstring)."""
    signature = body.get("signature")
    key = load_manifest_key()
    if key is None:
        why = "no manifest key here" + ("" if signature else "; the manifest is not signed")
        typer.echo(f"signature not checked: {why}")
        return []
    if not signature:  # absent, null or empty
        return ["signature: the manifest is not signed"]
    if check_signature(body, key):
        typer.echo(f"signature ok (keyId {key_id(key)})")
        return []
    if not isinstance(signature, dict):
        return ["signature: not a signature object (alg, keyId, value)"]
    if signature.get("keyId") != key_id(key):
        return [
            f"signature: keyId expected {key_id(key)} found {signature.get('keyId')} "
            "(signed with another key)"
        ]
    return ["signature: does not match the manifest's contents"]


def verify(
    file: Annotated[Path, typer.Argument(help="The downloaded file (ZIP, .gz or plain)")],
    manifest: Annotated[
        Path | None, typer.Option("--manifest", help="The manifest JSON of the export")
    ] = None,
    task: Annotated[
        str | None, typer.Option("--task", help="Ask the API for this task's manifest")
    ] = None,
    url: Annotated[
        str | None, typer.Option("--url", help="The API's base URL (with --task)")
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", help="Bearer token for the API (with --task)")
    ] = None,
) -> None:
    """Check FILE against its manifest: hashes, sizes, rows and control totals."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise _usage(f"cannot read {file}: {exc.strerror or exc}") from None
    body, source = _manifest(data, manifest, task, url, token)
    typer.echo(f"manifest: {source}")
    try:
        lines = differences(data, file.name, body)
    except (ValueError, TypeError, AttributeError) as exc:  # not a manifest's shape
        raise _usage(f"the manifest is not readable: {exc}") from None
    lines += _signature_lines(body)
    for line in lines:
        typer.echo(line)
    if lines:
        typer.echo(f"{file.name}: {len(lines)} difference(s)")
        raise typer.Exit(1)
    typer.echo(f"{file.name}: matches")
