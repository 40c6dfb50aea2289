"""The file a user asked for: chosen columns, header language and file options.

A create request describes its file with ``columns`` (keys in output order, each may
rename its header) and ``options`` (header language, CSV encoding, delimiter, header
row and line ending, compression, split into parts). :func:`parse_file_spec` checks
them against the export type's declared columns and the format, and gives a
:class:`FileSpec`; a task row stores :meth:`FileSpec.to_json`, and the attempt rebuilds
it with :meth:`FileSpec.from_json`.

Rules:

* Columns: every chosen key is one of the type's declared keys, none twice; the file
  holds the chosen columns in the chosen order (the provider may send more; the
  attempt projects). No choice means every declared column in the provider's order.
* Header language: a column's title is its rename if one was given, else its title in
  ``language`` (the Chinese title when ``zh-CN`` and the column has one, else the
  English title). Data cells never depend on the language.
* CSV options (``encoding``, ``delimiter``, ``header``, ``lineEnding``) apply to CSV
  only; another format that names one is refused (``OPTION_NOT_SUPPORTED``) instead of
  silently ignoring it. ``gzip`` compresses CSV and JSON Lines; ``zip`` any format.
* Split: ``maxRowsPerFile`` is 1..the type's row cap, ``maxBytesPerFile`` at least
  1 KiB and at most the file size cap; either makes several files, each complete on
  its own, delivered in one ZIP with ``manifest.json``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from export_center.columns import Column
from export_center.errors import ValidationFailed

__all__ = [
    "COMPRESSIONS",
    "FormatTraits",
    "GZIP_MEDIA_TYPE",
    "ZIP_MEDIA_TYPE",
    "DELIMITERS",
    "ENCODINGS",
    "LANGUAGES",
    "LINE_ENDINGS",
    "MAX_PARTS",
    "MIN_BYTES_PER_FILE",
    "ColumnChoice",
    "CsvOptions",
    "FileSpec",
    "Split",
    "language_of_locale",
    "parse_file_spec",
]

LANGUAGES = ("en", "zh-CN")
"""Header languages: English and simplified Chinese."""
ENCODINGS = ("utf-8-bom", "utf-8", "gb18030")
"""CSV encodings; ``utf-8-bom`` (the default) makes Excel read UTF-8, ``gb18030`` is what
Excel on a Chinese Windows reads without an import dialog."""
DELIMITERS = (",", ";", "\t", "|")
"""CSV field delimiters."""
LINE_ENDINGS = ("crlf", "lf")
"""CSV record terminators: CRLF (RFC 4180, the default) or LF."""
COMPRESSIONS = ("none", "gzip", "zip")
"""How the delivered file is compressed."""
GZIP_MEDIA_TYPE = "application/gzip"
"""The content type of a gzip-compressed file (``csv.gz``, ``jsonl.gz``)."""
ZIP_MEDIA_TYPE = "application/zip"
"""The content type of a ZIP (``compression: zip`` and every split)."""
MAX_PARTS = 1000
"""The most parts a split export may make: the part after it fails the export with
``TOO_MANY_PARTS`` (and a preview that foresees more warns), because a ZIP of more parts
than anyone opens one by one, with a manifest of megabytes, helps nobody."""
MIN_BYTES_PER_FILE = 1024
"""The smallest ``split.maxBytesPerFile``: a part must hold at least its head and a row."""


@dataclass(frozen=True, slots=True)
class ColumnChoice:
    """One chosen column: its key and, when the user renamed it, the header title."""

    key: str
    title: str | None = None


@dataclass(frozen=True, slots=True)
class CsvOptions:
    """How a CSV file is written (CSV only).

    Attributes:
        encoding: one of :data:`ENCODINGS`.
        delimiter: one of :data:`DELIMITERS`.
        header: whether the first record is the header row.
        line_ending: ``crlf`` or ``lf`` (:data:`LINE_ENDINGS`).
    """

    encoding: str = "utf-8-bom"
    delimiter: str = ","
    header: bool = True
    line_ending: str = "crlf"

    @property
    def newline(self) -> str:
        """The record terminator itself: ``"\\r\\n"`` or ``"\\n"``."""
        return "\r\n" if self.line_ending == "crlf" else "\n"

    @property
    def is_default(self) -> bool:
        """True for the CSV of every earlier release (UTF-8 with BOM, ``,``, header, CRLF)."""
        return self == CsvOptions()


@dataclass(frozen=True, slots=True)
class Split:
    """Where the file is cut into parts: after ``max_rows_per_file`` data rows, or
    before a row that would take a part past ``max_bytes_per_file`` bytes (either may be
    None; at least one is set)."""

    max_rows_per_file: int | None = None
    max_bytes_per_file: int | None = None


@dataclass(frozen=True, slots=True)
class FileSpec:
    """The file a task writes, beyond its format and time zone.

    Attributes:
        columns: the chosen columns in output order; empty means every column the
            provider declares, in its order, with its titles.
        language: the header language, ``en`` or ``zh-CN``.
        csv: the CSV options (the defaults for other formats).
        compression: ``none``, ``gzip`` or ``zip``.
        split: where to cut the file into parts, or None for one file.
    """

    columns: tuple[ColumnChoice, ...] = ()
    language: str = "en"
    csv: CsvOptions = field(default_factory=CsvOptions)
    compression: str = "none"
    split: Split | None = None

    @property
    def archived(self) -> bool:
        """True when the delivered file is a ZIP of parts (``zip`` or a split)."""
        return self.compression == "zip" or self.split is not None

    @property
    def is_plain(self) -> bool:
        """True when the file is the format's writer output as it is: no compression,
        no split (column choice, language and CSV options may still apply)."""
        return self.compression == "none" and self.split is None

    def project(self, declared: Sequence[Column]) -> tuple[list[int], list[Column]]:
        """The chosen columns among the provider's, with their header titles.

        Args:
            declared: the columns the provider declared, in its order.

        Returns:
            ``(indexes, columns)``: for each output column the index of its values in
            ``declared``, and the output column (title renamed or in :attr:`language`).

        Raises:
            KeyError: a chosen key the provider does not declare (its message names it).
        """
        by_key = {c.key: i for i, c in enumerate(declared)}
        choices = self.columns or tuple(ColumnChoice(c.key) for c in declared)
        indexes: list[int] = []
        out: list[Column] = []
        for choice in choices:
            index = by_key.get(choice.key)
            if index is None:
                raise KeyError(choice.key)
            column = declared[index]
            title = choice.title or self.title_of(column)
            indexes.append(index)
            out.append(dataclasses.replace(column, title=title))
        return indexes, out

    def title_of(self, column: Column) -> str:
        """A column's header in :attr:`language` (no rename considered)."""
        if self.language == "zh-CN" and column.title_zh:
            return column.title_zh
        return column.title

    def to_json(self) -> dict[str, Any]:
        """The JSON object a task row stores (camelCase, the API's option names)."""
        options: dict[str, Any] = {
            "language": self.language,
            "encoding": self.csv.encoding,
            "delimiter": self.csv.delimiter,
            "header": self.csv.header,
            "lineEnding": self.csv.line_ending,
            "compression": self.compression,
        }
        if self.split is not None:
            options["split"] = {
                "maxRowsPerFile": self.split.max_rows_per_file,
                "maxBytesPerFile": self.split.max_bytes_per_file,
            }
        return {
            "columns": [
                {"key": c.key, "title": c.title} if c.title else {"key": c.key}
                for c in self.columns
            ],
            "options": options,
        }

    def options_for(self, file_format: FormatTraits) -> dict[str, Any]:
        """The options as the task detail and the manifest show them: :meth:`to_json`'s,
        without the CSV options when the format does not take them."""
        options: dict[str, Any] = self.to_json()["options"]
        if not file_format.csv_options:
            for name in ("encoding", "delimiter", "header", "lineEnding"):
                options.pop(name, None)
        return options

    @classmethod
    def from_text(cls, text: str | None) -> FileSpec:
        """The spec a task row's ``file_spec_json`` holds (None: the defaults)."""
        return cls.from_json(json.loads(text)) if text else cls()

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> FileSpec:
        """Rebuild a spec stored by :meth:`to_json` (None or ``{}``: the defaults)."""
        if not data:
            return cls()
        options = data.get("options") or {}
        split = options.get("split")
        return cls(
            columns=tuple(
                ColumnChoice(str(c["key"]), c.get("title")) for c in data.get("columns") or ()
            ),
            language=str(options.get("language", "en")),
            csv=CsvOptions(
                encoding=str(options.get("encoding", "utf-8-bom")),
                delimiter=str(options.get("delimiter", ",")),
                header=bool(options.get("header", True)),
                line_ending=str(options.get("lineEnding", "crlf")),
            ),
            compression=str(options.get("compression", "none")),
            split=(
                Split(split.get("maxRowsPerFile"), split.get("maxBytesPerFile")) if split else None
            ),
        )


