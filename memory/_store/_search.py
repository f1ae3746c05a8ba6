"""Searches of a tier table: nearest vectors and full-text matches, from the cached block of one user or the engine.

A search whose filter names one user (recall's usual case) runs on that user's rows cached at the
table's version (:mod:`.._index._vectors`, their words :mod:`.._index._lexical`, both at once
:mod:`.._index._cached_search`); any other goes to LanceDB's vector or full-text index.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa
from lancedb.query import FullTextOperator, MultiMatchQuery

from .._filters import Where, fts_cue
from .._index import (
    COLUMNS,
    REPLY_VECTOR,
    SENTENCE_VECTORS,
    SPECS,
    CachedSearches,
    EngineRow,
    Hit,
    TableName,
    VectorBlock,
    cached_searches,
    column_array,
    query_terms,
    records_in,
    top_k,
)
from .._records import StoredRecord
from ._engine_errors import engine_errors
from ._reads import Reads
from ._tables import Tables
from ._versions import Versions

__all__ = ["Searches"]

_HIT_COLUMNS = ["id", "record"]


class Searches:
    """Vector and full-text searches of one store's tier tables (Store's search methods delegate here)."""

    def __init__(self, tables: Tables, versions: Versions, reads: Reads) -> None:
        self._tables = tables
        self._versions = versions
        self._reads = reads
        self._vectors = tables.vectors
        self._pins = versions.pins
        self._loads: dict[tuple[str, str, str], threading.Lock] = {}
        self._oversize: set[tuple[str, str, str]] = set()

    def vector_search(self, name: TableName, vector: np.ndarray, where: Where, *, limit: int) -> list[Hit]:
        namespace, user = where.eq.get("namespace"), where.eq.get("user_id")
        if namespace is None or user is None or self._vectors.max_bytes <= 0:
            return self._lance_vector_search(name, vector, where, limit=limit)
        key = (name, namespace, user)
        with engine_errors(f"search {name}"):
            block = self._cached_block(key)
        rest = {k: v for k, v in where.eq.items() if k not in ("namespace", "user_id")}
        keep = block.mask(rest, where.isin or {}, where.ne or {})
        parse = SPECS[name].model.model_validate_json
        return [
            Hit(record=block.record(row, parse), score=score, vector=block.vectors([row])[0])
            for row, score in top_k(block, vector, keep, limit)
        ]

    def searched(self, name: TableName, where: Where) -> int:
        namespace, user = where.eq.get("namespace"), where.eq.get("user_id")
        block = self._vectors.peek((name, namespace, user)) if namespace is not None and user is not None else None
        if block is not None:
            rest = {k: v for k, v in where.eq.items() if k not in ("namespace", "user_id")}
            return int(block.mask(rest, where.isin or {}, where.ne or {}).sum())
        return self._reads.count(name, where)

    def _cached_block(self, key: tuple[str, str, str]) -> VectorBlock:
        """The user's block at the table's current version, loaded once however many searches ask at once."""

        def current() -> int:
            return self._versions.engine_version(key[0])

        block = self._vectors.get(key, self._pins.read(key[0], current))
        if block is None:  # stale, or a write of this process moved it since pinned: check the engine again
            version = self._pins.refresh(key[0], current)
            with self._loads.setdefault(key, threading.Lock()):  # recall's text and vector searches run together
                block = self._vectors.get(key, version) or self._load_block(*key, version)
        return block

    def _load_block(self, name: str, namespace: str, user: str, version: int) -> VectorBlock:
        where = Where(eq={"namespace": namespace, "user_id": user})
        table = self._tables.table(name)
        columns = self._tables.vector_columns(name)
        sides = [c for c in columns if c != SENTENCE_VECTORS]
        rows = table.search().where(where.sql()).select([*COLUMNS, *columns]).limit(None).to_arrow()
        if rows.num_rows:  # (rows, d), or (rows, 2, d) with a vector per side
            per_side = [np.stack(rows.column(c).to_numpy(zero_copy_only=False)).astype(np.float32) for c in sides]
            matrix = per_side[0] if len(per_side) == 1 else np.stack(per_side, axis=1)
        else:
            matrix = np.zeros((0, *([len(sides)] if len(sides) > 1 else []), self._tables.dimensions), np.float32)
        sentences, sentence_rows = _sentences(rows) if SENTENCE_VECTORS in columns else (None, None)
        block = VectorBlock(
            version=version,
            columns={c: column_array(c, rows.column(c).to_pylist()) for c in COLUMNS},
            matrix=matrix,
            sentences=sentences,
            sentence_rows=sentence_rows,
        )
        self._vectors.put((name, namespace, user), block)
        if self._vectors.peek((name, namespace, user)) is not block:  # over the budget: full-text search goes to
            self._oversize.add((name, namespace, user))  # the engine rather than load these rows twice a query
        return block

    def _lance_vector_search(self, name: TableName, vector: np.ndarray, where: Where, *, limit: int) -> list[Hit]:
        """The engine's nearest rows; a record with a vector per side (and per sentence) is searched by each, at its
        best (the sentences' column as the engine's multivector search: its best vector)."""
        sides = self._tables.vector_columns(name)
        best: dict[str, EngineRow] = {}
        with engine_errors(f"search {name}"):
            for column in sides:
                for found in (
                    self._tables.table(name)
                    .search(vector.astype(np.float32), vector_column_name=column)
                    .distance_type("cosine")  # type: ignore[attr-defined]  # a vector query's builder has it
                    .where(where.sql(), prefilter=True)
                    .select([*_HIT_COLUMNS, *sides, "_distance"])
                    .limit(limit)
                    .to_list()
                ):
                    held = best.get(found["id"])
                    if held is None or float(found["_distance"]) < float(held["_distance"]):
                        best[found["id"]] = found
        rows = sorted(best.values(), key=lambda r: float(r["_distance"]))[:limit]
        return self._hits(name, rows, lambda row: 1.0 - float(row["_distance"]))

    def text_search(self, name: TableName, text: str, where: Where, *, limit: int) -> list[Hit]:
        block = self._lexical_block(name, where)
        if block is not None:
            keep = block.mask(_rest(where), where.isin or {}, where.ne or {})
            parse = SPECS[name].model.model_validate_json
            return [
                Hit(record=block.record(row, parse), score=score, vector=block.vectors([row])[0])
                for row, score in block.words().top(query_terms(text), keep, limit)
            ]
        return self.lance_text_search(name, text, where, limit=limit)

    def _lexical_block(self, name: TableName, where: Where) -> VectorBlock | None:
        """The cached block of the one user ``where`` names, its BM25 index built; None when it cannot serve."""
        namespace, user = where.eq.get("namespace"), where.eq.get("user_id")
        if namespace is None or user is None or self._vectors.max_bytes <= 0:
            return None
        key = (name, namespace, user)
        if key in self._oversize:
            return None
        with engine_errors(f"full-text search {name}"):
            block = self._cached_block(key)
        if self._vectors.peek(key) is not block:  # too big for the cache even without its words
            return None
        if block.lexical is None and not block.lexical_refused:
            block.words()
            if block.nbytes > self._vectors.max_bytes:  # too big with its words: vectors only, the engine for words
                block.lexical, block.lexical_refused = None, True
            else:
                self._vectors.put(key, block)  # it grew: the least recently used others may go
        return None if block.lexical_refused else block

    def cached_searches(
        self,
        name: TableName,
        text: str,
        vector: np.ndarray | None,
        where: Where,
        *,
        limit: int,
        parsed: Mapping[str, StoredRecord] | None = None,
    ) -> CachedSearches | None:
        namespace, user = where.eq.get("namespace"), where.eq.get("user_id")
        if namespace is None or user is None or self._vectors.max_bytes <= 0:
            return None
        with engine_errors(f"search {name}"):
            version = self._pins.read(name, lambda: self._versions.engine_version(name))
        block = self._vectors.get((name, namespace, user), version)
        if block is None or block.lexical is None or block.lexical_refused:
            return None
        parse = SPECS[name].model.model_validate_json
        return cached_searches(block, parse, where, text, vector, limit=limit, parsed=parsed)

    def lance_text_search(self, name: TableName, text: str, where: Where, *, limit: int) -> list[Hit]:
        cue = fts_cue(text)
        if not cue or (name not in self._tables.indexed and self._reads.count(name) == 0):
            return []
        self._tables.ensure_indexes(name)
        with engine_errors(f"full-text search {name}"):
            rows = (
                self._tables.table(name)
                .search(_fts_query(cue), query_type="fts")
                .where(where.sql(), prefilter=True)
                .select([*_HIT_COLUMNS, *self._tables.vector_columns(name), "_score"])
                .limit(limit)
                .to_list()
            )
        return self._hits(name, rows, lambda row: float(row["_score"]))

    def _hits(self, name: str, rows: list[EngineRow], score: Callable[[EngineRow], float]) -> list[Hit]:
        records = records_in(name, rows)
        sides = self._tables.vector_columns(name)
        return [
            Hit(record=rec, score=score(row), vector=np.asarray(_vector(row, sides), dtype=np.float32))
            for rec, row in zip(records, rows, strict=True)
        ]


def _vector(row: EngineRow, columns: list[str]) -> object:
    """A row's vector, or its vector per side then per sentence (``(k, d)``)."""
    if len(columns) == 1:
        return row["vector"]
    return [row["vector"], row[REPLY_VECTOR], *(row.get(SENTENCE_VECTORS) or ())]


def _sentences(rows: pa.Table) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The sentence vectors of a block's rows, flat, and the row of each (None when no row has any)."""
    column = rows.column(SENTENCE_VECTORS).combine_chunks() if rows.num_rows else None
    if column is None or column.null_count == len(column):
        return None, None
    counts = column.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    if not counts.sum():
        return None, None
    flat = np.stack(column.flatten().to_numpy(zero_copy_only=False)).astype(np.float32)
    return flat, np.repeat(np.arange(len(counts), dtype=np.int64), counts)


def _rest(where: Where) -> dict[str, str]:
    """The equality tests of ``where`` beyond the user's scope (a cached block holds one user)."""
    return {k: v for k, v in where.eq.items() if k not in ("namespace", "user_id")}


def _fts_query(cue: str) -> MultiMatchQuery:
    """Both columns, as plain words: a query object, so nothing in the cue is parsed as syntax."""
    return MultiMatchQuery(cue, ["text", "context"], boosts=[1.0, 1.0], operator=FullTextOperator.OR)
