"""CPU time and memory of processes, this one or others, read from ``/proc``.

The storage and cluster parts of the bench say where the time goes: how many
CPU-seconds each server (MariaDB, the broker, S3Proxy) and each export-center process
spent during a measured run, and how busy the machine was as a whole. Linux only; on
another system every figure is None.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CpuMeter",
    "cpu_seconds",
    "free_block",
    "peak_rss_mb",
    "pids_matching",
    "read_pid",
    "status_mb",
]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of process ``pid`` (all its threads) since it
    started, or None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, ValueError, IndexError):
        return None


def status_mb(field: str, pid: int | str = "self") -> float | None:
    """A memory line of ``/proc/<pid>/status`` in MiB, or None when it is unreadable.

    Args:
        field: the line's name: ``VmRSS`` (resident now), ``VmHWM`` (peak resident).
        pid: the process; ``"self"`` is this one.
    """
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak_rss_mb(pid: int) -> float | None:
    """Peak resident memory of process ``pid`` (``VmHWM``) in MiB, or None."""
    return status_mb("VmHWM", pid)


def pids_matching(*needles: str) -> list[int]:
    """Processes whose command line contains every one of ``needles``, this one
    excluded (a read-only scan of ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if command and all(needle in command for needle in needles):
            found.append(int(entry.name))
    return sorted(found)


def read_pid(path: Path) -> int | None:
    """The process id in a pid file, or None when the file is missing or empty."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _machine_busy_seconds() -> float | None:
    """CPU-seconds all CPUs of the machine spent busy (not idle, not waiting on I/O)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            values = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / _TICKS


@dataclass
class CpuMeter:
    """CPU-seconds per named group of processes over one measured interval.

    Args:
        groups: name -> process ids (a group's figure is the sum of its processes).
    """

    groups: Mapping[str, Iterable[int]]
    _start: dict[str, dict[int, float]] = field(default_factory=dict)
    _machine: float | None = None

    def start(self) -> None:
        """Take the starting figures."""
        self._start = {
            name: {pid: cpu for pid in pids if (cpu := cpu_seconds(pid)) is not None}
            for name, pids in self.groups.items()
        }
        self._machine = _machine_busy_seconds()

    def stop(self) -> dict[str, float | None]:
        """CPU-seconds of each group since :meth:`start` (None when no process of the
        group could be read), plus ``machine``: every CPU of the machine, other
        people's processes included."""
        out: dict[str, float | None] = {}
        for name, begun in self._start.items():
            spent = [
                cpu - before
                for pid, before in begun.items()
                if (cpu := cpu_seconds(pid)) is not None
            ]
            out[name] = round(sum(spent), 2) if spent else None
        machine = _machine_busy_seconds()
        if machine is not None and self._machine is not None:
            out["machine"] = round(machine - self._machine, 2)
        return out


def free_block(count: int) -> int:
    """The first of ``count`` consecutive loopback ports free right now."""
    import socket

    from export_center.embedded import free_port

    for _ in range(200):
        first = free_port()
        if first + count > 65536:
            continue
        probes: list[socket.socket] = []
        try:
            for port in range(first, first + count):
                probe = socket.socket()
                probes.append(probe)
                probe.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
    raise RuntimeError("no block of free ports")
