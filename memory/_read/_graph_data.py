"""A user's relations graph as plain data: what ``tiermem graph`` draws and the web inspector plots."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .._items import MemoryItem

__all__ = ["graph_data"]


def graph_data(subjects: Iterable[str], edges: Sequence[MemoryItem]) -> dict[str, object]:
    """The graph as JSON values: ``subjects`` and the endpoints of ``edges`` (relation items) as the nodes,
    and each edge with its id and whether it still holds."""
    ends = [(str(e.metadata["source"]), str(e.metadata["relation"]), str(e.metadata["target"])) for e in edges]
    return {
        "nodes": sorted({*subjects, *(s for s, _, _ in ends), *(t for _, _, t in ends)}),
        "edges": [
            {"id": e.id, "source": s, "relation": r, "target": t, "current": e.metadata.get("current") is not False}
            for e, (s, r, t) in zip(edges, ends, strict=True)
        ],
    }