class FormatTraits(Protocol):
    """What the file options need to know of a format (``writers.formats.FileFormat``)."""

    @property
    def name(self) -> str:
        """The format's API name."""
        ...

    @property
    def csv_options(self) -> bool:
        """Whether the CSV options (encoding, delimiter, header, line ending) apply."""
        ...

    @property
    def gzip(self) -> bool:
        """Whether ``compression: gzip`` applies (the file is not compressed inside)."""
        ...


def _names(formats: Sequence[FormatTraits], flag: str) -> str:
    names = [f.name for f in formats if getattr(f, flag)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _language_of_tag(tag: str) -> str | None:
    tag = tag.lower()
    if tag == "zh" or tag.startswith("zh-"):
        return "zh-CN"
    if tag == "en" or tag.startswith("en-"):
        return "en"
    return None


def language_of_locale(accept_language: str | None) -> str:
    """The header language a request's ``Accept-Language`` prefers.

    Rule (the header's weights, RFC 9110 12.5.4): among its language tags, the one with
    the highest ``q`` (1 when absent; the earlier one on a tie; ``q=0`` never) that is
    Chinese (``zh``, ``zh-CN``, ``zh-Hans``...: ``zh-CN``) or English (``en``, ``en-GB``...:
    ``en``); tags of other languages and ``*`` are passed over. ``en`` when none is.
    """
    best: tuple[float, int, str] | None = None
    for position, item in enumerate((accept_language or "").split(",")):
        tag, *params = (part.strip() for part in item.split(";"))
        language = _language_of_tag(tag)
        if language is None:
            continue
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        if weight <= 0:
            continue
        if best is None or (weight, -position) > (best[0], -best[1]):
            best = (weight, position, language)
    return best[2] if best is not None else "en"


def _invalid(message: str, code: str, field: str) -> ValidationFailed:
    return ValidationFailed(message, code=code, field=field)


def _choice(value: str | None, allowed: Sequence[str], field: str, default: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        shown = ", ".join(repr(a) for a in allowed)
        raise _invalid(f"{field} must be one of {shown}, got {value!r}", "INVALID_OPTION", field)
    return value


_TITLE_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _title(title: Any, where: str) -> str | None:
    """A renamed header: text of 1..100 characters, not blank, no control characters."""
    if title is None:
        return None
    if not isinstance(title, str):
        raise _invalid(f"{where}.title must be text", "INVALID_VALUE", where)
    if not 0 < len(title) <= 100 or not title.strip():
        raise _invalid(
            f"{where}.title must have 1..100 characters and not be blank", "INVALID_VALUE", where
        )
    if _TITLE_CONTROL.search(title):
        raise _invalid(
            f"{where}.title must not contain control characters (U+0000-U+001F, U+007F-U+009F)",
            "INVALID_VALUE",
            where,
        )
    return title


def _columns(
    raw: Sequence[Any] | None, declared: Sequence[Column] | None
) -> tuple[ColumnChoice, ...]:
    if raw is None:
        return ()
    if not raw:
        raise _invalid(
            "columns must name at least one column (leave it out for every column)",
            "INVALID_VALUE",
            "columns",
        )
    known = {c.key for c in declared} if declared is not None else None
    seen: set[str] = set()
    out: list[ColumnChoice] = []
    for i, item in enumerate(raw):
        where = f"columns[{i}]"
        if isinstance(item, str) and 0 < len(item) <= 64:
            key, title = item, None
        elif (
            isinstance(item, Mapping)
            and isinstance(item.get("key"), str)
            and 0 < len(item["key"]) <= 64
        ):
            key, title = item["key"], item.get("title")
            extra = set(item) - {"key", "title"}
            if extra:
                raise _invalid(
                    f"{where}: unknown field {sorted(extra)[0]!r} (a column is a key or "
                    '{"key", "title"})',
                    "UNKNOWN_FIELD",
                    where,
                )
            title = _title(title, where)
        else:
            raise _invalid(
                f'{where} must be a column key (1..64 characters) or {{"key": ..., "title": ...}}',
                "INVALID_VALUE",
                where,
            )
        if known is not None and key not in known:
            raise _invalid(
                f"unknown column {key!r}; the columns are {', '.join(sorted(known))}",
                "UNKNOWN_COLUMN",
                where,
            )
        if key in seen:
            raise _invalid(f"column {key!r} is chosen twice", "DUPLICATE_COLUMN", where)
        seen.add(key)
        out.append(ColumnChoice(key, title))
    return tuple(out)


def _split(raw: Mapping[str, Any] | None, *, row_cap: int, byte_cap: int | None) -> Split | None:
    if raw is None:
        return None
    rows, size = raw.get("maxRowsPerFile"), raw.get("maxBytesPerFile")
    if rows is None and size is None:
        raise _invalid(
            "options.split needs maxRowsPerFile or maxBytesPerFile",
            "INVALID_SPLIT",
            "options.split",
        )
    if rows is not None and (
        isinstance(rows, bool) or not isinstance(rows, int) or not 0 < rows <= row_cap
    ):
        raise _invalid(
            f"options.split.maxRowsPerFile must be 1..{row_cap} (this type's row cap), "
            f"got {rows!r}",
            "INVALID_SPLIT",
            "options.split.maxRowsPerFile",
        )
    top = byte_cap if byte_cap is not None else 2**62
    if size is not None and (
        isinstance(size, bool) or not isinstance(size, int) or not MIN_BYTES_PER_FILE <= size <= top
    ):
        raise _invalid(
            f"options.split.maxBytesPerFile must be {MIN_BYTES_PER_FILE}..{top} bytes "
            f"(the file size cap), got {size!r}",
            "INVALID_SPLIT",
            "options.split.maxBytesPerFile",
        )
    return Split(rows, size)


def parse_file_spec(
    file_format: FormatTraits,
    columns: Sequence[Any] | None,
    options: Mapping[str, Any] | None,
    *,
    declared: Sequence[Column] | None,
    default_language: str = "en",
    row_cap: int,
    byte_cap: int | None,
    formats: Sequence[FormatTraits],
) -> FileSpec:
    """Check a create request's ``columns`` and ``options`` and build its :class:`FileSpec`.

    Args:
        file_format: the format's entry of the format table.
        columns: the body's ``columns`` (keys or ``{"key", "title"}``), None for all.
        options: the body's ``options`` as a mapping with the API's names (absent
            options are None or missing), None for the defaults.
        declared: the type's declared columns, or None when they are not known (the
            keys are then checked by the attempt against the provider's columns).
        default_language: the language when ``options.language`` is absent (from the
            request's locale, :func:`language_of_locale`).
        row_cap: the type's row cap (``max_rows``), the top of ``maxRowsPerFile``.
        byte_cap: the file size cap in bytes, the top of ``maxBytesPerFile``.
        formats: every format of the table (named in the messages of a refused option).

    Returns:
        The spec; defaults fill what the request leaves out.

    Raises:
        ValidationFailed: ``UNKNOWN_COLUMN``, ``DUPLICATE_COLUMN``, ``INVALID_OPTION``
            (a value outside its enum), ``OPTION_NOT_SUPPORTED`` (a CSV option with
            another format, gzip with XLSX or Parquet), ``INVALID_SPLIT``; each names
            its field.
    """
    opts = dict(options or {})
    chosen = _columns(columns, declared)
    language = _choice(opts.get("language"), LANGUAGES, "options.language", default_language)
    fmt = file_format.name
    if not file_format.csv_options:
        for name in ("encoding", "delimiter", "header", "lineEnding"):
            if opts.get(name) is not None:
                raise _invalid(
                    f"options.{name} applies to {_names(formats, 'csv_options')} files "
                    f"only, not {fmt}; leave it out",
                    "OPTION_NOT_SUPPORTED",
                    f"options.{name}",
                )
    header = opts.get("header")
    if header is not None and not isinstance(header, bool):
        raise _invalid("options.header must be true or false", "INVALID_OPTION", "options.header")
    csv = CsvOptions(
        encoding=_choice(opts.get("encoding"), ENCODINGS, "options.encoding", "utf-8-bom"),
        delimiter=_choice(opts.get("delimiter"), DELIMITERS, "options.delimiter", ","),
        header=True if header is None else header,
        line_ending=_choice(opts.get("lineEnding"), LINE_ENDINGS, "options.lineEnding", "crlf"),
    )
    compression = _choice(opts.get("compression"), COMPRESSIONS, "options.compression", "none")
    if compression == "gzip" and not file_format.gzip:
        raise _invalid(
            f"gzip applies to {_names(formats, 'gzip')}; a {fmt} file is compressed already "
            "(use zip to get an archive)",
            "OPTION_NOT_SUPPORTED",
            "options.compression",
        )
    split = _split(opts.get("split"), row_cap=row_cap, byte_cap=byte_cap)
    if split is not None and compression == "gzip":
        raise _invalid(
            "a split export is delivered as one ZIP of its parts; leave out gzip",
            "OPTION_NOT_SUPPORTED",
            "options.compression",
        )
    return FileSpec(chosen, language, csv, compression, split)
