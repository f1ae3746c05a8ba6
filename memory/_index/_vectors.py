"""An in-process cache of each user's vectors and words, kept in step with the store by write-through.

A user's rows are scattered through a table shared by many users, so a filtered vector search
reads every one of them from disk on every query. Holding the user's vectors as one float32
matrix (and their records, serialised) turns that into one matrix product and no I/O. Each
block remembers the table version it matches: this process's own writes update it in place,
anything else (another process wrote) makes it stale and the next search reloads it. A block also
holds the rows' searchable text and, once a full-text search asked for it, their BM25 index
(:mod:`._lexical`), so full-text search of one user is served from memory as well.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .._filters import filter_key
from .._records import StoredRecord
from ._lexical import FIELDS, LexicalIndex
from ._products import similarities

__all__ = ["COLUMNS", "VectorBlock", "VectorCache", "column_array", "split_vectors", "top_k"]

# A batch of records' vectors: ``(n, d)``; ``(n, 2, d)`` for sided records; or one array per record,
# a sided record's ``(k, d)`` (its sides, then its sentences).
Vectors = np.ndarray | list[np.ndarray]

COLUMNS = ("id", "session_id", "subject", "status", "record", *FIELDS)
FILTERS = ("id", "session_id", "subject", "status")
# Parsed records kept per block (most recently returned first): searches return the same memories
# again and again, and parsing one costs more than finding it. Counted as ``_PARSED_FACTOR`` times
# its serialised size.
_PARSED = 1024
_PARSED_FACTOR = 3
# Filter masks kept per block, and the most values a membership test may list to be kept: recall
# asks the same few scopes (a user's live facts, say) query after query, and testing every row's
# strings costs more than the vector product's share of a row.
_MASKS = 8
_MASK_VALUES = 64


def column_array(name: str, values: Sequence[str | None]) -> np.ndarray:
    """Filter columns as fixed-width unicode (NULL as ""), so tests on them run in numpy's C loops."""
    if name in FILTERS:
        return np.asarray([v or "" for v in values], dtype=str)
    return np.asarray(list(values), dtype=object)


