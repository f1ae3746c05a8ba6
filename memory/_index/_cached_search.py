"""Recall's candidate searches of one user, served from the user's cached block in the calling thread.

Once a user's vectors and words are cached (:mod:`._vectors`, :mod:`._lexical`), a full-text and a
vector search are a few numpy calls each: handing them to threads would cost more than it saves, so
:meth:`~tiermem.memory._store._store.Store.cached_searches` runs both here, on one filter mask, and also
counts what the vector search compared. (Which version of a table a recall reads is the store's
concern: :mod:`tiermem.memory._store._versions`.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .._filters import Where
from .._records import StoredRecord
from ._lexical import query_terms
from ._rows import Hit, Vectors
from ._vectors import VectorBlock, top_k

__all__ = ["CachedSearches", "Pool", "cached_searches"]


@dataclass(frozen=True, kw_only=True)
class Pool:
    """The distinct memories one table's searches found, vector hits first: what recall ranks.

    ``records[i]`` was stored with ``vectors[i]`` and scored ``lexical[i]`` by the full-text search
    (0 when only the vector search found it).
    """

    records: list[StoredRecord]
    vectors: Vectors
    lexical: np.ndarray


@dataclass(frozen=True, kw_only=True)
class CachedSearches:
    """One table's full-text and vector search within one scope, and how many rows the vector search compared.

    Held as the pool of distinct records found plus each search's (pool position, score) in rank
    order: recall ranks the pool, and a hit is built only for a caller that asks for the lists.
    """

    pool: Pool
    text_at: list[tuple[int, float]]
    vector_at: list[tuple[int, float]]
    searched: int

    @classmethod
    def of(cls, *, text: Sequence[Hit], vector: Sequence[Hit], searched: int) -> CachedSearches:
        """The searches' hit lists (from any search) pooled: one entry per record id, a vector hit's place first."""
        hits = {h.record.id: h for h in vector}
        hits.update({h.record.id: h for h in text})
        at = {rid: i for i, rid in enumerate(hits)}
        scores = {h.record.id: h.score for h in text}
        each = [np.asarray(h.vector, dtype=np.float32) for h in hits.values()]
        vectors: Vectors = each or np.zeros((0, 0), dtype=np.float32)
        if each and len({v.shape for v in each}) == 1:  # alike in shape: one array; else (a turn's sentences) one each
            vectors = np.stack(each)
        pool = Pool(
            records=[h.record for h in hits.values()],
            vectors=vectors,
            lexical=np.asarray([scores.get(rid, 0.0) for rid in hits], dtype=np.float64),
        )
        return cls(
            pool=pool,
            text_at=[(at[h.record.id], h.score) for h in text],
            vector_at=[(at[h.record.id], h.score) for h in vector],
            searched=searched,
        )

    @property
    def text(self) -> list[Hit]:
        """The full-text hits, best first."""
        return self._hits(self.text_at)

    @property
    def vector(self) -> list[Hit]:
        """The vector hits, best first."""
        return self._hits(self.vector_at)

    def _hits(self, at: Sequence[tuple[int, float]]) -> list[Hit]:
        return [Hit(record=self.pool.records[i], score=score, vector=self.pool.vectors[i]) for i, score in at]


def cached_searches(
    block: VectorBlock,
    parse: Callable[[str], StoredRecord],
    where: Where,
    text: str,
    vector: np.ndarray | None,
    *,
    limit: int,
    parsed: Mapping[str, StoredRecord] | None = None,
) -> CachedSearches:
    """What ``Store.text_search`` and ``Store.vector_search`` return from ``block`` (its words built), on one mask.

    ``parsed``: the block's records by id, already parsed elsewhere at its version; the others are parsed here.
    """
    rest = {k: v for k, v in where.eq.items() if k not in ("namespace", "user_id")}
    keep = block.mask(rest, where.isin or {}, where.ne or {})
    words = block.words().top(query_terms(text), keep, limit)
    near: Sequence[tuple[int, float]] = [] if vector is None else top_k(block, vector, keep, limit)
    # Each distinct row parsed once and its vector taken once: the pool recall ranks.
    rows = list(dict.fromkeys([row for row, _ in near] + [row for row, _ in words]))
    at = {row: i for i, row in enumerate(rows)}
    scores = dict(words)
    pool = Pool(
        records=block.records(rows, parse, parsed),
        vectors=block.vectors(rows),
        lexical=np.asarray([scores.get(row, 0.0) for row in rows], dtype=np.float64),
    )
    return CachedSearches(
        pool=pool,
        text_at=[(at[row], score) for row, score in words],
        vector_at=[(at[row], score) for row, score in near],
        searched=int(np.count_nonzero(keep)),
    )
