"""The table of file formats (``writers.formats.FORMATS``): every entry has all its parts
and each part keeps its promise (read back by a real reader), and every place that
depends on the format (the API's accepted values, its OpenAPI enum and download content
types, the object keys) asks the table; no module outside ``writers/`` names a format."""

from __future__ import annotations

import ast
import datetime as dt
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pyarrow.parquet as pq
import pytest

from export_center.api.app import create_app
from export_center.columns import Column, ColumnType
from export_center.errors import FileTooLarge
from export_center.filespec import GZIP_MEDIA_TYPE, ZIP_MEDIA_TYPE, CsvOptions
from export_center.packaging.split import open_sized_writer, row_additive
from export_center.settings import Settings
from export_center.storage import keys as storage
from export_center.writers import ExportWriter, WriterStats, formats, open_writer
from export_center.writers.formats import (
    DEFAULT_FORMAT,
    FORMATS,
    FileFormat,
    extension_pattern,
    find_format,
    format_choices,
    format_names,
    task_format,
)
from tests.support.helpers import read_csv, read_xlsx
from tests.unit.writer_helpers import frozen_package_time


#: A real reader per format: the file's rows as lists of cells, header first (a new
#: format brings its reader here; ``test_every_format_has_a_reader`` holds them equal).
def read_jsonl(data: bytes) -> list[list[Any]]:
    """JSON Lines: the first object's names (the column keys), then each row's values."""
    objects = [json.loads(line) for line in data.decode("utf-8").split("\n")[:-1]]
    assert data.endswith(b"\n") or not data
    return [list(objects[0]) if objects else ["id", "name"]] + [list(o.values()) for o in objects]


def read_parquet(data: bytes) -> list[list[Any]]:
    """Parquet (pyarrow): the fields' ``title`` metadata, then the rows."""
    table = pq.read_table(io.BytesIO(data))
    titles = [field.metadata[b"title"].decode() for field in table.schema]
    return [titles] + [list(row.values()) for row in table.to_pylist()]


READERS: dict[str, Callable[[bytes], list[list[Any]]]] = {
    "csv": read_csv,
    "xlsx": read_xlsx,
    "jsonl": read_jsonl,
    "parquet": read_parquet,
}

COLUMNS = [Column("id", "Id", ColumnType.STRING), Column("name", "Name", ColumnType.STRING)]
ROWS = [{"id": f"r{i}", "name": f"name {i}"} for i in range(5)]
EXPECTED = [["Id", "Name"]] + [[row["id"], row["name"]] for row in ROWS]
#: JSON Lines has no header: its objects' names are the keys.
EXPECTED_BY_FORMAT = {"jsonl": [["id", "name"]] + EXPECTED[1:]}


def expected(entry: FileFormat) -> list[list[Any]]:
    return EXPECTED_BY_FORMAT.get(entry.name, EXPECTED)


ENTRIES = list(FORMATS.values())
ROOT = Path(__file__).resolve().parents[2] / "export_center"


def _file(entry: FileFormat, rows: list[dict[str, Any]], **options: Any) -> tuple[bytes, Any]:
    """The single writer's file of ``rows`` and its stats."""
    out = io.BytesIO()
    writer = entry.open_writer(out, COLUMNS, time_zone="UTC", max_bytes=None, **options)
    writer.write_rows(rows)
    stats = writer.close()
    return out.getvalue(), stats


def _parts(entry: FileFormat, shards: list[list[dict[str, Any]]]) -> tuple[list[bytes], Any]:
    """One part per shard from the format's part writer, and the total of their stats."""
    parts, stats = [], []
    for rows in shards:
        out = io.BytesIO()
        part = entry.open_part(out, COLUMNS, time_zone="UTC", resume_from=None)
        part.write_rows(rows)
        stats.append(part.checkpoint())
        part.close()
        parts.append(out.getvalue())
    return parts, WriterStats.total(stats)


def _assembled(entry: FileFormat, parts: list[bytes], part_stats: Any, cap: int | None) -> bytes:
    out = io.BytesIO()
    entry.assemble(out, COLUMNS, [[p] for p in parts], part_stats=part_stats, max_bytes=cap)
    return out.getvalue()


# ------------------------------------------------------------------ the entries


