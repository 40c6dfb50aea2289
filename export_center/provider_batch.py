"""A provider's batch answer, read and checked (DESIGN.md "Provider contract").

:func:`parse_batch` turns the body of a 2xx answer (already inflated and within the
4 MB cap, see :mod:`export_center.provider_body`) into a :class:`Batch`:

==================  =====================================================================
field               rule
==================  =====================================================================
whole answer        a JSON object, or a ``{code, message, data}`` envelope around one
``rows``            a list, at most ``limit`` of them
``columns``         first batch: 1..100 columns, each with a string ``key`` (unique) and
                    a known ``type`` (default STRING); may be omitted later. Optional:
                    ``titleZh`` (text of 1..200 characters, or null), and on a DECIMAL
                    column ``precision`` (1..38) with ``scale`` (0..precision)
``rowFormat``       absent/null or ``"object"``: rows are objects; ``"array"``: each row
                    is one value per column in column order; anything else is refused
``nextCursor``      a string (an integer is taken as its digits), or null
``snapshotToken``   a string of at most 512 characters, or null
``totalRows``       an integer, else ignored
==================  =====================================================================

Every refusal is a :class:`ProviderContractError`.

Exact numbers: orjson decodes a JSON number with a fraction or an exponent as a
``float``, and an integer outside [-2**63, 2**64) as a ``float`` too, which rounds. The
batch therefore keeps its raw body (:attr:`Batch.raw`) until it is converted; when the
converter finds a float in a value cell, :meth:`Batch.exact_rows` decodes the body again
with ``json.loads(parse_float=Decimal)`` (integers stay ``int``, exact at any size).

Row format: an answer with ``rowFormat: "array"`` carries each row as a JSON array in
the order of the declared columns (:attr:`Batch.arrays`): half the bytes of objects and
no key to read per value, as the Trino and BigQuery wire formats do. Objects stay the
default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from export_center.columns import Column, ColumnType
from export_center.errors import ProviderContractError

__all__ = [
    "MAX_COLUMNS",
    "MAX_PRECISION",
    "MAX_TITLE_CHARS",
    "MAX_TOKEN_CHARS",
    "ROW_FORMATS",
    "Batch",
    "NonFiniteNumber",
    "Schema",
    "parse_batch",
    "parse_schema",
    "printable",
]

MAX_COLUMNS = 100
"""Most columns an answer may declare."""
MAX_TOKEN_CHARS = 512
"""Longest ``snapshotToken`` accepted (characters)."""
MAX_TITLE_CHARS = 200
"""Longest ``titleZh`` of a column (characters)."""
MAX_PRECISION = 38
"""Most digits a DECIMAL column may declare (``precision``)."""
ROW_FORMATS = frozenset({"object", "array"})
"""Values of an answer's ``rowFormat``: rows as JSON objects keyed by column key (the
default), or as JSON arrays of one value per column in the order of ``columns``."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One checked provider answer.

    Attributes:
        columns: the declared columns (first batch; None when omitted later).
        rows: raw row mappings as decoded by orjson (decimals as strings; a JSON number
            with a fraction or exponent, or an integer beyond 64 bits, is a ``float``
            here, see :meth:`exact_rows`).
        next_cursor: cursor for the next request (None at the end).
        has_more: whether another batch follows.
        total_rows: the provider's estimate, or None.
        snapshot_token: token to send back with every later batch.
        schema_hash: hash of the column schema.
        raw: the answer's body (at most 4 MB) when ``rows`` came from orjson, so that
            :meth:`exact_rows` can decode it again; None when ``rows`` are exact already.
        arrays: the answer said ``rowFormat: "array"``: each row is a JSON array of one
            value per column, in the order of the declared columns (False: objects
            keyed by column key, the default when ``rowFormat`` is absent).
    """

    columns: list[Column] | None
    rows: list[Any]
    next_cursor: str | None
    has_more: bool
    total_rows: int | None
    snapshot_token: str | None
    schema_hash: str | None
    raw: bytes | None = None
    arrays: bool = False

    def exact_rows(self) -> list[Any]:
        """The rows decoded again so that every JSON number is exact.

        Numbers with a fraction or an exponent become ``decimal.Decimal`` with the
        digits the provider sent (``0E-8``, ``-0.10``), integers stay ``int`` at any
        size, and bare ``NaN``/``Infinity`` become :class:`NonFiniteNumber`. Costs a
        stdlib ``json.loads`` of the body (about ten times orjson), so the pipeline calls
        it only for a batch whose values hold a float.

        Returns:
            The rows, the same number as :attr:`rows`, in the same order.

        Raises:
            ProviderContractError: the body no longer gives the same rows (not expected:
                both decoders read the same bytes).
        """
        if self.raw is None:
            return self.rows
        rows = _rows_of(_unwrap(_exact_loads(self.raw, None)))
        if len(rows) != len(self.rows):  # pragma: no cover - same bytes, same array
            raise ProviderContractError("the exact decoding of the answer found other rows")
        return rows


@dataclass(frozen=True, slots=True)
class Schema:
    """The answer to a schema request (``limit: 0``): what an export of the request has.

    Attributes:
        columns: every column the provider declares, in its order.
        total_rows: the provider's row estimate for the request's parameters, or None
            when it gives none.
    """

    columns: list[Column]
    total_rows: int | None


def parse_schema(raw: bytes) -> Schema:
    """Read and check the body of a 2xx answer to a schema request (``limit: 0``).

    The rules of :func:`parse_batch` with ``limit`` 0 (so any row is refused), and the
    columns must be there.

    Raises:
        ProviderContractError: a rule is broken, or the answer declares no columns.
    """
    batch = parse_batch(raw, 0)
    if batch.columns is None:
        raise ProviderContractError("the answer to a schema request (limit 0) has no columns")
    return Schema(columns=batch.columns, total_rows=batch.total_rows)


class NonFiniteNumber(str):
    """A bare ``NaN``/``Infinity`` literal from a provider; the converters reject it with
    the row and column named (CASES E15)."""


def parse_batch(raw: bytes, limit: int) -> Batch:
    """Read and check the body of a 2xx answer (table in the module docstring).

    Args:
        raw: the body, inflated (at most 4 MB).
        limit: the rows the request asked for.

    Returns:
        The batch; :attr:`Batch.raw` is ``raw`` when orjson decoded it.

    Raises:
        ProviderContractError: the answer breaks a rule of the table.
        MemoryError: decoding ran out of memory (the caller reports a page too large).
    """
    exact = False
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        data = _exact_loads(raw, exc)
        exact = True
    data = _unwrap(data)
    rows = _rows_of(data)
    if len(rows) > limit:
        raise ProviderContractError(f"{len(rows)} rows in a batch of limit {limit}")
    columns = _parse_columns(data["columns"]) if data.get("columns") is not None else None
    token = data.get("snapshotToken")
    if token is not None and (not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS):
        raise ProviderContractError("snapshotToken must be a string of at most 512 characters")
    cursor = data.get("nextCursor")
    if cursor is not None and not isinstance(cursor, str):
        if type(cursor) is not int:  # a float cursor would be rounded, a list mangled
            raise ProviderContractError(f"nextCursor must be a string, got {type(cursor).__name__}")
        cursor = str(cursor)
    total = data.get("totalRows")
    if type(total) is not int:
        total = None
    row_format = data.get("rowFormat")
    if row_format is None:  # absent or null: objects
        row_format = "object"
    if not isinstance(row_format, str) or row_format not in ROW_FORMATS:
        raise ProviderContractError(
            f'rowFormat must be "object" or "array", got {printable(repr(row_format), 60)}'
        )
    return Batch(
        columns=columns,
        rows=rows,
        next_cursor=cursor,
        has_more=bool(data.get("hasMore")),
        total_rows=total,
        snapshot_token=token,
        schema_hash=data.get("schemaHash"),
        raw=None if exact else raw,
        arrays=row_format == "array",
    )


def printable(text: str | None, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, control characters replaced by ``?``.

    For provider text put into a message (a header, a code, a ``rowFormat``).
    """
    value = "".join(c if c.isprintable() else "?" for c in (text or "")[:limit])
    return value + ("..." if text and len(text) > limit else "")


