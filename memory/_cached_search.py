"""Recall's candidate searches of one user, served from the user's cached block in the calling thread.

Once a user's vectors and words are cached (:mod:`._vectors`, :mod:`._lexical`), a full-text and a
vector search are a few numpy calls each: handing them to threads would cost more than it saves, so
:meth:`~tiermem.memory._store.Store.cached_searches` runs both here, on one filter mask, and also
counts what the vector search compared. And within one recall each table's version is read from the
engine once (:class:`PinnedVersions`): every read of a table in the recall then agrees on its
version, and another process's write is still seen by the next recall.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._filters import Where
from ._lexical import query_terms
from ._rows import Hit
from ._vectors import VectorBlock, top_k

__all__ = ["CachedSearches", "PinnedVersions", "cached_searches"]


@dataclass(frozen=True, kw_only=True)
class CachedSearches:
    """The full-text and vector hits of one table within one scope, and how many rows the vector search compared."""

    text: list[Hit]
    vector: list[Hit]
    searched: int


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


def cached_searches(
    block: VectorBlock,
    parse: Callable[[str], Any],
    where: Where,
    text: str,
    vector: np.ndarray | None,
    *,
    limit: int,
) -> CachedSearches:
    """What ``Store.text_search`` and ``Store.vector_search`` return from ``block`` (its words built), on one mask."""
    rest = {k: v for k, v in where.eq.items() if k not in ("namespace", "user_id")}
    keep = block.mask(rest, where.isin or {}, where.ne or {})
    words = block.words().top(query_terms(text), keep, limit)
    near: Sequence[tuple[int, float]] = [] if vector is None else top_k(block, vector, keep, limit)
    return CachedSearches(
        text=[Hit(record=block.record(row, parse), score=score, vector=block.matrix[row]) for row, score in words],
        vector=[Hit(record=block.record(row, parse), score=score, vector=block.matrix[row]) for row, score in near],
        searched=int(keep.sum()),
    )
