"""One suite, every storage adapter: the same cases run against :class:`LocalStorage`
(a fresh directory) and :class:`S3Storage` (a fresh bucket on the S3Proxy test server),
so what the port promises holds whatever the store.

Each case says what the port promises: a file is visible only once committed and gone
once deleted, with no temporary object left behind; keys the server did not make are
refused by every method; shard segments are stored whole, read back in bounded chunks,
replaced by a retried write and deleted per task; ``space()`` answers where the store
has a size; every download answer yields the file and its byte ranges. Each adapter
also says what it physically holds (files with their ``.part`` / ``.tmp`` names, or
objects and unfinished multipart uploads), so a leftover cannot hide behind the port.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from export_center.errors import StorageError
from export_center.filenames import content_disposition
from export_center.settings import S3Settings
from export_center.storage.base import (
    DownloadAnswer,
    LocalFile,
    Proxied,
    Redirect,
    Space,
    Storage,
)
from export_center.storage.keys import new_object_key, part_key
from export_center.storage.local import LocalStorage
from tests.support.s3 import contents, storage_settings

pytestmark = pytest.mark.timeout(300)

MB = 1024 * 1024
TASK = "exp_01JA2B3C4D5E6F7G8H9J0KMNPQ"
OTHER = "exp_01JA2B3C4D5E6F7G8H9J0KMNPR"
CSV = "text/csv; charset=utf-8"
LOCAL = "local"
S3 = pytest.param("s3", marks=pytest.mark.s3)
S3_PROXY = pytest.param("s3-proxy", marks=pytest.mark.s3)


@dataclass
class Adapter:
    """One storage adapter under test.

    Attributes:
        storage: the adapter.
        stored: every name the store physically holds, temporaries included (local
            file paths under the root; S3 object keys, and ``<key> (upload)`` for each
            unfinished multipart upload), sorted.
        bounded: whether the store has a fixed size (``space()`` answers).
        answer: the class of its download answers.
    """

    storage: Storage
    stored: Callable[[], list[str]]
    bounded: bool
    answer: type


def _local(root: Path) -> Adapter:
    storage = LocalStorage(root)

    def stored() -> list[str]:
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())

    return Adapter(storage, stored, bounded=True, answer=LocalFile)


def _s3(request: pytest.FixtureRequest, download: str) -> Adapter:
    endpoint: str = request.getfixturevalue("s3_endpoint")
    client: Any = request.getfixturevalue("s3")
    bucket: str = request.getfixturevalue("bucket")
    settings = storage_settings(endpoint, bucket, part_size_mb=5, download=download)["s3"]
    from export_center.storage.s3 import S3Storage

    storage = S3Storage(S3Settings.model_validate(settings))

    def stored() -> list[str]:
        found = contents(client, bucket)
        return sorted([*found.objects, *(f"{key} (upload)" for key in found.uploads)])

    answer = Redirect if download == "redirect" else Proxied
    return Adapter(storage, stored, bounded=False, answer=answer)


@pytest.fixture(params=[LOCAL, S3])
def adapter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Adapter]:
    """Each storage adapter in turn, on an empty store."""
    if request.param == LOCAL:
        yield _local(tmp_path / "store")
    else:
        yield _s3(request, "proxy" if request.param == "s3-proxy" else "redirect")


def key(ext: str = "csv") -> str:
    return new_object_key(TASK, ext, tenant="t1")


def rows(total: int) -> bytes:
    """``total`` bytes of numbered CSV lines."""
    return b"".join(b"%09d,row\r\n" % i for i in range(total // 14 + 1))[:total]


def write(storage: Storage, name: str, data: bytes) -> None:
    """Write ``data`` to the temporary object of ``name`` in 64 KiB writes (no commit)."""
    stream = storage.open_write(
        name, content_type=CSV, content_disposition=content_disposition("a.csv")
    )
    for start in range(0, len(data), 64 * 1024):
        stream.write(data[start : start + 64 * 1024])
    stream.close()


def read_range(answer: DownloadAnswer, first: int, last: int) -> bytes:
    """The bytes ``first..last`` (inclusive) as a client of the answer gets them."""
    if isinstance(answer, LocalFile):
        return answer.path.read_bytes()[first : last + 1]
    if isinstance(answer, Redirect):
        got = httpx.get(answer.url, headers={"Range": f"bytes={first}-{last}"})
        assert got.status_code == 206, got.status_code
        return got.content
    return b"".join(answer.read(first, last))


# ---------------------------------------------------------------------- files


def test_a_file_is_visible_only_once_committed_and_gone_once_deleted(adapter: Adapter) -> None:
    storage, name, data = adapter.storage, key(), rows(6 * MB)
    stream = storage.open_write(name, content_type=CSV, content_disposition="x")
    for start in range(0, len(data), 64 * 1024):
        stream.write(data[start : start + 64 * 1024])
    # Mid-way (more than one S3 part sent): only a temporary object exists.
    assert not storage.exists(name)
    assert [(o.key, o.temporary) for o in storage.list()] == [(name, True)]
    stream.close()
    assert storage.commit(name) == len(data)
    assert storage.exists(name) and storage.size(name) == len(data)
    listed = list(storage.list())
    assert [(o.key, o.size, o.temporary) for o in listed] == [(name, len(data), False)]
    assert all(o.modified_at.tzinfo is not None for o in listed)
    assert adapter.stored() == [name]  # no temporary object left behind
    answer = storage.download(name, file_name="a.csv", content_type=CSV, seconds=60)
    assert read_range(answer, 0, len(data) - 1) == data
    storage.delete(name)
    assert not storage.exists(name)
    assert list(storage.list()) == [] and adapter.stored() == []
    storage.delete(name)  # idempotent: nothing left to delete


@pytest.mark.parametrize("size", [10, 6 * MB], ids=["below-one-part", "several-parts"])
def test_a_file_deleted_before_its_commit_leaves_nothing(adapter: Adapter, size: int) -> None:
    storage, name = adapter.storage, key()
    write(storage, name, rows(size))
    storage.delete(name)  # the failure path of an attempt
    assert list(storage.list()) == [] and adapter.stored() == []
    with pytest.raises(StorageError):
        storage.commit(name)
    assert adapter.stored() == []


def test_a_commit_of_a_file_never_opened_is_a_storage_error(adapter: Adapter) -> None:
    with pytest.raises(StorageError):
        adapter.storage.commit(key())
    assert adapter.stored() == []


def test_two_files_of_one_task_are_kept_apart(adapter: Adapter) -> None:
    storage, first, second = adapter.storage, key(), key("xlsx")
    write(storage, first, b"first")
    write(storage, second, b"second file")
    assert storage.commit(first) == 5 and storage.commit(second) == 11
    storage.delete(first)
    assert adapter.stored() == [second] and storage.size(second) == 11


# ---------------------------------------------------------------------- refused keys


@pytest.mark.parametrize(
    "bad",
    [
        "exports/../secret.csv",
        "elsewhere/t1/2026/01/exp_01JA2B3C4D5E6F7G8H9J0KMNPQ/0123456789abcdef0123456789abcdef.csv",
        "exports/t1/2026/01/exp_01JA2B3C4D5E6F7G8H9J0KMNPQ/name.csv",
        "exports/a/b/2026/01/exp_01JA2B3C4D5E6F7G8H9J0KMNPQ/0123456789abcdef0123456789abcdef.csv",
    ],
)
def test_keys_not_made_by_the_server_are_refused(adapter: Adapter, bad: str) -> None:
    storage = adapter.storage
    with pytest.raises(StorageError, match="not made by this server"):
        storage.open_write(bad, content_type=CSV, content_disposition="x")
    with pytest.raises(StorageError, match="not made by this server"):
        storage.delete(bad)
    with pytest.raises(StorageError, match="not made by this server"):
        storage.commit(bad)
    with pytest.raises(StorageError, match="not made by this server"):
        storage.exists(bad)
    with pytest.raises(StorageError, match="not made by this server"):
        storage.size(bad)
    with pytest.raises(StorageError, match="not made by this server"):
        storage.download(bad, file_name="a.csv", content_type=CSV, seconds=60)
    assert adapter.stored() == []


@pytest.mark.parametrize(
    "bad",
    [
        "parts/../x",
        f"parts/{TASK}/00000/000000",
        f"parts/{TASK}/0/0.v1",
        "exports/a.csv",
        "exports/x.csv",
        f"parts/{TASK}/00000/000000.v1/../x",
    ],
)
def test_part_keys_not_made_by_the_server_are_refused(adapter: Adapter, bad: str) -> None:
    storage = adapter.storage
    with pytest.raises(StorageError, match="refused part key"):
        storage.put_part(bad, b"x")
    with pytest.raises(StorageError, match="refused part key"):
        storage.read_part(bad)
    with pytest.raises(StorageError, match="refused task number"):
        storage.delete_parts("../" + TASK)
    assert adapter.stored() == []


# ---------------------------------------------------------------------- shard segments


def test_segments_round_trip_and_are_deleted_per_task(adapter: Adapter) -> None:
    storage = adapter.storage
    big = bytes(range(256)) * 20_000  # 5 MB: several read chunks
    first, second = part_key(TASK, 0, 0, 1), part_key(TASK, 3, 12, 2)
    kept = part_key(OTHER, 0, 0, 1)
    storage.put_part(first, big)
    storage.put_part(second, b"second")
    storage.put_part(kept, b"kept")
    assert b"".join(storage.read_part(first)) == big
    assert max(len(c) for c in storage.read_part(first)) <= 1 << 20
    storage.put_part(second, b"again")  # a retried write replaces the segment
    assert b"".join(storage.read_part(second)) == b"again"
    assert adapter.stored() == sorted([first, second, kept])  # no temporary left behind
    listed = sorted(o.key for o in storage.list("parts/"))
    assert listed == sorted([first, second, kept])
    assert storage.delete_parts(TASK) == 2
    assert [o.key for o in storage.list("parts/")] == [kept]
    assert adapter.stored() == [kept]
    with pytest.raises(StorageError, match="cannot read"):
        list(storage.read_part(first))
    assert storage.delete_parts(TASK) == 0  # nothing left: no error


def test_segments_do_not_show_among_the_files(adapter: Adapter) -> None:
    storage = adapter.storage
    storage.put_part(part_key(TASK, 0, 0, 1), b"rows")
    assert list(storage.list()) == []  # the orphan scan of exports/ never sees a part


def test_the_folders_of_deleted_parts_go_with_them(tmp_path: Path) -> None:
    """Local only: a directory store also removes the task's part folders."""
    storage = LocalStorage(tmp_path)
    storage.put_part(part_key(TASK, 0, 0, 1), b"segment")
    storage.put_part(part_key(TASK, 3, 12, 2), b"tail")
    assert storage.delete_parts(TASK) == 2
    assert not (tmp_path / "parts" / TASK).exists()


# ---------------------------------------------------------------------- space, downloads


def test_space_is_answered_where_the_store_has_a_size(adapter: Adapter) -> None:
    space = adapter.storage.space()
    if adapter.bounded:
        assert isinstance(space, Space)
        assert 0 <= space.free_bytes <= space.total_bytes and space.total_bytes > 0
    else:
        assert space is None


@pytest.mark.parametrize("adapter", [LOCAL, S3, S3_PROXY], indirect=True)
def test_every_download_answer_yields_the_file_and_its_ranges(adapter: Adapter) -> None:
    storage, name = adapter.storage, key()
    data = bytes(range(256)) * 4096  # 1 MiB
    write(storage, name, data)
    storage.commit(name)
    answer = storage.download(name, file_name="九月 订单.csv", content_type=CSV, seconds=60)
    assert isinstance(answer, adapter.answer)
    assert read_range(answer, 0, len(data) - 1) == data
    assert read_range(answer, 10, 19) == data[10:20]
    assert read_range(answer, len(data) - 3, len(data) - 1) == data[-3:]
