"""What the scheduled jobs use of a memory system: the protocol ``MemorySystem`` satisfies.

The jobs name this protocol, not the class, so the composition root (``tiermem.memory._write``) can
start them without the jobs importing it back.
"""

from __future__ import annotations

from typing import Protocol

from tiermem.memory._clock import Clock
from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._read import MemoryCapability
from tiermem.memory._records import MemoryContext
from tiermem.memory._relations import Relations
from tiermem.memory._results import ConsolidationResult, DigestResult, RetryReport, SessionResult
from tiermem.memory._store import Store
from tiermem.memory._tiers import Tiers
from tiermem.pipelines import StageModel

__all__ = ["MaintainedSystem"]


class MaintainedSystem(Protocol):
    """A memory system the jobs keep: its parts, and the pipeline steps the jobs run on schedule."""

    @property
    def capability(self) -> MemoryCapability: ...

    @property
    def tiers(self) -> Tiers: ...

    @property
    def relations(self) -> Relations: ...

    @property
    def stages(self) -> StageModel: ...

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def policy(self) -> MemoryPolicy | None:
        """The system's memory policy: what a scheduled digest or compaction may not restate."""
        ...

    async def end_session(self, ctx: MemoryContext, session_id: str | None = None) -> SessionResult: ...

    async def consolidate(
        self, ctx: MemoryContext, *, batch_size: int = 4, limit: int | None = None
    ) -> ConsolidationResult: ...

    async def digest(self, ctx: MemoryContext) -> DigestResult: ...

    async def retry_pending(
        self, ctx: MemoryContext | None = None, *, include_parked: bool = False, due_only: bool = False
    ) -> RetryReport: ...