def test_every_format_has_a_reader_and_the_table_lists_csv_xlsx_jsonl_parquet() -> None:
    assert set(READERS) == set(FORMATS)
    assert format_names() == list(FORMATS) == ["csv", "xlsx", "jsonl", "parquet"]
    assert DEFAULT_FORMAT is FORMATS["csv"]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_every_format_names_itself_consistently(entry: FileFormat) -> None:
    assert re.fullmatch(r"[a-z][a-z0-9]*", entry.name)
    assert re.fullmatch(r"[a-z0-9]+", entry.extension)
    assert entry.task_value == entry.name.upper()
    assert re.fullmatch(r"[a-z]+/[a-z0-9.+-]+", entry.media_type)
    assert entry.content_type.startswith(entry.media_type)
    assert FORMATS[entry.name] is entry
    assert len({e.extension for e in ENTRIES}) == len({e.media_type for e in ENTRIES}) == 4


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_the_writer_writes_a_file_its_reader_reads_and_names_its_type(entry: FileFormat) -> None:
    out = io.BytesIO()
    writer = entry.open_writer(out, COLUMNS, time_zone="UTC", max_bytes=None)
    assert isinstance(writer, ExportWriter)
    assert (writer.extension, writer.content_type) == (entry.extension, entry.content_type)
    writer.write_rows(ROWS)
    stats = writer.close()
    assert stats.rows == len(ROWS) and stats.bytes == len(out.getvalue())
    assert READERS[entry.name](out.getvalue()) == expected(entry)
    # open_writer is the same table lookup, in any letter case.
    again = io.BytesIO()
    same = open_writer(entry.name.upper(), again, COLUMNS)
    same.write_rows(ROWS)
    same.close()
    assert READERS[entry.name](again.getvalue()) == expected(entry)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
@pytest.mark.parametrize("cut", [0, 2, 5])
def test_parts_assemble_into_the_single_writers_file(entry: FileFormat, cut: int) -> None:
    with frozen_package_time():
        single, single_stats = _file(entry, ROWS)
        parts, part_stats = _parts(entry, [ROWS[:cut], ROWS[cut:]])
        out = io.BytesIO()
        stats = entry.assemble(
            out, COLUMNS, [[p] for p in parts], part_stats=part_stats, max_bytes=None
        )
    assert out.getvalue() == single
    assert stats == single_stats
    assert READERS[entry.name](out.getvalue()) == expected(entry)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_the_assembler_enforces_the_size_cap(entry: FileFormat) -> None:
    with frozen_package_time():
        single, _ = _file(entry, ROWS)
        parts, part_stats = _parts(entry, [ROWS[:2], ROWS[2:]])
        assert _assembled(entry, parts, part_stats, len(single)) == single
        with pytest.raises(FileTooLarge):
            _assembled(entry, parts, part_stats, len(single) - 1)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_parts_sum_to_file_means_a_fixed_head_plus_the_parts(entry: FileFormat) -> None:
    heads = set()
    for rows in ([], ROWS[:1], ROWS):
        parts, part_stats = _parts(entry, [rows[:1], rows[1:]])
        heads.add(len(_assembled(entry, parts, part_stats, None)) - sum(map(len, parts)))
    if entry.parts_sum_to_file:
        assert heads == {len(_file(entry, [])[0])}  # the file without rows is the head
    else:  # compressed: the parts' bytes do not add up to the file's
        assert len(heads) > 1


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_sheet_rows_is_the_most_rows_a_sheet_holds(entry: FileFormat) -> None:
    if entry.sheet_rows is None:  # no sheets: the limit is ignored, one table
        data, stats = _file(entry, ROWS, sheet_row_limit=2)
        assert stats.sheets == 1
        assert READERS[entry.name](data) == expected(entry)
        return
    assert entry.sheet_rows == 1_048_575  # Excel's 1,048,576 rows, one of them the header
    data, stats = _file(entry, ROWS, sheet_row_limit=2)
    assert stats.sheets == 3  # 2 + 2 + 1, the header repeated on each
    assert READERS[entry.name](data) == expected(entry)
    assert _file(entry, ROWS)[1].sheets == 1  # no limit given: the format's most
    _file(entry, ROWS, sheet_row_limit=entry.sheet_rows)
    with pytest.raises(ValueError):
        _file(entry, ROWS, sheet_row_limit=entry.sheet_rows + 1)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_the_tables_reader_reads_what_the_test_reader_reads(entry: FileFormat) -> None:
    data, _ = _file(entry, ROWS)
    rows = list(entry.reader.rows(data, COLUMNS, CsvOptions()))
    assert rows == READERS[entry.name](data)[1:] == EXPECTED[1:]  # the header left out
    assert [[entry.reader.text(v) for v in row] for row in rows] == EXPECTED[1:]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_a_format_is_cut_by_bytes_either_row_by_row_or_by_trial(entry: FileFormat) -> None:
    # Parts that sum to the file are measured row by row; the others need a writer
    # that tries (packaging.split asks the table for it).
    assert (entry.open_sized is None) == entry.parts_sum_to_file == row_additive(entry)
    if entry.open_sized is None:
        with pytest.raises(ValueError, match=f"format {entry.name} is not cut by trial"):
            open_sized_writer(entry, io.BytesIO(), COLUMNS, time_zone="UTC", sheet_row_limit=None)
        return

    def sized_file(rows: list[dict[str, Any]], cap: int) -> tuple[bytes, Any]:
        out = io.BytesIO()
        with frozen_package_time():
            sized = open_sized_writer(entry, out, COLUMNS, time_zone="UTC", sheet_row_limit=None)
            back = sized.write_within(_columns(rows), cap, step=1)
            sized.close()
        return out.getvalue(), back

    two, back = sized_file(ROWS[:2], 10**6)
    assert back is None  # all taken
    # Room for exactly that file: the third and later rows are given back.
    data, back = sized_file(ROWS, len(two))
    assert back is not None and [list(c) for c in back] == _columns(ROWS[2:])
    assert data == two
    assert READERS[entry.name](data) == expected(entry)[:3]


