"""The relations graph widens recall's pool: what a named entity is linked to, though no search found it.

Entities the cue names bring their edges and their one-hop neighbours' facts in, at a fixed relevance
floor: enough to be recalled, below what the cue matches directly.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from .._items import MemoryItem
from .._records import Edge, Fact, MemoryContext, StoredRecord
from .._relations import Relations
from .._store import Where
from .._tiers import Tiers, embedded_text, scope, to_memory_item
from ._ranking import Candidate
from ._relevance import calibration

__all__ = ["through_graph"]

_EDGES = 10  # edges per named entity admitted
_FACTS = 8  # neighbour facts admitted
# Relevance given to what only the graph links to the cue: enough to be recalled, below direct matches.
_EDGE_FLOOR = 0.4
_FACT_FLOOR = 0.35


def through_graph(
    tiers: Tiers,
    relations: Relations,
    ctx: MemoryContext,
    query_vector: np.ndarray,
    named: set[str],
    now: datetime,
    found: dict[tuple[str, str], Candidate],
) -> None:
    """Add to ``found`` the edges of the entities ``named`` in ``ctx``'s graph and their neighbours' facts."""
    graph = relations.graph(ctx)
    entities = sorted(n for n in named if n in graph)
    if not entities:
        return
    similarity = calibration(tiers.embedder).similarity
    edges = {e.id: e for entity in entities for e in graph.neighbours(entity)[:_EDGES]}
    if edges:
        sims = similarity(query_vector, tiers.embed([embedded_text(e) for e in edges.values()]))
        for edge, sim in zip(edges.values(), sims, strict=True):
            linked = Candidate(item=_item(tiers, edge, now), similarity=float(sim), lexical=0.0, via_graph=_EDGE_FLOOR)
            found.setdefault(("edges", edge.id), linked)
    neighbours = sorted({n for entity in entities for n in graph.neighbour_nodes(entity)} - set(entities))
    if not neighbours:
        return
    where = Where(eq=scope(ctx), isin={"status": ["active"], "subject": neighbours})
    for hit in tiers.store.vector_search("facts", query_vector, where, limit=_FACTS):
        key = ("facts", hit.record.id)
        old = found.get(key)
        found[key] = Candidate(
            item=old.item if old else _item(tiers, hit.record, now),
            similarity=float(similarity(query_vector, hit.vector)[0]),
            lexical=old.lexical if old else 0.0,
            via_graph=_FACT_FLOOR,
        )


def _item(tiers: Tiers, record: StoredRecord, now: datetime) -> MemoryItem:
    if not isinstance(record, Edge | Fact):  # the edges and facts tables hold nothing else
        raise TypeError(f"{type(record).__name__.lower()} {record.id} is not an edge or a fact")
    return to_memory_item(record, now, semantic=tiers.semantic, working=tiers.working)
