"""Observation off the agent's response path: a bounded in-process queue drained by a few tasks.

``capture(..., background=True)`` returns once the turn is durably journaled; the observer's model
call runs here. The queue is bounded, so a producer faster than the model waits at ``submit``
(backpressure) instead of growing memory without limit. Nothing is lost if the process dies with
turns still queued: they are journaled as pending, and ``retry_pending()`` (the scheduled retry
job) observes them. ``drain()`` waits for the queue; ``close()`` drains it and stops the tasks.

A turn is observed in the context it was queued from, so within the erasure fence of its capture
(``Store.fenced``): a user erased after the capture never has the observation written back, and
``drop`` (``erase_user``) discards their turns still queued before their model call.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from .._errors import ConfigurationError, UserErasedError
from .._records import MemoryContext, Turn

__all__ = ["BackgroundObserver"]

log = logging.getLogger(__name__)

Observe = Callable[[MemoryContext, Turn], Coroutine[Any, Any, object]]
_Item = tuple[int, MemoryContext, Turn, contextvars.Context]


class BackgroundObserver:
    """``workers`` tasks observing queued turns; at most ``maxsize`` turns wait."""

    def __init__(self, observe: Observe, *, maxsize: int = 256, workers: int = 2) -> None:
        if maxsize < 1 or workers < 1:
            raise ConfigurationError("the background queue needs maxsize >= 1 and workers >= 1")
        self._observe = observe
        self._maxsize = maxsize
        self._workers = workers
        self._queue: asyncio.Queue[_Item] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unfinished = 0
        self._submitted = 0
        self._dropped: dict[tuple[str, str], int] = {}  # per user: turns queued up to this number are dropped

    @property
    def pending(self) -> int:
        """Turns queued or being observed."""
        return self._unfinished

    def _ensure(self) -> asyncio.Queue[_Item]:
        loop = asyncio.get_running_loop()
        if self._queue is None or self._loop is not loop:  # first use, or a new event loop (asyncio.run again)
            if self._queue is not None and self._queue.qsize():
                log.warning("%d queued observations left behind on a closed loop: retry_pending() observes them",
                            self._queue.qsize())  # fmt: skip
            self._loop, self._queue, self._unfinished = loop, asyncio.Queue(self._maxsize), 0
            self._tasks = [loop.create_task(self._work(self._queue)) for _ in range(self._workers)]
        return self._queue

    async def submit(self, ctx: MemoryContext, turn: Turn) -> None:
        """Queue a journaled turn for observation; waits while the queue is full."""
        queue = self._ensure()
        self._unfinished += 1
        self._submitted += 1
        await queue.put((self._submitted, ctx, turn, contextvars.copy_context()))

    def drop(self, ctx: MemoryContext) -> None:
        """Discard the user's turns queued so far (their user is being erased); turns queued later stay."""
        self._dropped[(ctx.namespace, ctx.user_id)] = self._submitted

    async def _work(self, queue: asyncio.Queue[_Item]) -> None:
        while True:
            number, ctx, turn, context = await queue.get()
            try:
                if number <= self._dropped.get((ctx.namespace, ctx.user_id), 0):
                    continue
                # In the capture's context (its erasure fence); never raises for model failures: the turn stays pending
                await asyncio.get_running_loop().create_task(self._observe(ctx, turn), context=context)
            except UserErasedError:
                log.info("turn %s not observed: its user was erased after it was captured", turn.id)
            except Exception:  # a store outage: the turn stays journaled as pending for retry_pending
                log.exception("background observation of turn %s failed; retry_pending() will redo it", turn.id)
            finally:
                self._unfinished -= 1
                queue.task_done()

    async def drain(self) -> None:
        """Wait until every queued turn has been observed (or deferred)."""
        if self._queue is not None and self._loop is asyncio.get_running_loop():
            await self._queue.join()

    async def close(self) -> None:
        """Drain the queue, then stop the tasks."""
        await self.drain()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks, self._queue, self._loop = [], None, None
