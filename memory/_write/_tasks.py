"""Sibling coroutines run as one: the first failure stops the rest and surfaces as itself."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["together"]

T = TypeVar("T")


async def together(*works: Coroutine[Any, Any, T]) -> list[T]:
    """Each work's result, in the order given, from one ``asyncio.TaskGroup``.

    The group cancels the siblings of the first failure and waits for them (work in ``settled``
    lands first). It raises an ``ExceptionGroup``; callers and their tests expect the failure's own
    type (a ``ModelError``, an ``InvalidArgumentError``), so the first one is raised unwrapped.
    """
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(work) for work in works]
    except ExceptionGroup as failures:
        raise _first(failures) from None
    return [task.result() for task in tasks]


def _first(failures: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first failure, the way the group met them (a nested group only if a work raised one)."""
    first = failures.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first
