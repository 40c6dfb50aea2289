"""Download file names that every client can save (RFC 6266 / 8187, 150-byte names)."""

from __future__ import annotations

import unicodedata
from urllib.parse import unquote

import pytest
import regex

from export_center.filenames import MAX_NAME_BYTES, content_disposition, download_file_name


def graphemes(text: str) -> list[str]:
    return regex.findall(r"\X", text)


@pytest.mark.parametrize(
    ("task_name", "expected"),
    [
        ("九" * 100, "九" * 48 + ".csv"),  # 48 * 3 + 4 = 148 bytes (was 304)
        ("订单导出 9月", "订单导出 9月.csv"),
        ("../../etc/passwd", "_.._etc_passwd.csv"),
        ("..\\..\\x", "_.._x.csv"),
        ('a<b>c:d"e|f?g*h', "a_b_c_d_e_f_g_h.csv"),
        ("CON", "_CON.csv"),
        ("nul.txt", "_nul.txt.csv"),
        ("COM1", "_COM1.csv"),
        ("Lpt9", "_Lpt9.csv"),
        ("COM¹", "_COM¹.csv"),
        ("CONSOLE", "CONSOLE.csv"),
        ("report\u202egnp.exe", "reportgnp.exe.csv"),  # right-to-left override removed
        ("x\u200by\ufeffz", "xyz.csv"),
        ("a\tb\nc\r\nd", "a_b_c__d.csv"),
        ("  spaced   out  ", "spaced out.csv"),
        ("...hidden", "hidden.csv"),
        ("trailing dots...", "trailing dots.csv"),
        ("", "export.csv"),
        ("   ", "export.csv"),
        ("\u202e\u202d", "export.csv"),
        ("e\u0301t\u00e9", "\u00e9t\u00e9.csv"),  # NFC: one code point per letter
        ("line\u2028break", "linebreak.csv"),
        ("100% %41 done", "100\uff05 \uff0541 done.csv"),  # wget decodes filename* twice
    ],
)
def test_names(task_name, expected):
    assert download_file_name(task_name, "csv") == expected


@pytest.mark.parametrize(
    "task_name",
    [
        "九" * 100,
        "👨\u200d👩\u200d👧\u200d👦" * 30,  # ZWJ sequences: 25 bytes per family
        "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f" * 20,  # flag tags
        "e\u0301\u0302" * 200,  # base letters with two combining marks
        "a" * 300,
        "안녕하세요" * 40,
        "ا\u200cب" * 200,  # Persian with ZWNJ
    ],
)
@pytest.mark.parametrize("extension", ["csv", "xlsx"])
def test_long_names_are_cut_between_graphemes_to_max_name_bytes(task_name, extension):
    name = download_file_name(task_name, extension)
    assert len(name.encode("utf-8")) <= MAX_NAME_BYTES
    assert name.endswith(f".{extension}")
    base = name.removesuffix(f".{extension}")
    cleaned = unicodedata.normalize("NFC", task_name)
    # A prefix of whole grapheme clusters of the cleaned name: nothing cut inside.
    clusters = graphemes(base)
    assert clusters == graphemes(cleaned)[: len(clusters)]
    # And as long as possible: one more cluster would not fit.
    following = graphemes(cleaned)[len(clusters)]
    assert len((base + following + "." + extension).encode("utf-8")) > MAX_NAME_BYTES


def test_content_disposition_carries_the_exact_name_and_an_ascii_fallback():
    name = download_file_name('九月订单 / 华东; 50% "final"', "xlsx")
    header = content_disposition(name)
    assert header.startswith('attachment; filename="')
    plain = header.split('filename="')[1].split('"')[0]
    assert plain.isascii() and not set(plain) & set('"\\%;/')
    assert plain == "_ _ __ 50_ _final_.xlsx"
    assert unquote(header.split("filename*=UTF-8''")[1]) == name
    assert header.encode("latin-1")  # every header byte is ASCII
    assert 'filename="export.csv"' in content_disposition(download_file_name("九月", "csv"))
    assert 'filename="_CON.csv"' in content_disposition(download_file_name("CON", "csv"))
