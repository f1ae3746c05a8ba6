"""Who holds a lease: a name that lets a process on the same machine tell that its holder is dead.

A holder is ``host:pid:random:machine:start``. ``machine`` names the kernel boot and the PID namespace
(two containers on one host, or one host after a reboot, differ) and ``start`` the process's start time
(a reused pid differs), both read from ``/proc``. Where there is no ``/proc`` both are empty and no
holder is ever judged dead: its lease blocks until it expires, as before.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket
import uuid
from pathlib import Path

__all__ = ["dead_here", "process_holder"]

_PROC = Path("/proc")


@functools.cache
def _machine() -> str:
    """The kernel boot and PID namespace this process runs in, hashed; "" without ``/proc``."""
    try:
        boot = (_PROC / "sys/kernel/random/boot_id").read_text().strip()
        namespace = os.stat(_PROC / "self/ns/pid").st_ino
    except OSError:
        return ""
    return hashlib.sha256(f"{boot}/{namespace}".encode()).hexdigest()[:16]


def _started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), "" for a zombie, None when there is none."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after the command name, which may hold spaces
    return "" if fields[0] in ("Z", "X") else fields[19]  # state, then field 22 of proc(5) is the start time


def process_holder() -> str:
    """A holder name for this process (a random part: two systems in one process differ)."""
    pid = os.getpid()
    start = (_started(pid) or "") if _machine() else ""
    return f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}:{_machine()}:{start}"


def dead_here(holder: str) -> bool:
    """Whether ``holder`` is a process of this machine that is gone (or another process has its pid now).

    False whenever that cannot be known: another machine, a holder named otherwise, no ``/proc``.
    """
    parts = holder.split(":")
    if len(parts) != 5 or not parts[3] or not parts[4] or not parts[1].isdigit():
        return False
    host, pid, _, machine, start = parts
    if host != socket.gethostname() or machine != _machine():
        return False
    return _started(int(pid)) != start
