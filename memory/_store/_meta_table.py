"""The meta table's engine work: read, created with its stamp, repaired and checked before anything else.

What it must say and what to tell the user if not are decided in :mod:`._meta`; this module reads
and writes it, for an opened store (:class:`MetaTable`) and for one not opened (:func:`stored_meta`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import lancedb
import pyarrow as pa

from .._index import SPECS
from ._engine_errors import engine_errors
from ._meta import check_meta, recipe_mismatch, settled_meta, stamp, wanted_meta
from ._tables import PRIMARY_KEY, Tables, checked_out, local_uri

log = logging.getLogger(__name__)

__all__ = ["MetaTable", "stored_meta"]

_META_SCHEMA = pa.schema(
    [pa.field("key", pa.string(), nullable=False, metadata=PRIMARY_KEY), pa.field("value", pa.string())]
)


class MetaTable:
    """The meta table of an opened store (schema version, embedder, store id, recorded options)."""

    def __init__(self, tables: Tables) -> None:
        self._tables = tables

    def check(self) -> None:
        """Refuse a store written with another embedder, or without a meta table, before any read or write.

        A store embedded by another recipe opens, with a WARNING (:func:`recipe_mismatch`).
        """
        tables = self._tables
        wanted = wanted_meta(tables.embedder_id, tables.dimensions)
        with engine_errors("open the meta table"):
            names = tables.table_names()
            stored = self._listed() if "meta" in names else {}
        if check_meta(tables.uri, stored, wanted, tables=names & set(SPECS), create=tables.create):
            tables.retry("create the meta table", lambda: self._stamp(wanted), gated=False)
            with engine_errors("read the meta table"):
                stored = self._settled()
            check_meta(tables.uri, stored, wanted, tables=(), create=False)  # a racing opener may have made it
        if (message := recipe_mismatch(tables.uri, stored)) is not None:
            log.warning("%s", message)

    def _listed(self) -> dict[str, str]:
        """The meta table a listing showed; another process may be creating it, so wait for its first commit."""
        for wait in (0.05, 0.1, 0.2, 0.4, 0.8, 1.6):
            try:
                return self._settled()
            except ValueError as exc:  # listed (its folder exists) but no version committed yet
                if "not found" not in str(exc):
                    raise
                time.sleep(wait)
        return self._settled()

    def _settled(self) -> dict[str, str]:
        """The meta table as all processes read it (:func:`settled_meta`); a writer repairs a clobbered one."""
        values, clobbered = settled_meta(self._tables.uri, *_meta_versions(self._tables.db))
        if clobbered and self._tables.create:
            log.info("store %s: a racing create overwrote its meta table; restoring it", self._tables.uri)
            self.write(values)
        return values

    def _stamp(self, wanted: Mapping[str, str]) -> None:
        with engine_errors("create the meta table"):
            rows = pa.Table.from_pylist(stamp(wanted), schema=_META_SCHEMA)
            meta = self._tables.db.create_table("meta", data=rows, exist_ok=True)  # made with its stamp, in version 1
            if meta.count_rows() == 0:  # an empty one an older tiermem created, then died before stamping
                meta.merge_insert("key").use_index(False).when_not_matched_insert_all().execute(rows)

    def read(self) -> dict[str, str]:
        with engine_errors("read the meta table"):
            return self._settled()

    def write(self, values: Mapping[str, str], *, keep: bool = False) -> None:
        """Write ``values`` to the meta table; with ``keep`` only absent keys (insert-if-absent on the primary key)."""

        def commit() -> None:
            with engine_errors("update the meta table"):
                merge = self._tables.open("meta").merge_insert("key").use_index(False)
                (merge if keep else merge.when_matched_update_all()).when_not_matched_insert_all().execute(
                    pa.Table.from_pylist([{"key": k, "value": v} for k, v in values.items()], schema=_META_SCHEMA)
                )

        self._tables.retry("update the meta table", commit, gated=False)


def stored_meta(uri: str, *, storage_options: Mapping[str, str] | None = None) -> dict[str, str]:
    """The meta table of the store at ``uri`` (schema_version, embedder_id, dimensions, ...); {} if none yet."""
    uri = local_uri(uri)
    if "://" not in uri and not Path(uri).exists():
        return {}
    with engine_errors("read the meta table"):
        try:
            versions = _meta_versions(lancedb.connect(uri, storage_options=dict(storage_options or {})))
        except (ValueError, FileNotFoundError):  # lancedb's "table not found"
            return {}
        return settled_meta(uri, *versions)[0]


def _meta_versions(db: Any) -> tuple[int, Callable[[int], list[dict[str, str]] | None]]:
    """The meta table's latest version and a reader of any version's rows (None for a cleaned-up one)."""
    latest = (table := db.open_table("meta")).version
    table.checkout(latest)  # its rows and number from one version, whatever commits meanwhile

    def read(version: int) -> list[dict[str, str]] | None:
        older = table if version == latest else db.open_table("meta")
        if not checked_out(older, version):
            return None
        return cast(list[dict[str, str]], older.to_arrow().to_pylist())

    return latest, read