def _parse_columns(raw: Any) -> list[Column]:
    if not isinstance(raw, list) or not raw:
        raise ProviderContractError("columns must be a non-empty list")
    if len(raw) > MAX_COLUMNS:
        raise ProviderContractError(f"{len(raw)} columns, at most {MAX_COLUMNS} allowed")
    columns = []
    seen = set()
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise ProviderContractError("each column needs a string key")
        try:
            ctype = ColumnType(str(item.get("type", "STRING")).upper())
        except ValueError:
            raise ProviderContractError(
                f"column {item['key']!r} has unknown type {item.get('type')!r}"
            ) from None
        if item["key"] in seen:
            raise ProviderContractError(f"column {item['key']!r} declared twice")
        seen.add(item["key"])
        width = item.get("width")
        precision, scale = _precision(item, ctype)
        columns.append(
            Column(
                key=item["key"],
                title=str(item.get("title") or item["key"]),
                type=ctype,
                width=int(width) if isinstance(width, int) and width > 0 else None,
                title_zh=_title_zh(item),
                precision=precision,
                scale=scale,
            )
        )
    return columns


def _title_zh(item: Mapping[str, Any]) -> str | None:
    """A column's ``titleZh``: None when absent or null, else text of 1..200 characters.

    Raises:
        ProviderContractError: not text, empty, or longer than 200 characters.
    """
    title = item.get("titleZh")
    if title is None:
        return None
    if not isinstance(title, str) or not 0 < len(title) <= MAX_TITLE_CHARS:
        raise ProviderContractError(
            f"column {printable(item['key'], 60)!r}: titleZh must be text of 1..{MAX_TITLE_CHARS} "
            f"characters, got {printable(repr(title), 60)}"
        )
    return title


