"""Ranking: relevance gates, priors only reorder.

Vector and full-text candidates are fused by a weighted sum of normalised scores (measured to
beat reciprocal-rank fusion on conversational memory). Candidates with no keyword match and a
low cosine are dropped; confidence, recency and tier weights then reorder what is left, within
a band small enough that they cannot lift an unrelated memory over a related one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from .decay import effective_confidence, recency, turn_decay
from .options import RecallOptions, SemanticOptions, WorkingOptions
from .records import Digest, Edge, Episode, Fact, MemoryItem, RankedMemoryItem, Turn, WorkingEntry
from .subjects import USER

__all__ = ["Candidate", "edge_to_memory_item", "named_subjects", "rank", "rank_without_cue", "to_memory_item"]

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A memory found by vector or full-text search, before fusion."""

    item: MemoryItem
    similarity: float
    lexical: float
    via_graph: float = 0.0


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def edge_to_memory_item(edge: Edge, now: datetime, *, half_life: SemanticOptions | None = None) -> MemoryItem:
    """An edge of the relations graph as a memory item of tier "relation"."""
    opts = half_life or SemanticOptions()
    return MemoryItem(
        id=edge.id,
        tier="relation",
        subject=edge.source,
        text=edge.text,
        confidence=effective_confidence(edge, now, half_life=opts.half_life),
        created_at=edge.created_at,
        updated_at=edge.updated_at,
        provenance=edge.provenance,
        metadata={"source": edge.source, "relation": edge.relation, "target": edge.target},
    )


def to_memory_item(
    record: WorkingEntry | Episode | Fact | Digest | Edge | Turn,
    now: datetime,
    *,
    semantic: SemanticOptions | None = None,
    working: WorkingOptions | None = None,
    session_seq: int = 0,
) -> MemoryItem:
    """The uniform view of a record, with its confidence as it stands ``now``."""
    if isinstance(record, Edge):
        return edge_to_memory_item(record, now, half_life=semantic)
    if isinstance(record, Turn):
        return MemoryItem(
            id=record.id,
            tier="episodic",
            subject=record.subject,
            text=record.text,
            confidence=0.5,
            created_at=record.created_at,
            updated_at=record.created_at,
            provenance=(record.id,),
            metadata={"kind": "turn", "session_id": record.session_id, "seq": record.seq, **record.metadata},
        )
    if isinstance(record, WorkingEntry):
        half = (working or WorkingOptions()).salience_half_life
        return MemoryItem(
            id=record.id,
            tier="working",
            subject=record.subject,
            text=record.text,
            confidence=turn_decay(record.salience, session_seq - record.seq, half_life_turns=half),
            created_at=record.created_at,
            updated_at=record.updated_at,
            provenance=record.provenance,
            metadata={"kind": record.kind, "session_id": record.session_id, **record.metadata},
        )
    if isinstance(record, Episode):
        return MemoryItem(
            id=record.id,
            tier="episodic",
            subject=USER if USER in record.subjects or not record.subjects else record.subjects[0],
            text=record.summary,
            confidence=record.salience,
            created_at=record.created_at,
            updated_at=record.updated_at,
            provenance=record.provenance,
            metadata={
                "session_id": record.session_id,
                "subjects": list(record.subjects),
                "started_at": _iso(record.started_at),
                "ended_at": _iso(record.ended_at),
                **record.metadata,
            },
        )
    if isinstance(record, Fact):
        opts = semantic or SemanticOptions()
        return MemoryItem(
            id=record.id,
            tier="semantic",
            subject=record.subject,
            text=record.text,
            confidence=effective_confidence(record, now, half_life=opts.half_life),
            created_at=record.created_at,
            updated_at=record.updated_at,
            provenance=record.provenance,
            metadata={
                "status": record.status,
                "reinforcements": record.reinforcements,
                "valid_from": _iso(record.valid_from),
                "valid_to": _iso(record.valid_to),
                "superseded_by": record.superseded_by,
                **record.metadata,
            },
        )
    return MemoryItem(
        id=record.id,
        tier="digest",
        subject=record.subject,
        text=record.text,
        confidence=1.0,
        created_at=record.created_at,
        updated_at=record.updated_at,
        provenance=record.provenance,
        metadata=dict(record.metadata),
    )


def named_subjects(cue: str, aliases: Mapping[str, str]) -> set[str]:
    """Subjects the cue may name: its words, hyphen-joined word pairs ("acme corp"), and aliases."""
    words = _NAME.findall(cue.lower())
    named = {w for w in words if len(w) > 1} | {f"{a}-{b}" for a, b in zip(words, words[1:])}
    named |= {subject for alias, subject in aliases.items() if alias in named or alias in cue.lower()}
    return named


def _minmax(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-9:
        return np.where(values > 0, 1.0, 0.0)
    return (values - low) / (high - low)


def rank(
    candidates: Sequence[Candidate],
    *,
    now: datetime,
    options: RecallOptions,
    named: Iterable[str] = (),
    limit: int,
) -> list[RankedMemoryItem]:
    """Fuse, gate and order candidates; the best ``limit`` come back."""
    if not candidates:
        return []
    sims = np.array([c.similarity for c in candidates], dtype=np.float64)
    lex = np.array([c.lexical for c in candidates], dtype=np.float64)
    lex_norm = lex / lex.max() if lex.max() > 0 else np.zeros_like(lex)
    dense_norm = _minmax(sims)
    total = options.dense_weight + options.lexical_weight or 1.0
    relevance = (options.dense_weight * dense_norm + options.lexical_weight * lex_norm) / total
    # The gate: a keyword match or a cosine that means "related" on its own, and not far behind the best.
    plausible = ((lex > 0) | (sims >= options.min_similarity)) & (relevance >= options.min_relevance * relevance.max())
    # Memories reached through the relations graph are plausible by that link, at a fixed relevance floor.
    graph_floor = np.array([c.via_graph for c in candidates], dtype=np.float64)
    plausible |= graph_floor > 0
    relevance = np.maximum(relevance, graph_floor)
    named_set = set(named)
    ranked: list[RankedMemoryItem] = []
    for i, cand in enumerate(candidates):
        if not plausible[i]:
            continue
        item = cand.item
        fresh = recency(item.updated_at, now, half_life=options.recency_half_life)
        prior = (options.tier_weights.get(item.tier, 0.5) + item.confidence + fresh) / 3.0
        boost = options.subject_boost if item.subject in named_set else 0.0
        score = float(relevance[i]) * (1.0 - options.prior_weight + options.prior_weight * prior) + boost * float(
            relevance[i]
        )
        ranked.append(RankedMemoryItem(**item.model_dump(), score=score, relevance=float(relevance[i])))
    ranked.sort(key=lambda r: (-r.score, r.id))
    return ranked[:limit]


def rank_without_cue(items: Sequence[MemoryItem], *, now: datetime, options: RecallOptions, limit: int) -> list[RankedMemoryItem]:
    """No cue: the most recent and salient memories first."""
    ranked = []
    for item in items:
        fresh = recency(item.updated_at, now, half_life=options.recency_half_life)
        score = options.tier_weights.get(item.tier, 0.5) * (0.5 * fresh + 0.5 * item.confidence)
        ranked.append(RankedMemoryItem(**item.model_dump(), score=score, relevance=0.0))
    ranked.sort(key=lambda r: (-r.score, r.id))
    return ranked[:limit]
