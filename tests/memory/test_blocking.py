"""The synchronous facade: plain calls from sync code, a clear refusal inside a running loop."""

from __future__ import annotations

import asyncio

import pytest

from tiermem import Blocking, Fact, HashingEmbedder, InvalidArgumentError, MemoryContext, create_memory_capability
from tiermem.memory.testing import FrozenClock


@pytest.fixture
def blocking(store_path: str, clock: FrozenClock) -> Blocking:
    return create_memory_capability(store=store_path, embedder=HashingEmbedder(256), clock=clock).blocking()


def test_blocking_adds_and_recalls_from_sync_code(blocking: Blocking, ctx: MemoryContext) -> None:
    fact = blocking.add_semantic_fact(ctx, "Moni is allergic to shellfish.", subject="Moni")
    assert isinstance(fact, Fact)
    found = blocking.recall(ctx, "shellfish allergy")
    assert [i.id for i in found] == [fact.id]
    assert blocking.facts(ctx) == [fact]
    assert "shellfish" in blocking.format_context(ctx, "shellfish")


def test_blocking_passes_plain_attributes_through(blocking: Blocking) -> None:
    assert blocking.enabled_tiers() == ["working", "episodic", "semantic", "digest"]
    assert isinstance(blocking.tools(MemoryContext(user_id="u-1")).schemas(), list)
    assert "recall" in dir(blocking)


def test_blocking_raises_library_errors_unchanged(blocking: Blocking, ctx: MemoryContext) -> None:
    with pytest.raises(InvalidArgumentError):
        blocking.recall(ctx, "x", limit=0)


def test_two_facades_share_one_loop(store_path: str, clock: FrozenClock, ctx: MemoryContext) -> None:
    first = create_memory_capability(store=store_path, embedder=HashingEmbedder(256), clock=clock).blocking()
    second = create_memory_capability(store=store_path, embedder=HashingEmbedder(256), clock=clock).blocking()
    fact = first.add_semantic_fact(ctx, "The user plays tennis.")
    assert second.facts(ctx) == [fact]


async def test_blocking_refuses_inside_a_running_loop(blocking: Blocking, ctx: MemoryContext) -> None:
    with pytest.raises(RuntimeError, match="running event loop: use await"):
        blocking.recall(ctx, "shellfish")


async def test_refused_call_does_not_run(blocking: Blocking, ctx: MemoryContext) -> None:
    with pytest.raises(RuntimeError):
        blocking.add_semantic_fact(ctx, "This must not be written.")
    assert await asyncio.to_thread(lambda: blocking.facts(ctx)) == []


async def test_blocking_works_from_a_worker_thread_of_a_running_loop(blocking: Blocking, ctx: MemoryContext) -> None:
    fact = await asyncio.to_thread(blocking.add_semantic_fact, ctx, "The user plays tennis.")
    assert await asyncio.to_thread(blocking.recall, ctx, "tennis") != []
    assert (await asyncio.to_thread(blocking.facts, ctx)) == [fact]