def _precision(item: Mapping[str, Any], ctype: ColumnType) -> tuple[int | None, int | None]:
    """A column's ``(precision, scale)``: both None when absent or null.

    Raises:
        ProviderContractError: one without the other, on another type than DECIMAL, not
            integers, precision outside 1..38 or scale outside 0..precision.
    """
    precision, scale = item.get("precision"), item.get("scale")
    if precision is None and scale is None:
        return None, None
    key = printable(item["key"], 60)
    if ctype is not ColumnType.DECIMAL:
        raise ProviderContractError(
            f"column {key!r}: only a DECIMAL column declares precision and scale, not {ctype}"
        )
    if (
        type(precision) is not int
        or type(scale) is not int
        or not 1 <= precision <= MAX_PRECISION
        or not 0 <= scale <= precision
    ):
        raise ProviderContractError(
            f"column {key!r}: precision must be an integer in 1..{MAX_PRECISION} and scale one "
            f"in 0..precision, got precision {printable(repr(precision), 30)} and scale "
            f"{printable(repr(scale), 30)}"
        )
    return precision, scale


def _unwrap(data: Any) -> Mapping[str, Any]:
    """The answer object (a ``{code, message, data}`` envelope around it is tolerated).

    Raises:
        ProviderContractError: the answer is not a JSON object.
    """
    if isinstance(data, Mapping) and "data" in data and "rows" not in data:
        data = data["data"]
    if not isinstance(data, Mapping):
        raise ProviderContractError("answer must be a JSON object")
    return data


def _rows_of(data: Mapping[str, Any]) -> list[Any]:
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise ProviderContractError("rows must be a list")
    return rows


def _exact_loads(raw: bytes, error: Exception | None) -> Any:
    """Decode ``raw`` with every number exact (``Decimal`` for fractions and exponents,
    ``int`` for integers, :class:`NonFiniteNumber` for bare NaN/Infinity).

    Also the decoder of the answers orjson refuses (bare NaN/Infinity, ``1e400``), so
    that the value checks can name the row and column.

    Args:
        raw: the body.
        error: orjson's error, for the message when this decoder fails too.

    Raises:
        ProviderContractError: the body is not JSON.
    """
    try:
        return json.loads(raw, parse_float=Decimal, parse_constant=NonFiniteNumber)
    except (ValueError, RecursionError):
        raise ProviderContractError(f"answer is not JSON ({error})") from None
