"""Which version of a table this process reads: pinned per thread within a block, watched on local folders.

A table's version moves with every write, from any process; the cached vectors and words
(:mod:`tiermem.memory._index._vectors`) are keyed on it. Within one recall each table's version is read
from the engine once (:class:`PinnedVersions`): every read of a table in the recall then agrees on its
version, and another process's write is still seen by the next recall. A local table's version is not
read from the engine at all while its versions folder is unchanged (:class:`VersionWatch`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from lancedb.table import Table as EngineTable

from ._engine_errors import engine_errors
from ._tables import Tables

__all__ = ["PinnedVersions", "VersionWatch", "Versions"]

# How long ago a versions folder must have last changed for its state to stand for a version: a change
# within the filesystem's timestamp granularity (a clock tick; 2 s on FAT) of the one before could leave
# the folder's times as they were, so a folder changed more recently is read from the engine every time.
_SETTLED_NS = 3_000_000_000


class PinnedVersions:
    """Table versions read once per thread while pinned (one recall), else read every time."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Within the block, this thread reads each table's version from the engine once (nested: the outer pin)."""
        if getattr(self._local, "versions", None) is not None:
            yield
            return
        self._local.versions = {}
        try:
            yield
        finally:
            self._local.versions = None

    def read(self, name: str, current: Callable[[], int]) -> int:
        """The version of ``name``: pinned if this thread pinned it already, else ``current()`` (then pinned)."""
        versions: dict[str, int] | None = getattr(self._local, "versions", None)
        if versions is None:
            return current()
        if name not in versions:
            versions[name] = current()
        return versions[name]

    def refresh(self, name: str, current: Callable[[], int]) -> int:
        """The version of ``name`` read again from the engine (and pinned, when pinned)."""
        version = current()
        versions: dict[str, int] | None = getattr(self._local, "versions", None)
        if versions is not None:
            versions[name] = version
        return version


class VersionWatch:
    """A local table's version, read from the engine only when its ``_versions`` folder changed.

    Lance commits a version by adding its manifest to that folder, and cleaning up old versions removes
    some: either changes the folder's times. While they stay as they were when the engine was last asked,
    the version is the one it answered, and a recall skips the engine's read, a hop to LanceDB's event
    loop thread and back (0.3 ms, and scheduler ticks on a busy machine). Only for a store that checks
    for other processes' commits on every read (``read_consistency`` 0); no folder (a URI) reads every time.
    """

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[int, int, int], int]] = {}

    def read(self, folder: str | None, current: Callable[[], int]) -> int:
        """The table's version: the one seen last while ``folder`` is unchanged, else ``current()``."""
        if folder is None:
            return current()
        try:
            state = os.stat(folder)
        except OSError:
            return current()
        key = (state.st_ino, state.st_mtime_ns, state.st_ctime_ns)
        seen = self._seen.get(folder)
        if seen is not None and seen[0] == key:
            return seen[1]
        version = current()  # read after the folder's state: it holds at least every commit that state shows
        if time.time_ns() - max(state.st_mtime_ns, state.st_ctime_ns) > _SETTLED_NS:
            self._seen[folder] = (key, version)
        else:
            self._seen.pop(folder, None)
        return version


class Versions:
    """The versions of one store's tables as this process reads them."""

    def __init__(self, tables: Tables, read_consistency: timedelta | None) -> None:
        self._tables = tables
        self.pins = PinnedVersions()
        # Versions from the folders, not the engine, only where the engine would check on every read.
        self._watch = VersionWatch() if read_consistency == timedelta(0) else None
        self._folders: dict[str, tuple[EngineTable | None, str | None]] = {}

    def version(self, name: str) -> int:
        with engine_errors(f"read {name}"):
            return self.pins.read(name, lambda: self.engine_version(name))

    def engine_version(self, name: str) -> int:
        """The table's latest version: the engine's, unless its versions folder shows no commit since it last said."""
        table = self._tables.table(name)
        if self._watch is None:
            return int(table.version)
        return self._watch.read(self._versions_folder(name, table), lambda: int(table.version))

    def _versions_folder(self, name: str, table: EngineTable) -> str | None:
        """The local folder of ``table``'s versions; None for a URI or a read-only stand-in for a missing table."""
        if name not in self._tables.opened or self._tables.opened[name] is not table:
            return None
        opened, folder = self._folders.get(name, (None, None))
        if opened is not table:  # first asked, or opened again (reembed rewrites a table)
            uri = str(table.uri)  # type: ignore[attr-defined]  # LanceTable's, not declared by the Table base
            folder = None if "://" in uri else os.path.join(uri, "_versions")
            self._folders[name] = (table, folder)
        return folder
