"""The system's write entry points check their contexts' access, then run inside the store's erasure fence
(``Store.fenced``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from .._blocking import run_blocking
from .._records import MemoryContext

__all__ = ["fenced"]

P = ParamSpec("P")
R = TypeVar("R")


def fenced(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """``method`` inside its object's store's erasure fence: a user erased while it runs is never written
    back by it (its next write of the user raises UserErasedError instead). First, every context among its
    arguments must pass the access check (AccessDeniedError: nothing written)."""

    @functools.wraps(method)
    async def run(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, MemoryContext):
                await run_blocking(self.capability.access.check, arg)
        async with self.store.fenced():
            return await method(self, *args, **kwargs)

    return run
