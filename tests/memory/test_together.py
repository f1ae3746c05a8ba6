"""``together``: sibling coroutines in one TaskGroup, the first failure raised as itself."""

from __future__ import annotations

import asyncio

import pytest

from tiermem.memory._write._tasks import together


async def _value(value: int, delay: float) -> int:
    await asyncio.sleep(delay)
    return value


async def _fails(exc: Exception, delay: float) -> int:
    await asyncio.sleep(delay)
    raise exc


def test_results_keep_the_given_order() -> None:
    assert asyncio.run(together(_value(1, 0.02), _value(2, 0.0), _value(3, 0.01))) == [1, 2, 3]


def test_no_work_is_no_results() -> None:
    assert asyncio.run(together()) == []


@pytest.mark.parametrize(
    "exc",
    [pytest.param(ValueError("bad"), id="value-error"), pytest.param(KeyError("k"), id="key-error")],
)
def test_first_failure_surfaces_unwrapped_and_siblings_are_cancelled(exc: Exception) -> None:
    cancelled: list[bool] = []

    async def slow() -> int:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return 0

    async def run() -> None:
        await together(slow(), _fails(exc, 0.0), _fails(RuntimeError("later"), 0.05))

    with pytest.raises(type(exc)) as raised:
        asyncio.run(run())
    assert raised.value is exc
    assert cancelled == [True]
