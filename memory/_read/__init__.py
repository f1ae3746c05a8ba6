"""The read side: ``create_memory_capability()`` and the ``MemoryCapability`` it returns."""

from __future__ import annotations

from ._blocking_capability import BlockingMemoryCapability
from ._capability import MemoryCapability, read_tools
from ._create import MemoryProvider, create_memory_capability
from ._graph_data import graph_data

__all__ = [
    "BlockingMemoryCapability",
    "MemoryCapability",
    "MemoryProvider",
    "create_memory_capability",
    "graph_data",
    "read_tools",
]
