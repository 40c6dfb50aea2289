"""What other users of the host may read: nothing of the data directory.

The data directory holds every tenant's files, the database and the secrets: the
directories the export center makes there are 0700, its files 0600, whatever the umask.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from export_center.storage.keys import new_object_key, part_key
from export_center.storage.local import LocalStorage
from tests.support.helpers import create, wait_state


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_and_folders_of_the_data_directory_are_the_owners_only(make_stack, tmp_path):
    old = os.umask(0o022)  # the usual umask: 0644 files, 0755 directories
    try:
        stack = make_stack()
        client = stack.client()
        detail = wait_state(client, create(client, "csv").json()["taskId"])
        assert detail["state"] == "succeeded"
        data = stack.settings.data_dir
        assert _mode(data) == 0o700
        files = [p for p in (data / "files" / "exports").rglob("*") if p.is_file()]
        assert files and all(_mode(p) == 0o600 for p in files), [oct(_mode(p)) for p in files]
        folders = [data / "files", *(p for p in (data / "files").rglob("*") if p.is_dir())]
        assert all(_mode(p) == 0o700 for p in folders), [(p, oct(_mode(p))) for p in folders]
        for secret in data.glob("*.txt"):
            assert _mode(secret) == 0o600, secret
        storage = LocalStorage(tmp_path / "store")
        task_no = detail["taskId"]
        storage.put_part(part_key(task_no, 0, 0, 1), b"segment")
        key = new_object_key(task_no, "csv", tenant="t1")
        with storage.open_write(key, content_type="text/csv", content_disposition="") as fh:
            fh.write(b"a,b\n")
        storage.commit(key)
        made = [p for p in (tmp_path / "store").rglob("*")]
        assert all(_mode(p) == (0o700 if p.is_dir() else 0o600) for p in made), [
            (p.name, oct(_mode(p))) for p in made
        ]
    finally:
        os.umask(old)