def _columns(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [[row[c.key] for row in rows] for c in COLUMNS]


def test_date_times_are_exact_to_the_microsecond_but_in_xlsx() -> None:
    # Excel serials hold milliseconds: verify compares XLSX date-times to the ms.
    assert {e.name: e.time_resolution_us for e in ENTRIES} == {
        "csv": 1, "xlsx": 1_000, "jsonl": 1, "parquet": 1
    }  # fmt: skip
    at = dt.datetime(2024, 1, 1, 8, 0, 0, 123_456, tzinfo=dt.UTC)
    columns = [Column("at", "At", ColumnType.DATETIME)]
    for entry in ENTRIES:
        out = io.BytesIO()
        writer = entry.open_writer(out, columns, time_zone="UTC", max_bytes=None)
        writer.write_columns([[at]])
        writer.close()
        [[cell]] = list(entry.reader.rows(out.getvalue(), columns, CsvOptions()))
        found = cell if isinstance(cell, dt.datetime) else dt.datetime.fromisoformat(cell)
        lost = abs(found.replace(tzinfo=None) - at.replace(tzinfo=None))
        assert lost < dt.timedelta(microseconds=entry.time_resolution_us), entry.name
        assert (lost == dt.timedelta(0)) == (entry.time_resolution_us == 1), entry.name


# ------------------------------------------------------------------ lookups


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_a_format_is_found_by_its_name_in_any_letter_case(entry: FileFormat) -> None:
    name = entry.name
    for value in (name, name.upper(), name.capitalize(), name[:-1] + name[-1].upper()):
        assert find_format(value) is entry
        assert task_format(value) is entry
    for value in (f" {name}", f"{name} ", f".{name}", f"{name}x", name[:-1], ""):
        assert find_format(value) is None
        assert task_format(value) is DEFAULT_FORMAT  # the attempt then fails UNKNOWN_FORMAT


def test_the_upper_case_rule_is_the_one_the_api_always_applied() -> None:
    # "ſ" (long s) upper-cases to "S": the API's old check (value.upper() in CSV, XLSX)
    # accepted "cſv" as CSV, and so does the table.
    assert find_format("cſv") is FORMATS["csv"]
    assert find_format("pdf") is None and find_format("PDF") is None


def test_format_choices_reads_like_a_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    assert format_choices() == "csv, xlsx, jsonl or parquet"
    assert format_choices(quoted=True) == "'csv', 'xlsx', 'jsonl' or 'parquet'"
    three = {name: FORMATS["csv"] for name in ("a", "b", "c")}
    monkeypatch.setattr(formats, "FORMATS", MappingProxyType(three))
    assert format_choices() == "a, b or c"
    monkeypatch.setattr(formats, "FORMATS", MappingProxyType({"a": FORMATS["csv"]}))
    assert format_choices(quoted=True) == "'a'"


def test_open_writer_refuses_a_name_outside_the_table_naming_the_table() -> None:
    with pytest.raises(
        ValueError,
        match=r"^unknown export format: 'pdf' \(expected 'csv', 'xlsx', 'jsonl' or 'parquet'\)$",
    ):
        open_writer("pdf", io.BytesIO(), COLUMNS)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_object_keys_carry_the_tables_extensions_only(entry: FileFormat) -> None:
    assert re.fullmatch(extension_pattern(), entry.extension)
    key = storage.new_object_key("exp_" + "0" * 26, entry.extension, tenant="t1")
    assert key.endswith(f".{entry.extension}")
    assert storage.is_export_key(key)
    assert storage.task_no_of_key(key) == "exp_" + "0" * 26
    stem = key.rpartition(".")[0]
    for other in ("pdf", entry.extension.upper(), entry.extension + "x", "", "part"):
        assert not storage.is_export_key(f"{stem}.{other}")


# ------------------------------------------------------------------ the API asks the table


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    settings = Settings(
        environment="test", mount_sample_providers=True, data_dir=tmp_path_factory.mktemp("data")
    )
    return create_app(settings).openapi()


def _examples(node: Any) -> list[dict[str, Any]]:
    """Every example value with a ``code`` anywhere in the OpenAPI document."""
    found = []
    if isinstance(node, dict):
        value = node.get("value")
        if isinstance(value, dict) and "code" in value:
            found.append(value)
        for child in node.values():
            found.extend(_examples(child))
    elif isinstance(node, list):
        for child in node:
            found.extend(_examples(child))
    return found


def test_openapi_download_content_types_are_the_tables(schema: dict[str, Any]) -> None:
    answers = schema["paths"]["/api/v1/exports/{task_id}/download"]["get"]["responses"]
    # The formats' own, then what a package delivers (gzip, a ZIP of the file or parts).
    media = [e.media_type for e in ENTRIES] + [GZIP_MEDIA_TYPE, ZIP_MEDIA_TYPE]
    assert [m for m in answers["200"]["content"] if m != "application/json"] == media
    assert list(answers["206"]["content"]) == media


def test_openapi_format_enums_and_the_invalid_format_message_are_the_tables(
    schema: dict[str, Any],
) -> None:
    models = schema["components"]["schemas"]
    create = models["ExportCreate"]["properties"]["format"]
    assert create["enum"] == format_names()
    assert create["description"] == f"{format_choices()} (any letter case)"
    assert models["ExportPublic"]["properties"]["format"]["enum"] == format_names()
    assert models["ExportTypePublic"]["properties"]["formats"]["items"]["enum"] == format_names()
    messages = {e["message"] for e in _examples(schema) if e["code"] == "INVALID_FORMAT"}
    assert messages == {f"format must be {format_choices()}, got 'pdf'"}


def test_the_descriptions_that_name_formats_agree_with_the_table(
    schema: dict[str, Any],
) -> None:
    # Three descriptions state a per-format fact in words (ALLOWED below): a new
    # format, or a changed flag, makes this fail until the words are updated.
    models = schema["components"]["schemas"]
    compression = models["ExportOptions"]["properties"]["compression"]["description"]
    assert compression == "none (default), gzip (CSV, JSON Lines) or zip"
    assert [e.name for e in ENTRIES if e.gzip] == ["csv", "jsonl"]
    preview = models["PreviewPublic"]["properties"]
    assert preview["sheets"]["description"].startswith("XLSX: ")
    assert [e.name for e in ENTRIES if e.sheet_rows is not None] == ["xlsx"]
    assert (
        "the CSV fields; XLSX, JSON Lines and Parquet cells"
        in (preview["sampleRows"]["description"])
    )
    assert format_names() == ["csv", "xlsx", "jsonl", "parquet"]


# ------------------------------------------------------------------ nobody else knows


#: String constants outside ``writers/`` that may name a format, with the reason.
ALLOWED = {
    # OpenAPI examples: one concrete request and answer, shown as a client would see it.
    ("api/schemas.py", "xlsx"): "the example create body and task",
    ("api/schemas.py", "September orders.xlsx"): "the example task's file name",
    ("api/openapi.py", "requestId '7d1c0e2a' was already used for another export (ORDERS, csv);"
     " this request differs in parameters; use a new key"): "the example of a reused key",
    # The demo exports a fixed pair and says so in its help and README.
    ("cli.py", "csv"): "demo: the formats it demonstrates",
    ("cli.py", "xlsx"): "demo: the formats it demonstrates",
    ("cli.py", "Where orders.csv, orders.xlsx and summary.json go"): "demo: its output files",
    # OpenAPI examples of one concrete request or answer (the preview, the manifest,
    # the 422s), shown as a client would see them.
    ("api/schemas.py", "csv"): "the second example create body",
    ("api/file_schemas.py", "csv"): "the example manifest's format",
    ("api/file_schemas.py", "September orders.csv"): "the example manifest's file",
    ("api/file_schemas.py", "September orders-part-0001.csv"): "the example part's name",
    ("api/openapi.py", "options.delimiter applies to CSV files only, not xlsx; leave it out"):
        "the example OPTION_NOT_SUPPORTED answer",
    ("api/openapi.py", "format parquet needs the optional extra 'parquet': "
     "pip install -e '.[parquet]'"): "the example FORMAT_NOT_INSTALLED answer",
    # The CSV options are CSV options by the interface (the API's option names).
    ("api/schemas.py", "CSV text encoding (default utf-8-bom; gb18030 for Excel on Chinese "
     "Windows)"): "options.encoding is a CSV option",
    ("api/schemas.py", "CSV field delimiter (default ,)"): "options.delimiter is a CSV option",
    ("api/schemas.py", "CSV header row (default true)"): "options.header is a CSV option",
    ("api/schemas.py", "CSV record terminator (default crlf)"):
        "options.lineEnding is a CSV option",
    # Descriptions that state a per-format fact: pinned to the table by
    # test_the_descriptions_that_name_formats_agree_with_the_table.
    ("api/schemas.py", "none (default), gzip (CSV, JSON Lines) or zip"):
        "the formats that take gzip",
    ("api/file_schemas.py", "XLSX: sheets of the largest file; 1 for other formats"):
        "the formats with sheets",
    ("api/file_schemas.py", "Up to 20 first rows, each cell's text as the format writes it (the "
     "CSV fields; XLSX, JSON Lines and Parquet cells read back by their readers)"):
        "every format and how its sample cells are read",
}  # fmt: skip


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the constant nodes that are docstrings (or bare string statements)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _format_words() -> re.Pattern[str]:
    words = {w.lower() for e in ENTRIES for w in (e.name, e.extension)}
    types = {e.media_type for e in ENTRIES} | {e.content_type for e in ENTRIES}
    alternatives = [rf"\b{re.escape(w)}\b" for w in sorted(words)]
    alternatives += [re.escape(t) for t in sorted(types)]
    return re.compile("|".join(alternatives), re.IGNORECASE)


def test_no_module_outside_writers_names_a_format() -> None:
    words = _format_words()
    found, allowed = [], set()
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(("writers/", "migrations/")):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
                and words.search(node.value)
            ):
                if (relative, node.value) in ALLOWED:
                    allowed.add((relative, node.value))
                else:
                    found.append(f"{relative}:{node.lineno}: {node.value!r}")
    assert found == []
    assert allowed == set(ALLOWED)  # no stale exception


def test_the_scan_finds_a_format_where_one_is_named() -> None:
    words = _format_words()
    for text in ("csv", "XLSX", "a.xlsx", "text/csv", "application/vnd.openxmlformats-"
                 "officedocument.spreadsheetml.sheet", "csv or xlsx"):  # fmt: skip
        assert words.search(text), text
    for text in ("csvx", "ORDERS", "export", "text/plain"):
        assert not words.search(text), text
