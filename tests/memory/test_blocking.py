"""The synchronous facade: plain calls from sync code, a clear refusal inside a running loop."""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path

import pytest

from tiermem import (
    Fact,
    HashingEmbedder,
    InvalidArgumentError,
    MemoryContext,
    SyncInEventLoopError,
    create_memory_capability,
    system,
)
from tiermem.memory._read._blocking_capability import BlockingMemoryCapability as Facade
from tiermem.memory.testing import FrozenClock


@pytest.fixture
def blocking(store_path: str, clock: FrozenClock) -> Facade:
    return create_memory_capability(store=store_path, embedder=HashingEmbedder(256), clock=clock).blocking()


def test_blocking_adds_and_recalls_from_sync_code(blocking: Facade, ctx: MemoryContext) -> None:
    fact = blocking.add_semantic_fact(ctx, "Moni is allergic to shellfish.", subject="Moni")
    assert isinstance(fact, Fact)
    found = blocking.recall(ctx, "shellfish allergy")
    assert [i.id for i in found] == [fact.id]
    assert blocking.facts(ctx) == [fact]
    assert "shellfish" in blocking.format_context(ctx, "shellfish")


def test_blocking_passes_plain_attributes_through(blocking: Facade) -> None:
    assert blocking.enabled_tiers() == ["working", "episodic", "semantic", "digest", "document"]
    assert isinstance(blocking.tools(MemoryContext(user_id="u-1")).schemas(), list)
    assert "recall" in dir(blocking)


def test_blocking_raises_library_errors_unchanged(blocking: Facade, ctx: MemoryContext) -> None:
    with pytest.raises(InvalidArgumentError):
        blocking.recall(ctx, "x", limit=0)


def test_two_facades_share_one_loop(store_path: str, clock: FrozenClock, ctx: MemoryContext) -> None:
    first = create_memory_capability(store=store_path, embedder=HashingEmbedder(256), clock=clock).blocking()
    second = create_memory_capability(store=store_path, embedder=HashingEmbedder(256), clock=clock).blocking()
    fact = first.add_semantic_fact(ctx, "The user plays tennis.")
    assert second.facts(ctx) == [fact]


async def test_blocking_refuses_inside_a_running_loop(blocking: Facade, ctx: MemoryContext) -> None:
    with pytest.raises(SyncInEventLoopError, match=r"running event loop.*use `await recall"):
        blocking.recall(ctx, "shellfish")


async def test_refusal_inside_a_loop_reaches_the_tools_too(blocking: Facade, ctx: MemoryContext) -> None:
    with pytest.raises(SyncInEventLoopError, match="await execute"):
        blocking.tools(ctx).execute({"tool_calls": []})


async def test_refused_call_does_not_run(blocking: Facade, ctx: MemoryContext) -> None:
    with pytest.raises(SyncInEventLoopError):
        blocking.add_semantic_fact(ctx, "This must not be written.")
    assert await asyncio.to_thread(lambda: blocking.facts(ctx)) == []


async def test_blocking_works_from_a_worker_thread_of_a_running_loop(blocking: Facade, ctx: MemoryContext) -> None:
    fact = await asyncio.to_thread(blocking.add_semantic_fact, ctx, "The user plays tennis.")
    assert await asyncio.to_thread(blocking.recall, ctx, "tennis") != []
    assert (await asyncio.to_thread(blocking.facts, ctx)) == [fact]


def test_blocking_tools_execute_tool_calls_from_sync_code(blocking: Facade, ctx: MemoryContext) -> None:
    blocking.add_semantic_fact(ctx, "Moni is allergic to shellfish.", subject="Moni")
    tools = blocking.tools(ctx)
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "memory_recall", "arguments": '{"query": "shellfish"}'},
            }
        ],
    }
    replies = tools.execute(message)
    assert [r["tool_call_id"] for r in replies] == ["c1"]
    envelope = json.loads(replies[0]["content"])
    assert envelope["ok"] and "shellfish" in envelope["results"][0]["text"]
    assert tools.get("memory_recall").call({"query": "shellfish"})["ok"]
    assert next(tool.name for tool in tools) == "memory_recall"
    assert tools[0].call({"query": "shellfish"})["ok"]


def test_every_async_method_has_a_sync_twin_with_the_same_signature(tmp_path: Path, clock: FrozenClock) -> None:
    mem = system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256), clock=clock)
    sync = mem.blocking()
    coroutines = [n for n in dir(mem) if not n.startswith("_") and inspect.iscoroutinefunction(getattr(mem, n))]
    assert {"capture", "recall", "format_context", "end_session", "consolidate", "digest"} <= set(coroutines)
    for name in coroutines:
        twin = getattr(sync, name)
        assert not inspect.iscoroutinefunction(twin), name
        assert inspect.signature(twin) == inspect.signature(getattr(mem, name)), name
