"""Keeping a store's tables in shape: compaction after writes, ``optimize``, ``purge``, ``reembed``, stats.

The write-side parts (:mod:`._writes`, :mod:`._lease_table`) call :meth:`Maintenance.after_write`
after each commit; the rest runs from jobs and the CLI, most of it needing the store to itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
from lancedb.table import Table as EngineTable

from .._errors import StoreConflictError, StoreMismatchError
from .._index import SPECS, TableName, Vectors, records_in, row
from .._record_text import EMBED_RECIPE
from .._records import StoredRecord
from ._creation import stamp_of
from ._engine_errors import engine_errors
from ._meta import RECIPE, REEMBEDDING
from ._meta_table import MetaTable
from ._tables import Tables, stamped_schema

log = logging.getLogger(__name__)

__all__ = ["Maintenance"]


class Maintenance:
    """Compaction, cleanup and whole-table rewrites of one store's tables.

    Every ``compact_every`` writes from this process a table is compacted; versions younger than
    ``keep_versions`` stay for concurrent readers.
    """

    def __init__(self, tables: Tables, meta: MetaTable, *, compact_every: int, keep_versions: timedelta) -> None:
        self._tables = tables
        self._meta = meta
        self.compact_every = compact_every
        self.keep_versions = keep_versions
        self._writes: dict[str, int] = {}

    def after_write(self, name: str, table: EngineTable) -> None:
        """Every write adds a fragment and a version; many small ones slow every read down.

        So every ``compact_every`` writes from this process the table is compacted and its
        indexes caught up (versions younger than ``keep_versions`` stay for concurrent readers;
        the janitor's storage compaction does the rest). The write has committed by then: a
        compaction that keeps losing commit races to other writers is left for the next time
        (it rewrites what they are changing), never the write's failure.
        """
        self._writes[name] = self._writes.get(name, 0) + 1
        if self.compact_every and self._writes[name] >= self.compact_every:
            self._writes[name] = 0

            def compact() -> None:
                with self._tables.write_lock, engine_errors(f"compact {name}"):
                    table.optimize(cleanup_older_than=self.keep_versions, delete_unverified=False)
                    self._tables.drop_cached(name)

            try:
                self._tables.restore_overwritten(name, table)  # first: the versions compaction cleans up may hold rows
                self._tables.retry(f"compact {name}", compact)
            except StoreConflictError as exc:
                log.warning("compaction of %s left for later: %s", name, exc)

    def optimize(self, *, cleanup_older_than: timedelta | None = None) -> dict[str, int]:
        tables = self._tables
        versions: dict[str, int] = {}
        for name in SPECS:
            table = tables.keyed_table(name)  # declaring the key also removes duplicate ids of an older store
            tables.restore_overwritten(name, table)  # first: the versions cleaned up may hold rows an Overwrite hid
            tables.drop_cached(name)
            with engine_errors(f"count {name}"):
                if table.count_rows() == 0:
                    continue
            tables.ensure_indexes(name)

            def compact(table: EngineTable = table, name: str = name) -> int:
                with tables.write_lock, engine_errors(f"optimize {name}"):
                    table.optimize(
                        cleanup_older_than=self.keep_versions if cleanup_older_than is None else cleanup_older_than,
                        delete_unverified=False,
                    )
                    return len(table.list_versions())

            versions[name] = tables.retry(f"optimize {name}", compact)
        return versions

    def stats(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for name in SPECS:
            table = self._tables.table(name)
            with engine_errors(f"describe {name}"):
                out[name] = {"rows": table.count_rows(), "versions": len(table.list_versions())}
        return out

    def disk_bytes(self) -> int | None:
        uri = self._tables.uri
        if "://" in uri and not uri.startswith("file://"):
            return None
        root = Path(uri.removeprefix("file://"))
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())

    def rewrite(self, name: TableName) -> None:
        """Rewrite ``name`` from its live rows and rebuild its indexes: the latest version holds no deleted row.

        An Overwrite: only behind the purge fence (:mod:`._purge`), where no other commit can land between
        reading the rows and writing them back. The older versions keep the deleted rows until cleaned up.
        """
        tables = self._tables
        table = tables.table(name)

        def rewrite() -> None:
            with tables.write_lock, engine_errors(f"purge {name}"):
                live = table.to_arrow()
                table.add(live, mode="overwrite")
                tables.drop_cached(name)
                tables.indexed.discard(name)
                if live.num_rows:
                    tables.ensure_indexes(name)

        tables.retry(f"purge {name}", rewrite)

    def reembed(
        self,
        embedder_id: str,
        dimensions: int,
        vectors: Callable[[str, list[StoredRecord]], Vectors],
        *,
        only: tuple[type, ...] | None = None,
    ) -> dict[str, int]:
        tables = self._tables
        marker = REEMBEDDING + embedder_id
        self._meta.write({"embedder_id": marker, "dimensions": str(dimensions)})
        tables.embedder_id, tables.dimensions = marker, dimensions
        counts: dict[str, int] = {}
        for name, spec in SPECS.items():
            if not spec.vectors or (only is not None and not issubclass(spec.model, only)):
                continue
            with engine_errors(f"read {name}"):
                try:
                    stored = tables.open(name).to_arrow()
                except (ValueError, FileNotFoundError):  # no such table yet
                    stored = None
            rows = [] if stored is None else stored.select(["record"]).to_pylist()
            records = records_in(name, rows)
            matrix = vectors(name, records) if records else np.zeros((0, dimensions), dtype=np.float32)
            widths = {np.shape(v)[-1] for v in matrix}
            if len(matrix) != len(records) or widths - {dimensions}:
                raise StoreMismatchError(
                    f"re-embedding {name}: {len(matrix)} vectors {sorted(widths)} wide, "
                    f"not {len(records)} of {dimensions}"
                )
            # Carry the table's creation on: a rewrite stamped otherwise would read as a racing create's.
            made = None if stored is None else stamp_of(stored.schema.field("id").metadata)
            schema = stamped_schema(tables.schema(name, full=True), made)
            data = pa.Table.from_pylist([row(r, matrix[i]) for i, r in enumerate(records)], schema=schema)

            def rewrite(name: str = name, data: pa.Table = data) -> None:
                with tables.write_lock, engine_errors(f"rewrite {name}"):
                    tables.opened[name] = tables.db.create_table(name, data, schema=data.schema, mode="overwrite")
                    tables.one_sided.discard(name)  # rewritten with this code's columns
                    tables.unsplit.discard(name)
                    tables.drop_cached(name)
                    tables.indexed.discard(name)
                    if data.num_rows:
                        tables.ensure_indexes(name)

            tables.retry(f"rewrite {name}", rewrite)
            counts[name] = len(records)
        # ``vectors`` embeds :func:`embedded_text`, so the store now holds this code's recipe.
        self._meta.write({"embedder_id": embedder_id, "dimensions": str(dimensions), RECIPE: str(EMBED_RECIPE)})
        tables.embedder_id = embedder_id
        return counts
