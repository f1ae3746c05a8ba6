"""Delegation by name: a class answers a method with the same method of a part it holds.

The facade's classes are composed, not inherited (``tests/memory/test_facade.py``): a class that has
grown parts keeps its methods by naming each in its body, ``journal = delegate("session_log",
SessionLog.journal)``, so callers see the one class with the part's signature and docstring.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Concatenate, ParamSpec, TypeVar

__all__ = ["delegate", "delegate_async"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")  # the part's class; the owner is any class holding one as ``self.<part>``


def delegate(part: str, method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[object, P], R]:
    """``method`` of the part held as ``self.<part>``: same signature and docstring."""

    @functools.wraps(method)
    def delegated(self: object, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(getattr(self, part), *args, **kwargs)

    return delegated


def delegate_async(
    part: str, method: Callable[Concatenate[S, P], Awaitable[R]]
) -> Callable[Concatenate[object, P], Coroutine[object, None, R]]:
    """:func:`delegate` for a coroutine method: the delegate is a coroutine function too."""

    @functools.wraps(method)
    async def delegated(self: object, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await method(getattr(self, part), *args, **kwargs)

    return delegated
