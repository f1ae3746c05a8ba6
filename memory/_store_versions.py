"""Which version of a table this process reads: pinned per thread within a block, watched on local folders.

A table's version moves with every write, from any process; the cached vectors and words
(:mod:`._vectors`) are keyed on it. See :mod:`._cached_search` for :class:`PinnedVersions` and
:class:`VersionWatch`.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from ._cached_search import PinnedVersions, VersionWatch
from ._store_errors import engine_errors
from ._store_tables import Tables

__all__ = ["Versions"]


class Versions:
    """The versions of one store's tables as this process reads them."""

    def __init__(self, tables: Tables, read_consistency: timedelta | None) -> None:
        self._tables = tables
        self.pins = PinnedVersions()
        # Versions from the folders, not the engine, only where the engine would check on every read.
        self._watch = VersionWatch() if read_consistency == timedelta(0) else None
        self._folders: dict[str, tuple[Any, str | None]] = {}

    def version(self, name: str) -> int:
        with engine_errors(f"read {name}"):
            return self.pins.read(name, lambda: self.engine_version(name))

    def engine_version(self, name: str) -> int:
        """The table's latest version: the engine's, unless its versions folder shows no commit since it last said."""
        table = self._tables.table(name)
        if self._watch is None:
            return int(table.version)
        return self._watch.read(self._versions_folder(name, table), lambda: int(table.version))

    def _versions_folder(self, name: str, table: Any) -> str | None:
        """The local folder of ``table``'s versions; None for a URI or a read-only stand-in for a missing table."""
        if name not in self._tables.opened or self._tables.opened[name] is not table:
            return None
        opened, folder = self._folders.get(name, (None, None))
        if opened is not table:  # first asked, or opened again (reembed rewrites a table)
            uri = str(table.uri)
            folder = None if "://" in uri else os.path.join(uri, "_versions")
            self._folders[name] = (table, folder)
        return folder
