"""Writes of records: appends, upserts and inserts-if-absent by id, and deletes by filter.

Each commit is retried when it loses a race (:mod:`._commits`), writes the cached vectors through
(:mod:`.._index._vectors`) when nothing else committed in between, and counts towards compaction
(:meth:`~._maintenance.Maintenance.after_write`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pyarrow as pa

from .._errors import InvalidArgumentError, StoreMismatchError
from .._filters import Where
from .._index import SPECS, TableName, per_user, row, unique
from .._records import StoredRecord
from ._engine_errors import engine_errors
from ._maintenance import Maintenance
from ._tables import Tables

__all__ = ["Writes"]


class Writes:
    """Writes to one store's tier tables."""

    def __init__(self, tables: Tables, maintenance: Maintenance) -> None:
        self._tables = tables
        self._maintenance = maintenance

    def write(
        self,
        name: TableName,
        records: Sequence[StoredRecord],
        vectors: np.ndarray | None,
        *,
        mode: Literal["append", "upsert", "absent"],
    ) -> int:
        if not records:
            return 0
        tables = self._tables
        spec = SPECS[name]
        if spec.vectors:
            if vectors is None or len(vectors) != len(records):
                raise InvalidArgumentError(f"table {name} needs one vector per record")
            if vectors.ndim != 2 or vectors.shape[1] != tables.dimensions:
                raise StoreMismatchError(
                    f"vectors have shape {vectors.shape}, store has {tables.dimensions} dimensions"
                )
        for record in records:
            if not isinstance(record, spec.model):
                raise InvalidArgumentError(f"table {name} holds {spec.model.__name__}, not {type(record).__name__}")
        keep = unique([r.id for r in records], last=mode != "absent")
        vectors = None if vectors is None else np.asarray(vectors)[keep]
        kept = [records[i] for i in keep]
        rows = [row(record, None if vectors is None else vectors[n]) for n, record in enumerate(kept)]
        data = pa.Table.from_pylist(rows, schema=tables.schema(name))
        table = tables.table(name) if mode == "append" else tables.keyed_table(name)

        def commit() -> int:
            with tables.write_lock, engine_errors(f"write to {name}"):
                before = int(table.version)
                if mode == "append":
                    table.add(data)
                    written = len(rows)
                else:
                    # The scan, not the id index: Lance's indexed merge skips the new-key conflict check.
                    merge = table.merge_insert("id").use_index(False)
                    if mode == "upsert":
                        merge = merge.when_matched_update_all()
                    result = merge.when_not_matched_insert_all().execute(data)
                    written = int(result.num_inserted_rows) + int(result.num_updated_rows)
                after = int(table.version)
                if after == before + 1 and (mode != "absent" or written == len(rows)):
                    if vectors is not None:
                        tables.vectors.wrote(name, before=before, after=after, rows=per_user(rows, vectors))
                    tables.held.wrote(name, before=before, after=after, rows=list(zip(rows, kept, strict=True)))
                else:  # someone else committed in between, or rows were skipped: cached blocks may be wrong
                    tables.drop_cached(name)
                return written

        written = tables.retry(f"write to {name}", commit)
        if mode == "upsert" and written > len(rows):  # the table held an id twice (written before the key)
            tables.dedupe(name, [r["id"] for r in rows])
        tables.index_committed(name)
        self._maintenance.after_write(name, table)
        return written

    def delete(self, name: TableName, where: Where) -> None:
        tables = self._tables

        def commit() -> None:
            with tables.write_lock, engine_errors(f"delete from {name}"):
                tables.table(name).delete(where.sql())
                tables.drop_cached(name)

        tables.retry(f"delete from {name}", commit)
        self._maintenance.after_write(name, tables.table(name))
