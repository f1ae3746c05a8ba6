"""Stores written once per test session and copied for each user of them.

Under pytest-xdist every worker builds a module- or session-scoped fixture for itself, so an expensive
store (thousands of embedded memories) would be written once per worker. :func:`prebuilt` writes it
once for the whole session, whichever worker asks first (the others wait on a file lock), and hands
each caller its own copy: no two processes, and no two fixtures, ever share a folder.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def _shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this session that every xdist worker sees (its own base temp without xdist)."""
    base = tmp_path_factory.getbasetemp()
    # under xdist the workers' base temps are popen-gw0, popen-gw1, ... in one per-session folder
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def prebuilt(tmp_path_factory: pytest.TempPathFactory, name: str, write: Callable[[Path], None]) -> Path:
    """A copy, in a new temporary folder, of the store ``write(folder)`` writes once per session."""
    root = _shared_root(tmp_path_factory) / "prebuilt"
    root.mkdir(exist_ok=True)
    template, done = root / name, root / f"{name}.done"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if write() raises
        if not done.exists():
            shutil.rmtree(template, ignore_errors=True)  # a previous attempt that failed half-way
            write(template)
            done.touch()
    copy = tmp_path_factory.mktemp(name) / "store"
    shutil.copytree(template, copy)
    return copy
