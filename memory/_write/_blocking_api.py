"""``BlockingMemorySystem``: the type of ``MemorySystem.blocking()``, each async method's sync twin.

The read methods are the capability's (:class:`~tiermem.memory._read.BlockingCapability`), as the system
delegates them; ``tests/memory/test_blocking_types.py`` checks that the two list every public async
method of the system with the same parameters and result, so they cannot drift.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from .._govern import EraseReport, ForgetReport, ImportReport, Source
from .._read import BlockingCapability
from .._records import Episode, Fact, MemoryContext
from .._results import CaptureResult, ConsolidationResult, DigestResult, RetryReport, SessionResult
from ._conversation_import import OBSERVE_WINDOW, Conversation, HistoryProgress, HistoryReport

__all__ = ["BlockingMemorySystem"]


class BlockingMemorySystem(BlockingCapability, Protocol):
    """The write side's sync facade: ``system(...).blocking()``; each method blocks until its async twin is done."""

    def run_worker(
        self,
        stop: asyncio.Event,
        *,
        jobstore_url: str | None = None,
        run_now: bool = False,
        grace: float = 30.0,
        **intervals: Any,
    ) -> int: ...

    def capture(
        self,
        ctx: MemoryContext,
        messages: Sequence[Mapping[str, Any] | Any],
        *,
        metadata: Mapping[str, Any] | None = None,
        at: datetime | None = None,
        idempotency_key: str | None = None,
        background: bool = False,
    ) -> CaptureResult: ...

    def flush(self) -> None: ...

    def aclose(self) -> None: ...

    def import_conversations(
        self,
        ctx: MemoryContext,
        conversations: Iterable[Conversation | Mapping[str, Any]],
        *,
        concurrency: int = 8,
        on_progress: Callable[[HistoryProgress], None] | None = None,
        consolidate: bool = True,
        observe_window: int = OBSERVE_WINDOW,
    ) -> HistoryReport: ...

    def capture_from_items(
        self, ctx: MemoryContext, items: Sequence[Mapping[str, Any] | Sequence[Mapping[str, Any]]]
    ) -> list[CaptureResult]: ...

    def end_session(self, ctx: MemoryContext, session_id: str | None = None) -> SessionResult: ...

    def end_sessions(self, ctx: MemoryContext, session_ids: Sequence[str]) -> list[SessionResult]: ...

    def consolidate(
        self, ctx: MemoryContext, *, batch_size: int = 4, limit: int | None = None
    ) -> ConsolidationResult: ...

    def digest(self, ctx: MemoryContext) -> DigestResult: ...

    def update(self, ctx: MemoryContext, id: str, *, text: str | None = None, subject: str | None = None) -> Fact: ...

    def pin(self, ctx: MemoryContext, id: str) -> Fact | Episode: ...

    def unpin(self, ctx: MemoryContext, id: str) -> Fact | Episode: ...

    def forget(self, ctx: MemoryContext, id: str, *, include_turns: bool = False) -> ForgetReport: ...

    def erase_user(self, ctx: MemoryContext) -> EraseReport: ...

    def import_(self, ctx: MemoryContext, source: Source) -> ImportReport: ...

    def fork(self, src: MemoryContext, dst: MemoryContext) -> ImportReport: ...

    def retry_pending(
        self, ctx: MemoryContext | None = None, *, include_parked: bool = False, due_only: bool = False
    ) -> RetryReport: ...
