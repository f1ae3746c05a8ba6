"""The read side: ``create_memory_capability()`` and the ``MemoryCapability`` it returns."""

from __future__ import annotations

from ._blocking_capability import BlockingMemoryCapability
from ._capability import MemoryCapability, read_tools
from ._create import MemoryProvider, create_memory_capability

__all__ = ["BlockingMemoryCapability", "MemoryCapability", "MemoryProvider", "create_memory_capability", "read_tools"]