@dataclass(kw_only=True)
class VectorBlock:
    """One user's rows of one table: ids, filterable columns and unit vectors."""

    version: int
    columns: dict[str, np.ndarray]
    matrix: np.ndarray  # (rows, d), or (rows, 2, d) where a row has a vector per side (a turn's)
    # A sided row's further vectors, one per sentence (``(p, d)``), and the row each belongs to, ascending.
    sentences: np.ndarray | None = None
    sentence_rows: np.ndarray | None = None
    lexical: LexicalIndex | None = None
    # Set when the BM25 index would not fit the cache's budget: full-text search goes to the engine.
    lexical_refused: bool = field(default=False)
    # id -> parsed record. Records are frozen models, so one object can serve every search.
    parsed: OrderedDict[str, StoredRecord] = field(default_factory=OrderedDict)
    # filters -> rows passing them, read-only (see mask). A block's rows never change: a write makes a new block.
    masks: dict[tuple[object, ...], np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def nbytes(self) -> int:
        """Roughly what the block holds: vectors, serialised records and texts, filter columns, the BM25
        index, and room for the parsed records it keeps."""
        return self.vector_bytes + self.lexical_bytes + self.parsed_bytes

    @cached_property
    def parsed_bytes(self) -> int:
        """Room for the most parsed records kept: their serialised size, a few times over."""
        sizes = [len(r) for r in self.columns["record"]]
        return _PARSED_FACTOR * sum(sorted(sizes, reverse=True)[:_PARSED])

    def record(
        self, row: int, parse: Callable[[str], StoredRecord], known: Mapping[str, StoredRecord] | None = None
    ) -> StoredRecord:
        """The record of ``row``: from ``known`` (by id, parsed elsewhere at this block's version), else parsed on
        first use and kept."""
        return self.records([row], parse, known)[0]

    def records(
        self, rows: Sequence[int], parse: Callable[[str], StoredRecord], known: Mapping[str, StoredRecord] | None = None
    ) -> list[StoredRecord]:
        """The records of ``rows``, in order (see :meth:`record`)."""
        keys: list[str] = self.columns["id"][list(rows)].tolist()
        found: list[StoredRecord] = []
        for row, key in zip(rows, keys, strict=True):
            if known is not None and (given := known.get(key)) is not None:
                found.append(given)
                continue
            kept = self.parsed.get(key)
            if kept is None:
                kept = parse(str(self.columns["record"][row]))
                self.parsed[key] = kept
                while len(self.parsed) > _PARSED:
                    self.parsed.popitem(last=False)
            else:
                with contextlib.suppress(KeyError):  # another thread's search may have just dropped it
                    self.parsed.move_to_end(key)
            found.append(kept)
        return found

    @cached_property
    def scored(self) -> np.ndarray:
        """The vectors a search scores: ``(rows, d)``, or ``(rows, 2, d)`` while some row's two sides differ
        (a log of the user's words alone holds each vector twice and is scored once)."""
        if self.matrix.ndim == 3 and not np.any(self.matrix[:, 0] != self.matrix[:, 1]):
            return self.matrix[:, 0]
        return self.matrix

    @cached_property
    def sentence_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows that have sentences, and where each one's first sentence is (sentences are in row order)."""
        if self.sentence_rows is None or not len(self.sentence_rows):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        rows, starts = np.unique(self.sentence_rows, return_index=True)
        return rows, starts

    def vectors(self, rows: Sequence[int]) -> Vectors:
        """The stored vectors of ``rows``: ``matrix[rows]``, or a ``(k, d)`` array per row, its sides then its
        sentences, where the block has sentences."""
        if self.sentences is None or self.sentence_rows is None or not len(self.sentences):
            return self.matrix[list(rows)] if len(rows) else np.zeros((0, *self.matrix.shape[1:]), self.matrix.dtype)
        starts = np.searchsorted(self.sentence_rows, rows, side="left")
        ends = np.searchsorted(self.sentence_rows, rows, side="right")
        return [
            np.concatenate([self.matrix[r], self.sentences[a:b]]) if b > a else self.matrix[r]
            for r, a, b in zip(rows, starts.tolist(), ends.tolist(), strict=True)
        ]

    @cached_property
    def vector_bytes(self) -> int:
        """The vectors, serialised records, filter columns and room for the filter masks kept."""
        rows = len(self.matrix)
        held = self.matrix.nbytes + sum(a.nbytes for a in (self.sentences, self.sentence_rows) if a is not None)
        return int(held + sum(len(r) for r in self.columns["record"]) + (64 * 4 + _MASKS) * rows)

    @cached_property
    def text_bytes(self) -> int:
        """The searchable texts (both columns)."""
        return sum(len(t or "") for name in FIELDS for t in self.columns[name])

    @property
    def lexical_bytes(self) -> int:
        """The searchable texts and, once built, their BM25 index."""
        return self.text_bytes + (self.lexical.nbytes if self.lexical is not None else 0)

    def words(self) -> LexicalIndex:
        """The block's BM25 index, built on first use (a block only vector searches never needs it)."""
        if self.lexical is None:
            self.lexical = LexicalIndex.build({name: list(self.columns[name]) for name in FIELDS})
        return self.lexical

    def mask(self, eq: Mapping[str, str], isin: Mapping[str, Sequence[str]], ne: Mapping[str, str]) -> np.ndarray:
        """Rows passing equality, membership and inequality tests (a NULL is never equal); read-only.

        Kept per filter for the next search of the same scope, unless it lists many values (ids).
        """
        if sum(len(v) for v in isin.values()) > _MASK_VALUES:
            return self._tested(eq, isin, ne)
        key = filter_key(eq, isin, ne)
        keep = self.masks.get(key)
        if keep is None:
            keep = self._tested(eq, isin, ne)
            while len(self.masks) >= _MASKS:
                with contextlib.suppress(StopIteration, KeyError):  # another thread's search may drop it first
                    del self.masks[next(iter(self.masks))]
            self.masks[key] = keep
        return keep

    def _tested(self, eq: Mapping[str, str], isin: Mapping[str, Sequence[str]], ne: Mapping[str, str]) -> np.ndarray:
        keep = np.ones(len(self.matrix), dtype=bool)
        for column, value in eq.items():
            keep &= self.columns[column] == value
        for column, values in isin.items():
            keep &= np.isin(self.columns[column], np.asarray(list(values), dtype=str))
        for column, value in ne.items():
            keep &= self.columns[column] != value
        keep.flags.writeable = False  # shared by the searches of this scope: none may change it
        return keep

    def upsert(self, columns: Mapping[str, Sequence[str | None]], vectors: Vectors) -> VectorBlock:
        """A new block with these rows replaced or appended, by id (``vectors`` as :meth:`vectors` gives them)."""
        incoming = {str(i): n for n, i in enumerate(columns["id"])}
        keep = np.array([i not in incoming for i in self.columns["id"]], dtype=bool)
        matrix, sentences, sentence_rows = split_vectors(vectors, self.matrix.shape[1:])
        if self.sentences is not None and self.sentence_rows is not None and len(self.sentences):
            kept_rows = np.cumsum(keep) - 1  # each kept row's place in the new block
            stays = keep[self.sentence_rows]
            sentences = np.concatenate([self.sentences[stays], sentences])
            sentence_rows = np.concatenate([kept_rows[self.sentence_rows[stays]], sentence_rows + int(keep.sum())])
        else:
            sentence_rows = sentence_rows + int(keep.sum())
        merged = {
            name: np.concatenate([self.columns[name][keep], column_array(name, columns[name])]) for name in COLUMNS
        }
        lexical = None if self.lexical is None else self.lexical.upsert(keep, {n: columns[n] for n in FIELDS})
        return VectorBlock(
            version=self.version,
            columns=merged,
            matrix=np.vstack([self.matrix[keep], matrix]),
            sentences=sentences if len(sentences) else None,
            sentence_rows=sentence_rows if len(sentences) else None,
            lexical=lexical,
            lexical_refused=self.lexical_refused,
            parsed=OrderedDict((k, v) for k, v in list(self.parsed.items()) if k not in incoming),
        )


class VectorCache:
    """Blocks keyed by (table, namespace, user), least recently used dropped beyond ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._blocks: OrderedDict[tuple[str, str, str], VectorBlock] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str], version: int) -> VectorBlock | None:
        with self._lock:
            block = self._blocks.get(key)
            if block is None or block.version != version:
                return None
            self._blocks.move_to_end(key)
            return block

    def peek(self, key: tuple[str, str, str]) -> VectorBlock | None:
        """The block held for ``key`` whatever its version (for sizes, never for results)."""
        with self._lock:
            return self._blocks.get(key)

    def total_bytes(self) -> int:
        """What the held blocks take, as the budget counts it."""
        with self._lock:
            return sum(b.nbytes for b in self._blocks.values())

    def put(self, key: tuple[str, str, str], block: VectorBlock) -> None:
        """Hold ``block`` (again, after it grew), dropping the least recently used beyond the budget."""
        if block.nbytes > self.max_bytes:
            with self._lock:
                if self._blocks.get(key) is block:
                    del self._blocks[key]
            return
        with self._lock:
            self._blocks[key] = block
            self._blocks.move_to_end(key)
            total = sum(b.nbytes for b in self._blocks.values())
            while total > self.max_bytes and self._blocks:
                _, dropped = self._blocks.popitem(last=False)
                total -= dropped.nbytes

    def wrote(
        self,
        table: str,
        *,
        before: int,
        after: int,
        rows: Mapping[tuple[str, str], tuple[Mapping[str, Sequence[str | None]], Vectors]] | None,
    ) -> None:
        """After this process wrote ``rows`` (per user) moving ``table`` from ``before`` to ``after``.

        Blocks that were current stay current (with the rows applied); a jump of more than the
        write's own commits means someone else wrote too, and those blocks go stale.
        """
        with self._lock:
            for key in [k for k in self._blocks if k[0] == table]:
                block = self._blocks[key]
                if block.version != before:
                    del self._blocks[key]
                    continue
                change = (rows or {}).get((key[1], key[2]))
                updated = block.upsert(*change) if change is not None else block
                updated.version = after
                self._blocks[key] = updated

    def drop(self, table: str) -> None:
        with self._lock:
            for key in [k for k in self._blocks if k[0] == table]:
                del self._blocks[key]


def split_vectors(vectors: Vectors, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch of stored vectors as a block holds them: the matrix (rows of ``shape``), then the sentences'
    vectors past a row's sides and the row of each."""
    dims = shape[-1]
    if isinstance(vectors, np.ndarray):
        return vectors.astype(np.float32, copy=False), np.zeros((0, dims), np.float32), np.zeros(0, np.int64)
    sides = len(shape)  # 2: a vector per side
    matrix = np.stack([v[:2] if sides == 2 else v for v in vectors]) if vectors else np.zeros((0, *shape), np.float32)
    extra = [v[2:] for v in vectors] if sides == 2 else []
    rows = np.repeat(np.arange(len(extra), dtype=np.int64), [len(e) for e in extra])
    flat = np.concatenate(extra) if len(rows) else np.zeros((0, dims), np.float32)
    return matrix.astype(np.float32, copy=False), flat.astype(np.float32, copy=False), rows


def top_k(block: VectorBlock, vector: np.ndarray, keep: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The ``limit`` rows most similar to ``vector`` among ``keep``: (row, cosine), best first."""
    count = int(np.count_nonzero(keep))
    if count == 0:
        return []
    # Score every row in place rather than copying the kept rows out (a copy is the matrix again).
    matrix = block.scored
    if matrix.ndim == 3:  # a vector per side: a row scores its better side
        scores = similarities(matrix.reshape(-1, matrix.shape[-1]), vector).reshape(len(matrix), -1).max(axis=1)
    else:
        scores = similarities(matrix, vector)
    if block.sentences is not None and len(block.sentences):  # and a row with sentences at its best one
        rows, starts = block.sentence_groups
        best = np.maximum.reduceat(similarities(block.sentences, vector), starts)
        scores[rows] = np.maximum(scores[rows], best)
    if count < len(scores):
        scores[~keep] = -np.inf
    limit = min(limit, count)
    best = np.argpartition(-scores, limit - 1)[:limit] if len(scores) > limit else np.arange(len(scores))
    best = best[np.argsort(-scores[best], kind="stable")]
    return [(int(b), float(scores[b])) for b in best]
