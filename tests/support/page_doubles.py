"""Answers of the file endpoints for browser tests of the page alone.

The download center's page asks ``GET /api/v1/export-types/{type}``,
``POST /api/v1/exports/preview`` and ``GET /api/v1/exports/{taskId}/manifest``. A test of
what the page does with an answer (a warning with its fixes, a manifest to verify a file
against, an older server without those endpoints) routes the request to one of these
answers in the browser (Playwright ``page.route``), in the shapes of the API; the rest of
the stack is the real one. ``sent`` records the JSON bodies the page sent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ORDERS_COLUMNS",
    "FileApiDouble",
    "manifest_of",
]

#: The ORDERS columns as ``GET /api/v1/export-types/ORDERS`` lists them.
ORDERS_COLUMNS: list[dict[str, Any]] = [
    {"key": "o_orderkey", "title": "Order key", "titles": {"en": "Order key", "zh-CN": "订单号"},
     "type": "INTEGER", "precision": None, "scale": None},
    {"key": "c_name", "title": "Customer name",
     "titles": {"en": "Customer name", "zh-CN": "客户名称"}, "type": "STRING",
     "precision": None, "scale": None},
    {"key": "o_totalprice", "title": "Total price",
     "titles": {"en": "Total price", "zh-CN": "订单总额"}, "type": "DECIMAL", "precision": 15,
     "scale": 2},
    {"key": "o_orderdate", "title": "Order date",
     "titles": {"en": "Order date", "zh-CN": "下单日期"}, "type": "DATE", "precision": None,
     "scale": None},
]  # fmt: skip


def manifest_of(
    task_id: str, files: dict[str, bytes], *, archive: bytes | None = None
) -> dict[str, Any]:
    """A manifest answer of ``task_id`` whose files (name -> bytes) hash as given."""
    return {
        "taskId": task_id,
        "exportType": "ORDERS",
        "columns": [
            {"key": c["key"], "title": c["title"], "type": c["type"]} for c in ORDERS_COLUMNS
        ],
        "totalRows": 2 * len(files),
        "files": [
            {
                "name": name,
                "rows": 2,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
            for name, data in files.items()
        ],
        "archive": None
        if archive is None
        else {
            "name": "orders.zip",
            "bytes": len(archive),
            "sha256": hashlib.sha256(archive).hexdigest(),
        },
        "controlTotals": {
            "rowCount": 2 * len(files),
            "columns": {
                "o_totalprice": {"sum": "12345.67"},
                "o_orderdate": {"min": "1995-09-01", "max": "1995-09-30"},
            },
        },
        "snapshotToken": "snap-1",
        "signature": {"alg": "HMAC-SHA256", "keyId": "k1", "value": "00"},
    }


@dataclass
class FileApiDouble:
    """Routes of the file endpoints in one browser page.

    Attributes:
        detail: the answer of ``GET /api/v1/export-types/*`` (None: 404, an older server).
        preview: the answer of ``POST /api/v1/exports/preview`` (None: 404).
        manifest: the answer of ``GET .../manifest`` (None: 404 MANIFEST_NOT_FOUND).
        formats: the ``formats`` the list answer gives every type (None: as the server says).
        sent: the JSON bodies the page POSTed to the preview, in order.
    """

    detail: dict[str, Any] | None = None
    preview: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]] | None = None
    manifest: dict[str, Any] | None = None
    formats: list[str] | None = None
    sent: list[dict[str, Any]] = field(default_factory=list)

    def install(self, page: Any) -> FileApiDouble:
        """Route the endpoints of ``page``; the other requests reach the real server."""
        page.route("**/api/v1/export-types", self._types)
        page.route("**/api/v1/export-types/*", self._detail)
        page.route("**/api/v1/exports/preview", self._preview)
        page.route("**/api/v1/exports/*/manifest", self._manifest)
        return self

    @staticmethod
    def _json(route: Any, status: int, body: Any) -> None:
        route.fulfill(status=status, content_type="application/json", body=json.dumps(body))

    def _types(self, route: Any) -> None:
        answer = route.fetch()
        types = answer.json()
        if self.formats is not None and isinstance(types, list):
            for item in types:
                item["formats"] = list(self.formats)
        route.fulfill(response=answer, body=json.dumps(types))

    def _detail(self, route: Any) -> None:
        if self.detail is None:
            return self._json(
                route, 404, {"code": "NOT_FOUND", "message": "Not Found", "field": None}
            )
        return self._json(route, 200, self.detail)

    def _preview(self, route: Any) -> None:
        body = json.loads(route.request.post_data or "{}")
        self.sent.append(body)
        if self.preview is None:
            return self._json(
                route, 404, {"code": "NOT_FOUND", "message": "Not Found", "field": None}
            )
        answer = self.preview(body) if callable(self.preview) else self.preview
        return self._json(route, 200, answer)

    def _manifest(self, route: Any) -> None:
        if self.manifest is None:
            return self._json(
                route, 404, {"code": "MANIFEST_NOT_FOUND", "message": "no manifest", "field": None}
            )
        return self._json(route, 200, self.manifest)
