"""The file a user asked for (``filespec``): the checks of ``columns`` and ``options``,
the header language of a request, projection and the stored form."""

from __future__ import annotations

from typing import Any

import pytest

from export_center.columns import Column, ColumnType
from export_center.errors import ValidationFailed
from export_center.filespec import (
    ColumnChoice,
    CsvOptions,
    FileSpec,
    Split,
    language_of_locale,
    parse_file_spec,
)
from export_center.writers.formats import FORMATS

DECLARED = [
    Column("id", "Id", ColumnType.INTEGER, title_zh="编号"),
    Column("amount", "Amount", ColumnType.DECIMAL, title_zh="金额", precision=15, scale=2),
    Column("note", "Note"),
]


def parse(fmt: str = "csv", columns: Any = None, options: Any = None) -> FileSpec:
    return parse_file_spec(
        FORMATS[fmt],
        columns,
        options,
        declared=DECLARED,
        row_cap=1_000,
        byte_cap=10_000_000,
        formats=list(FORMATS.values()),
    )


@pytest.mark.parametrize(
    ("header", "language"),
    [
        ("en;q=0.1, zh-CN;q=0.9", "zh-CN"),
        ("fr, zh-CN;q=0.5", "zh-CN"),
        ("zh-CN,zh;q=0.9,en;q=0.5", "zh-CN"),
        ("zh-Hans-CN", "zh-CN"),
        ("en-US,en;q=0.9,zh;q=0.8", "en"),
        ("zh;q=0, en;q=0.2", "en"),
        ("zh;q=x", "en"),
        ("*", "en"),
        ("de", "en"),
        ("", "en"),
        (None, "en"),
        ("zh;q=0.5, en;q=0.5", "zh-CN"),  # a tie: the earlier one
    ],
)
def test_the_header_language_follows_the_weights_of_accept_language(
    header: str | None, language: str
) -> None:
    assert language_of_locale(header) == language


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ([], "columns must name at least one column"),
        ([{"key": "id", "title": "   "}], "must have 1..100 characters and not be blank"),
        ([{"key": "id", "title": ""}], "must have 1..100 characters and not be blank"),
        ([{"key": "id", "title": "x" * 101}], "must have 1..100 characters"),
        ([{"key": "id", "title": "a\x00b"}], "must not contain control characters"),
        ([{"key": "id", "title": "a\u0085b"}], "must not contain control characters"),
        ([{"key": "id", "title": 123}], "columns[0].title must be text"),
        ([5], "must be a column key"),
        (["x" * 65], "must be a column key"),
    ],
)
def test_bad_columns_are_invalid_values_naming_the_rule(columns: Any, message: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse(columns=columns)
    assert caught.value.code == "INVALID_VALUE"
    assert message in caught.value.message


def test_choices_project_rename_and_title_in_the_language() -> None:
    spec = parse(columns=["note", {"key": "id", "title": "单号"}, "amount"],
                 options={"language": "zh-CN"})  # fmt: skip
    indexes, columns = spec.project(DECLARED)
    assert indexes == [2, 0, 1]
    # the rename wins; a column without a Chinese title keeps its English one
    assert [c.title for c in columns] == ["Note", "单号", "金额"]
    assert columns[2].precision == 15 and columns[2].scale == 2
    everything = parse()
    assert everything.project(DECLARED) == ([0, 1, 2], DECLARED)


def test_the_stored_form_round_trips() -> None:
    spec = FileSpec(
        (ColumnChoice("id", "单号"), ColumnChoice("amount")),
        "zh-CN",
        CsvOptions("gb18030", ";", False, "lf"),
        "zip",
        Split(100, 5_000),
    )
    assert FileSpec.from_json(spec.to_json()) == spec
    assert FileSpec.from_text(None) == FileSpec() == FileSpec.from_json({})


@pytest.mark.parametrize(
    ("fmt", "options", "code", "field"),
    [
        ("xlsx", {"header": False}, "OPTION_NOT_SUPPORTED", "options.header"),
        ("parquet", {"encoding": "utf-8"}, "OPTION_NOT_SUPPORTED", "options.encoding"),
        ("jsonl", {"delimiter": ";"}, "OPTION_NOT_SUPPORTED", "options.delimiter"),
        ("parquet", {"compression": "gzip"}, "OPTION_NOT_SUPPORTED", "options.compression"),
        ("csv", {"compression": "gzip", "split": {"maxRowsPerFile": 10}},
         "OPTION_NOT_SUPPORTED", "options.compression"),
        ("csv", {"split": {"maxRowsPerFile": 1_001}}, "INVALID_SPLIT",
         "options.split.maxRowsPerFile"),
        ("csv", {"split": {"maxRowsPerFile": True}}, "INVALID_SPLIT",
         "options.split.maxRowsPerFile"),
        ("csv", {"split": {"maxBytesPerFile": 10_000_001}}, "INVALID_SPLIT",
         "options.split.maxBytesPerFile"),
        ("csv", {"header": "yes"}, "INVALID_OPTION", "options.header"),
    ],
)  # fmt: skip
def test_options_a_format_cannot_take_are_refused_not_ignored(
    fmt: str, options: dict[str, Any], code: str, field: str
) -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse(fmt, options=options)
    assert (caught.value.code, caught.value.field) == (code, field)


def test_the_refusals_name_the_formats_of_the_table() -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse("xlsx", options={"delimiter": ";"})
    assert caught.value.message == (
        "options.delimiter applies to csv files only, not xlsx; leave it out"
    )
    with pytest.raises(ValidationFailed) as caught:
        parse("xlsx", options={"compression": "gzip"})
    assert caught.value.message.startswith("gzip applies to csv and jsonl;")
