"""A synchronous facade: the same async API driven from a private event loop thread."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

__all__ = ["Blocking", "run_blocking"]

P = ParamSpec("P")
T = TypeVar("T")


async def run_blocking(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a store or embedder call on a worker thread: each is a disk or network round trip.

    The one idiom for blocking work under ``async def``: nothing that reads the store, writes it or
    embeds runs on the event loop's thread.
    """
    return await asyncio.to_thread(fn, *args, **kwargs)


class _LoopThread:
    """One daemon thread running an event loop, shared by every facade."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def loop(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="tiermem-blocking", daemon=True).start()
                cls._loop = loop
            return cls._loop


class Blocking:
    """Wraps a capability or system: coroutine methods become plain calls, everything else passes through.

    >>> mem = create_memory_capability(store="./data").blocking()
    >>> mem.recall(ctx, "dinner")
    """

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                raise RuntimeError(f"{name}() from the blocking facade inside a running event loop: use await")
            future = asyncio.run_coroutine_threadsafe(attr(*args, **kwargs), _LoopThread.loop())
            return future.result()

        return call

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._target)))
