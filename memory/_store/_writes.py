"""Writes of records: appends, upserts and inserts-if-absent by id, and deletes by filter.

A merge matches a row on its id within its scope: a row of another namespace or user with the same id
is never changed (the merge's update is conditional on the target's scope, atomically), and the write
then raises InvalidArgumentError naming the ids. Tiermem's ids hash their scope (:mod:`.._identity`), so
only a crafted id gets there; the batch's rows of its own scope have landed by then.

Each commit is retried when it loses a race (:mod:`._commits`), writes the cached vectors through
(:mod:`.._index._vectors`) when nothing else committed in between, and counts towards compaction
(:meth:`~._maintenance.Maintenance.after_write`). Inside an erasure fence (:mod:`._fences`), a write of a user
erased since the fence began raises UserErasedError, before its commit or, racing the erasure, after it
(its rows then deleted again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pyarrow as pa
from lancedb.table import Table as EngineTable

from .._errors import InvalidArgumentError, StoreMismatchError, UserErasedError
from .._filters import Where, sql_literal
from .._index import SPECS, TableName, Vectors, per_user, picked, row, unique
from .._records import StoredRecord
from ._engine_errors import engine_errors
from ._fences import ErasureMarks
from ._maintenance import Maintenance
from ._tables import Tables

__all__ = ["Writes"]

# An id matched in another scope is left alone: ids are the primary key, so it is not inserted either.
_SAME_SCOPE = "target.namespace = source.namespace AND target.user_id = source.user_id"


class Writes:
    """Writes to one store's tier tables."""

    def __init__(self, tables: Tables, maintenance: Maintenance, marks: ErasureMarks) -> None:
        self._tables = tables
        self._maintenance = maintenance
        self._marks = marks

    def write(
        self,
        name: TableName,
        records: Sequence[StoredRecord],
        vectors: Vectors | None,
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
            _check_shapes(vectors, sides=spec.sides, dimensions=tables.dimensions)
        for record in records:
            if not isinstance(record, spec.model):
                raise InvalidArgumentError(f"table {name} holds {spec.model.__name__}, not {type(record).__name__}")
        keep = unique([r.id for r in records], last=mode != "absent")
        table = tables.table(name) if mode == "append" else tables.keyed_table(name)  # opened: its columns known
        vectors = None if vectors is None else _sided(picked(vectors, keep), tables.sides(name), tables.sentences(name))
        kept = [records[i] for i in keep]
        rows = [row(record, None if vectors is None else vectors[n]) for n, record in enumerate(kept)]
        data = pa.Table.from_pylist(rows, schema=tables.schema(name))
        scopes = {(str(r["namespace"]), str(r["user_id"])) for r in rows}
        self._marks.hold(scopes)  # erased since this work began: nothing written

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
                        merge = merge.when_matched_update_all(where=_SAME_SCOPE)
                    result = merge.when_not_matched_insert_all().execute(data)
                    written = int(result.num_inserted_rows) + int(result.num_updated_rows)
                after = int(table.version)
                complete = written == len(rows) if mode == "absent" else written >= len(rows)
                if after == before + 1 and complete:
                    if vectors is not None:
                        tables.vectors.wrote(name, before=before, after=after, rows=per_user(rows, vectors))
                    tables.held.wrote(name, before=before, after=after, rows=list(zip(rows, kept, strict=True)))
                else:  # someone else committed in between, or rows were skipped: cached blocks may be wrong
                    tables.drop_cached(name)
                return written

        written = tables.retry(f"write to {name}", commit)
        try:
            self._marks.hold(scopes)  # erased while this committed: the erasure's delete may have come first
        except UserErasedError:
            for namespace, user in scopes:
                ids = [str(r["id"]) for r in rows if (r["namespace"], r["user_id"]) == (namespace, user)]
                self.delete(name, Where(eq={"namespace": namespace, "user_id": user}, isin={"id": ids}))
            raise
        if mode != "append" and written < len(rows):  # matched: already there, or a row of another scope
            self._refuse_foreign(name, table, rows)
        if mode == "upsert" and written > len(rows):  # the table held an id twice (written before the key)
            tables.dedupe(name, [r["id"] for r in rows])
        tables.index_committed(name)
        self._maintenance.after_write(name, table)
        return written

    def _refuse_foreign(self, name: TableName, table: EngineTable, rows: Sequence[dict[str, object]]) -> None:
        """InvalidArgumentError if any of ``rows``' ids names a row of another namespace or user in ``name``."""
        scopes = {str(r["id"]): (r["namespace"], r["user_id"]) for r in rows}
        ids = ", ".join(sql_literal(i) for i in scopes)
        with engine_errors(f"read {name}"):
            query = table.search().where(f"id IN ({ids})").select(["id", "namespace", "user_id"]).limit(None)
            stored = query.to_arrow().to_pylist()
        foreign = sorted({r["id"] for r in stored if scopes[r["id"]] != (r["namespace"], r["user_id"])})
        if foreign:
            raise InvalidArgumentError(
                f"{len(foreign)} id(s) written to {name} belong to another user's records, which were left "
                f"unchanged and not written: {', '.join(foreign[:5])}"
            )

    def delete(self, name: TableName, where: Where) -> None:
        tables = self._tables

        def commit() -> None:
            with tables.write_lock, engine_errors(f"delete from {name}"):
                tables.table(name).delete(where.sql())
                tables.drop_cached(name)

        tables.retry(f"delete from {name}", commit)
        self._maintenance.after_write(name, tables.table(name))


def _check_shapes(vectors: Vectors, *, sides: bool, dimensions: int) -> None:
    """StoreMismatchError unless ``vectors`` is a batch a table of this kind holds (see :data:`Vectors`)."""
    if isinstance(vectors, np.ndarray):
        shapes = [vectors.shape[1:]]
    else:
        shapes = list(dict.fromkeys(np.shape(v) for v in vectors))
    for shape in shapes:
        fits = len(shape) == 1 or (sides and len(shape) == 2 and shape[0] >= 2)
        if not fits or shape[-1] != dimensions or (not sides and not isinstance(vectors, np.ndarray)):
            raise StoreMismatchError(f"vectors have shape {shape} each, store has {dimensions} dimensions")


def _sided(vectors: Vectors, sides: bool, sentences: bool) -> Vectors:
    """``vectors`` in the shape the table holds: a ``(k, d)`` array per record where its rows have a vector per
    side and per sentence (one vector given serves both sides); ``(n, 2, d)`` where they have sides only;
    else ``(n, d)`` (a table made before its sides had one: the first side's)."""
    each = list(vectors)
    if not each:
        return vectors
    if not sides:
        return np.stack([v if v.ndim == 1 else v[0] for v in each])
    paired = [np.stack([v, v]) if v.ndim == 1 else v for v in each]
    if not sentences:
        return np.stack([v[:2] for v in paired])
    return paired
