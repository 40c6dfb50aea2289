"""Answer bodies read within their cap, inflated piece by piece
(export_center.provider_body). The same answers over real HTTP, bombs and the peak
memory of the caller included, are in tests/integration/test_provider_answers.py."""

from __future__ import annotations

import gzip
import random
import zlib
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from export_center.errors import ProviderContractError
from export_center.provider_body import INFLATE_STEP, _Inflater, content_coding, read_body


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def nothing() -> None:
    return None


@pytest.mark.parametrize(
    ("header", "coding"),
    [
        (None, None),
        ("", None),
        ("identity", None),
        ("Identity", None),
        ("gzip", "gzip"),
        (" GZIP ", "gzip"),
        ("x-gzip", "gzip"),
        ("deflate", "deflate"),
        ("gzip, identity", "gzip"),  # identity changes nothing: one coding
    ],
)
def test_the_encodings_read(header: str | None, coding: str | None) -> None:
    assert content_coding(header) == coding


@pytest.mark.parametrize(
    ("header", "detail"),
    [
        ("br", "the answer's Content-Encoding 'br' is not one the request accepts"),
        ("zstd", "the answer's Content-Encoding 'zstd' is not one the request accepts"),
        ("gzip, gzip", "the answer's Content-Encoding 'gzip, gzip' stacks 2 encodings"),
        ("deflate,gzip,gzip", "the answer's Content-Encoding 'deflate,gzip,gzip' stacks 3"),
        ("\x1b[31m" + "x" * 100, "the answer's Content-Encoding '?[31m" + "x" * 75 + "...' is"),
    ],
)
def test_other_and_stacked_encodings_are_refused_naming_them(header: str, detail: str) -> None:
    with pytest.raises(ProviderContractError) as caught:
        content_coding(header)
    assert caught.value.message.startswith(f"provider broke the contract: {detail}")
    assert "Accept-Encoding: gzip, deflate" in caught.value.message


@settings(max_examples=60, deadline=None)
@given(
    body=st.binary(max_size=3000),
    size=st.integers(min_value=1, max_value=400),
    coding=st.sampled_from(["gzip", "deflate", None]),
)
def test_any_body_in_any_chunks_reads_back_exactly(
    body: bytes, size: int, coding: str | None
) -> None:
    packed = {"gzip": gzip.compress, "deflate": zlib.compress, None: bytes}[coding](body)
    read = read_body(chunks(packed, size), coding, 10_000, nothing)
    assert (read.data, read.complete, read.coding) == (body, True, coding)


@settings(max_examples=40, deadline=None)
@given(
    body=st.binary(min_size=1, max_size=3000),
    cap=st.integers(min_value=0, max_value=3000),
    coding=st.sampled_from(["gzip", None]),
)
def test_past_the_cap_only_the_start_is_kept_when_asked(
    body: bytes, cap: int, coding: str | None
) -> None:
    packed = gzip.compress(body) if coding else body
    kept = read_body(chunks(packed, 50), coding, cap, nothing, keep_start=True)
    dropped = read_body(chunks(packed, 50), coding, cap, nothing)
    whole = len(body) <= cap and len(packed) <= cap
    assert kept.complete is dropped.complete is whole
    if whole:
        assert kept.data == dropped.data == body
    else:
        assert body.startswith(kept.data) and len(kept.data) <= cap
        assert dropped.data == b""


def test_inflating_gives_pieces_of_at_most_one_step() -> None:
    # 10 MB of zeros in one chunk of 10 KB: never more than 64 KB out at a time, and
    # the output left inside zlib when a step ends exactly with the input is not lost.
    for megabytes in (10, 2 * INFLATE_STEP / 2**20):
        size = int(megabytes * 2**20)
        inflater = _Inflater("gzip")
        pieces = list(inflater.pieces(gzip.compress(bytes(size))))
        inflater.finish()
        assert max(map(len, pieces)) == INFLATE_STEP
        assert sum(map(len, pieces)) == size


def test_a_bomb_stops_at_the_cap_after_one_chunk() -> None:
    bomb = gzip.compress(bytes(64 * 2**20))
    calls = []
    read = read_body(chunks(bomb, 65536), "gzip", 4 * 2**20, lambda: calls.append(1))
    assert (read.complete, read.data) == (False, b"")
    assert len(calls) == 1  # the first received chunk already inflates past 4 MB


def test_more_than_the_cap_as_sent_stops_even_if_it_would_inflate_smaller() -> None:
    noise = random.Random(7).randbytes(5000)  # gzip makes it a little larger
    read = read_body(chunks(gzip.compress(noise), 512), "gzip", 5000, nothing)
    assert not read.complete
    # Empty gzip members: bytes sent that inflate to nothing are counted too.
    empties = gzip.compress(b"") * 300
    assert not read_body(chunks(empties, 512), "gzip", 5000, nothing).complete


def test_raw_deflate_and_several_gzip_members_are_one_body() -> None:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    raw = packer.compress(b"abc" * 1000) + packer.flush()
    assert read_body(chunks(raw, 7), "deflate", 10_000, nothing).data == b"abc" * 1000
    members = gzip.compress(b'{"rows":') + gzip.compress(b"[]}")
    assert read_body(chunks(members, 3), "gzip", 100, nothing).data == b'{"rows":[]}'


@pytest.mark.parametrize(
    ("coding", "packed", "message"),
    [
        (
            "gzip",
            gzip.compress(b"abc", mtime=0)[:-4],
            "the answer's gzip data ends before the end of its",
        ),
        ("deflate", zlib.compress(b"abc")[:-2], "the answer's deflate data ends before the end"),
        ("gzip", b"plain text", "the answer's gzip data cannot be inflated (Error -3"),
        (
            "gzip",
            gzip.compress(b"abc", mtime=0) + b"\0\0",
            "the answer's gzip data cannot be inflated",
        ),
        ("deflate", zlib.compress(b"abc") + b"\0", "the answer's deflate data has bytes after"),
    ],
)
def test_corrupt_compressed_data_breaks_the_contract(
    coding: str, packed: bytes, message: str
) -> None:
    with pytest.raises(ProviderContractError) as caught:
        read_body(chunks(packed, 2), coding, 1000, nothing)
    assert caught.value.message.startswith(f"provider broke the contract: {message}")


def test_the_check_runs_before_each_chunk_and_at_the_end() -> None:
    calls = []
    read_body(chunks(b"x" * 10, 3), None, 100, lambda: calls.append(1))
    assert len(calls) == 4 + 1
