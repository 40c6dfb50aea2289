"""A private MariaDB server a test may stop and start (a real outage of the database).

It is ``scripts/mariadb.sh`` with its own state directory and port, so stopping it never
disturbs the shared test server. Start-up takes 1-2 s once its data directory exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from export_center.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mariadb.sh"


class PrivateMariaDB:
    """A MariaDB server on 127.0.0.1 and a free port, state under a fresh directory.

    Its database ``export_center_test`` and user ``export_center`` exist after
    :meth:`start` (the script's defaults).
    """

    def __init__(self) -> None:
        # Short: the server's socket path must fit in 107 bytes.
        self.base = Path(tempfile.mkdtemp(prefix="ecm-", dir="/tmp"))
        self.port = free_port()
        self._env = {
            **os.environ,
            "EXPORT_CENTER_MARIADB_DIR": str(self.base),
            "EXPORT_CENTER_MARIADB_PORT": str(self.port),
        }

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of its ``export_center_test`` database."""
        return (
            f"mysql+pymysql://export_center:export_center@127.0.0.1:{self.port}"
            "/export_center_test?charset=utf8mb4"
        )

    def _run(self, command: str) -> None:
        done = subprocess.run(
            ["bash", str(SCRIPT), command],
            env=self._env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"mariadb.sh {command} failed: {done.stderr[-2000:]}")

    def start(self) -> None:
        """Start the server (initializing its data directory the first time)."""
        self._run("start")

    def stop(self) -> None:
        """Stop the server and wait until it is gone (clients get "connection refused")."""
        self._run("stop")

    def close(self) -> None:
        """Stop the server and remove its state."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
