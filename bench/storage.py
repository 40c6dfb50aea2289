"""Storage dimension: the full ORDERS export stored in S3 against the same export
stored in a local directory, in one bench run.

Each export is one ``bench.e2e_run`` subprocess (the embedded worker: API, outbox,
consumer and the ORDERS provider in one process), so the two runs differ only in the
storage: ``--s3-endpoint``/``--s3-bucket`` (a streaming multipart upload while the file
renders, a presigned GET for the download) or the local directory (a ``.part`` file
renamed at commit, the download served by the API). Runs go round by round and the
order of local and S3 alternates per round, so a busy minute on the shared machine
does not fall on one side only; the fastest run of each kind is kept.

S3 server: ``EXPORT_CENTER_BENCH_S3_ENDPOINT`` (keys from ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``), else the ``scripts/s3proxy.sh`` server when it answers
(its test keys), else the part is skipped with a note. The bucket
``export-center-bench`` is created when missing; each run deletes its file.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.e2e import ROOT, e2e_subprocess, fastest, prepare_sample
from bench.procs import CpuMeter, pids_matching

__all__ = ["BUCKET", "S3Server", "run_storage", "s3_server"]

BUCKET = "export-center-bench"
"""The bench's bucket on the S3 server."""

_SCRIPT = ROOT / "scripts" / "s3proxy.sh"


@dataclass(frozen=True, slots=True)
class S3Server:
    """Where the bench stores: endpoint URL, keys, and the S3Proxy process ids (empty
    for a server the bench did not find through ``scripts/s3proxy.sh``)."""

    endpoint: str
    access_key: str
    secret_key: str
    source: str
    pids: tuple[int, ...] = ()

    @property
    def env(self) -> dict[str, str]:
        """The variables that hand the keys to boto3's default chain."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(_SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False
    )


def s3_server() -> tuple[S3Server | None, str]:
    """The S3 server to use and where it came from (or None and why not).

    The bench bucket is created on it (``scripts/s3proxy.sh bucket`` for the script's
    server, boto3 otherwise).
    """
    endpoint = os.environ.get("EXPORT_CENTER_BENCH_S3_ENDPOINT")
    if endpoint:
        key = os.environ.get("AWS_ACCESS_KEY_ID", "")
        secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
        server = S3Server(endpoint, key, secret, "EXPORT_CENTER_BENCH_S3_ENDPOINT")
        try:
            import boto3
            from botocore.exceptions import ClientError

            client = boto3.client(
                "s3",
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id=key,
                aws_secret_access_key=secret,
            )
            try:
                client.head_bucket(Bucket=BUCKET)
            except ClientError:
                client.create_bucket(Bucket=BUCKET)
        except Exception as exc:  # noqa: BLE001 - any failure means: skip with a note
            return None, f"S3 at {endpoint} unusable: {type(exc).__name__}: {exc}"
        return server, server.source
    if not _SCRIPT.exists() or _script("status").returncode != 0:
        return (
            None,
            "no EXPORT_CENTER_BENCH_S3_ENDPOINT and the scripts/s3proxy.sh server is not running",
        )
    made = _script("bucket", BUCKET)
    if made.returncode != 0:
        return None, f"scripts/s3proxy.sh bucket {BUCKET} failed: {made.stderr.strip()[-300:]}"
    state = Path(os.environ.get("EXPORT_CENTER_S3PROXY_DIR", "/tmp/export-center-s3proxy"))
    server = S3Server(
        _script("url").stdout.strip(),
        _script("access-key").stdout.strip(),
        _script("secret-key").stdout.strip(),
        "scripts/s3proxy.sh",
        tuple(pids_matching("s3proxy", str(state / "s3proxy.conf"))),
    )
    return server, server.source


def run_storage(
    *,
    data_dir: Path,
    database: str,
    database_url: str | None,
    scale: float,
    server: S3Server,
    formats: tuple[str, ...] = ("csv", "xlsx"),
    repeat: int = 1,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Export the whole sample of ``scale`` to the local directory and to S3, per format.

    Args:
        data_dir: the bench data directory (the sample is shared with the e2e part).
        database: ``sqlite`` or ``mariadb`` (a label; the URL decides).
        database_url: None for the embedded SQLite file.
        scale: TPC-H scale factor (0.27: 405,000 orders).
        server: the S3 server (:func:`s3_server`).
        repeat: rounds; the fastest run of each (format, storage) is kept.

    Returns:
        ``{"database", "endpoint", "<format>": {"local": result, "s3": result,
        "ratio", "ratioWithDownload"}}``: ``ratio`` is S3 over local of the export's
        time (create -> succeeded, ``taskSeconds``), ``ratioWithDownload`` of the time
        until the file is downloaded (``seconds``). Each result has the keys of
        ``bench.e2e_run`` plus ``loadAverage``, ``runs`` (``taskSeconds`` of every run;
        the fastest run is kept) and, for S3, ``s3ProxyCpuSeconds`` (the S3 server's
        CPU during that run, when known).
    """
    common = prepare_sample(
        data_dir=data_dir, database=database, database_url=database_url, scale=scale, say=say
    )
    s3_args = ["--s3-endpoint", server.endpoint, "--s3-bucket", BUCKET]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for round_no in range(max(1, repeat)):
        for fmt in formats:
            kinds = ("local", "s3") if round_no % 2 == 0 else ("s3", "local")
            for kind in kinds:
                load = os.getloadavg()[0]
                meter = CpuMeter({"s3proxy": server.pids})
                meter.start()
                result = e2e_subprocess(
                    [*common, "--format", fmt, *(s3_args if kind == "s3" else [])],
                    timeout=3600,
                    env=server.env,
                )
                if kind == "s3" and server.pids:
                    result["s3ProxyCpuSeconds"] = meter.stop()["s3proxy"]
                result["loadAverage"] = round(load, 2)
                runs.setdefault((fmt, kind), []).append(result)
                say(
                    f"  {database} {fmt:4s} {kind:5s} {result['rows']:>9,} rows "
                    f"{result['taskSeconds']:6.2f} s to succeeded, "
                    f"{result['seconds']:6.2f} s downloaded  "
                    f"peak RSS {result['peakRssMb']:.0f} MB  (load {load:.2f})"
                )
    out: dict[str, Any] = {"database": database, "endpoint": server.endpoint}
    for (fmt, kind), done in runs.items():
        out.setdefault(fmt, {})[kind] = fastest(done, "taskSeconds")
    for fmt in formats:
        s3, local = out[fmt]["s3"], out[fmt]["local"]
        out[fmt]["ratio"] = round(s3["taskSeconds"] / local["taskSeconds"], 3)
        out[fmt]["ratioWithDownload"] = round(s3["seconds"] / local["seconds"], 3)
    return out
