"""How records become table rows: which table holds which record type, and the columns every row has.

No engine here: :mod:`.._store._store` turns these rows into LanceDB tables and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from .._records import Alias, Chunk, Digest, Document, Edge, Episode, Fact, StoredRecord, Turn, WorkingEntry
from ._vectors import COLUMNS, Vectors

__all__ = [
    "REPLY_VECTOR",
    "SENTENCE_VECTORS",
    "SPECS",
    "EngineRow",
    "Hit",
    "TableName",
    "Vectors",
    "duplicate_losers",
    "fts_columns",
    "per_user",
    "picked",
    "records_in",
    "row",
    "search_context",
    "unique",
]

TableName = Literal["working", "episodes", "facts", "digests", "edges", "turns", "aliases", "chunks", "documents"]
EngineRow = dict[str, Any]
"""A table row, as LanceDB takes and gives it (``to_list``): columns by name, their types the engine's schema's."""


@dataclass(frozen=True, kw_only=True)
class Hit:
    """A search result: the record, the engine's score and the stored vector (a turn's: its sides, then its
    sentences, ``(k, d)``)."""

    record: StoredRecord
    score: float
    vector: np.ndarray


@dataclass(frozen=True, kw_only=True)
class Spec:
    model: type[StoredRecord]
    vectors: bool
    # A vector for each side of the record (a turn: what people said, what was said back), the second
    # in :data:`REPLY_VECTOR`; a cue meets the record at the better of the two.
    sides: bool = False


REPLY_VECTOR = "reply_vector"
# A sided record's further vectors, one per sentence (a turn's: ``turn_sentences``), a list column; the
# record's vectors in memory are ``(k, d)``: its sides, then these. Not named "...vector...": LanceDB takes
# such a list column for a vector of its modal length whenever it re-reads a table's data (a purge's overwrite).
SENTENCE_VECTORS = "sentences"


SPECS: dict[str, Spec] = {
    "working": Spec(model=WorkingEntry, vectors=True),
    "episodes": Spec(model=Episode, vectors=True),
    "facts": Spec(model=Fact, vectors=True),
    "digests": Spec(model=Digest, vectors=True),
    "edges": Spec(model=Edge, vectors=True),
    "turns": Spec(model=Turn, vectors=True, sides=True),
    "aliases": Spec(model=Alias, vectors=False),
    # Ingested documents: their passages, searched beside the tiers, and each version's manifest (never searched).
    # Stores made before them open as they were; the tables are made at their first write.
    "chunks": Spec(model=Chunk, vectors=True),
    "documents": Spec(model=Document, vectors=False),
}


def searchable_text(record: BaseModel) -> str:
    """What full-text search reads of a record."""
    text = getattr(record, "search_text", None) or getattr(record, "text", None) or getattr(record, "summary", None)
    return str(text or "")


def search_context(record: BaseModel) -> str:
    """What full-text search also reads of a record besides its text, and never shows: a turn's previous
    turn, a memory's retrieval keys."""
    keys = " ".join(getattr(record, "keys", ()))
    return f"{getattr(record, 'context', '')} {keys}".strip()


def fts_columns(record: BaseModel) -> tuple[str, str]:
    """The ``text`` and ``context`` columns the store's full-text index reads of a record."""
    text = searchable_text(record)
    return text, f"{search_context(record)} {text}".strip()


def row(record: StoredRecord, vector: np.ndarray | None) -> EngineRow:
    """The row of one record: its filterable columns, its text for search, the record as JSON, its vector."""
    out: EngineRow = {
        "id": record.id,
        "namespace": record.namespace,
        "user_id": record.user_id,
        "session_id": getattr(record, "session_id", None),
        "subject": getattr(record, "subject", None) or getattr(record, "source", None),
        "status": getattr(record, "status", None) or "active",
        # Full-text search reads both columns: a turn is also found by the turn it replies to,
        # a memory by its retrieval keys.
        **dict(zip(("text", "context"), fts_columns(record), strict=True)),
        "created_at": record.created_at,
        "updated_at": getattr(record, "updated_at", None) or record.created_at,
        "record": record.model_dump_json(),
    }
    if vector is not None and vector.ndim == 2:  # a turn's two sides, then any sentences
        out["vector"], out[REPLY_VECTOR] = vector[0], vector[1]
        if len(vector) > 2:
            out[SENTENCE_VECTORS] = list(vector[2:])
    elif vector is not None:
        out["vector"] = vector
    return out


def records_in(name: str, rows: Sequence[EngineRow]) -> list[StoredRecord]:
    """The records that rows of table ``name`` hold (their ``record`` column, parsed): :func:`row` undone."""
    model = SPECS[name].model
    return [model.model_validate_json(r["record"]) for r in rows]


def unique(ids: Sequence[str], *, last: bool) -> list[int]:
    """Positions that keep one record per id (the last or the first given), in order: a merge refuses two."""
    chosen: dict[str, int] = {}
    for i, key in enumerate(ids):
        if last or key not in chosen:
            chosen[key] = i
    return sorted(chosen.values())


def picked(vectors: Vectors, at: Sequence[int]) -> Vectors:
    """The vectors of the records at ``at``, in order, in the batch's own form."""
    if isinstance(vectors, np.ndarray):
        return np.asarray(vectors[list(at)], dtype=np.float32)
    return [np.asarray(vectors[i], dtype=np.float32) for i in at]


def per_user(
    rows: Sequence[EngineRow], vectors: Vectors
) -> dict[tuple[str, str], tuple[dict[str, list[str | None]], Vectors]]:
    """Written rows grouped by user, in the shape the vector cache applies."""
    grouped: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rows):
        grouped.setdefault((r["namespace"], r["user_id"]), []).append(i)
    return {
        key: ({c: [rows[i][c] for i in idx] for c in COLUMNS}, picked(vectors, idx)) for key, idx in grouped.items()
    }


def duplicate_losers(rows: Sequence[EngineRow]) -> list[tuple[str, int]]:
    """``(id, _rowid)`` of every row but one per id: the most recently updated stays, then the first stored.

    Every process decides alike from the same rows, so two cleaning at once never delete both copies.
    """

    def rank(r: EngineRow) -> tuple[bool, datetime | None, int]:
        return (r["updated_at"] is not None, r["updated_at"], -int(r["_rowid"]))

    best: dict[str, int] = {}
    losers: list[tuple[str, int]] = []
    for r in sorted(rows, key=rank):
        if r["id"] in best:
            losers.append((r["id"], best[r["id"]]))
        best[r["id"]] = int(r["_rowid"])
    return losers
