"""The tiers over the store: working, episodic, semantic and digest records, the session log, fact lineage,
and records as memory items.
"""

from __future__ import annotations

from ._lineage import Lineage, MetadataFilter, checked_where
from ._memory_items import built, edge_to_memory_item, marked_past, to_memory_item
from ._tiers import Tiers, checked_context, embedded_text, embedded_vectors, scope

__all__ = [
    "Lineage",
    "MetadataFilter",
    "Tiers",
    "built",
    "checked_context",
    "checked_where",
    "edge_to_memory_item",
    "embedded_text",
    "embedded_vectors",
    "marked_past",
    "scope",
    "to_memory_item",
]
