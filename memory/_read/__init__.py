"""The read side: ``create_memory_capability()`` and the ``MemoryCapability`` it returns."""

from __future__ import annotations

from ._blocking_api import BlockingCapability
from ._capability import MemoryCapability
from ._create import MemoryProvider, create_memory_capability

__all__ = ["BlockingCapability", "MemoryCapability", "MemoryProvider", "create_memory_capability"]
