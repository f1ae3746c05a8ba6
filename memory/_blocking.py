"""A synchronous facade: the same async API driven from a private event loop thread."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from ._errors import SyncInEventLoopError
from ._tools import MemoryTool, Toolset

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


def _sync(value: object) -> object:
    """Tools handed out by a blocking facade are blocking too (``tools(ctx).execute(message)``)."""
    return Blocking(value) if isinstance(value, (Toolset, MemoryTool)) else value


class Blocking:
    """Wraps a capability, a system or a toolset: coroutine methods become plain calls, the tools they
    hand out are wrapped the same way, everything else passes through.

    >>> mem = create_memory_capability(store="./data").blocking()
    >>> mem.recall(ctx, "dinner")
    >>> mem.tools(ctx).execute(response.choices[0].message)
    """

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr
        if not inspect.iscoroutinefunction(attr):

            @functools.wraps(attr)
            def plain(*args: object, **kwargs: object) -> object:
                return _sync(attr(*args, **kwargs))

            return plain

        @functools.wraps(attr)
        def call(*args: object, **kwargs: object) -> object:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:  # blocking here would deadlock the loop (or stall every other task on it)
                raise SyncInEventLoopError(
                    f"{name}() of the blocking facade was called inside a running event loop "
                    f"(a notebook or an async app): use `await {name}(...)` on the async object instead"
                )
            future = asyncio.run_coroutine_threadsafe(attr(*args, **kwargs), _LoopThread.loop())
            return _sync(future.result())

        return call

    def __getitem__(self, index: Any) -> Any:
        return _sync(self._target[index])

    def __len__(self) -> int:
        return len(self._target)

    def __iter__(self) -> Any:
        return (_sync(item) for item in self._target)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._target)))
