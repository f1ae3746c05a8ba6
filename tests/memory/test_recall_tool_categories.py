"""The recall tool's ``categories`` (issue 35 item 1): the filter of ``recall(categories=)``, limited to the memory
policy's vocabulary (a label outside it is refused before anything is read), through the tool table and MCP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from tiermem import InvalidArgumentError, MemoryContext, MemorySystem, create_memory_capability, system
from tiermem.memory._cli._mcp import McpConfig, build_server
from tiermem.memory._read import read_tools
from tiermem.memory._tools import RECALL, RecallArguments
from tiermem.memory.testing import FrozenClock, HashingEmbedder

LABELS = ["work", "health", "family"]
SAID = "I am allergic to peanuts. I work at Acme Corp as an engineer. My wife Moni loves painting."
QUERY = "peanuts Acme Corp engineer Moni painting"


async def _labelled_memory(
    store: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> MemorySystem:
    mem = system(model="rules", store=store, embedder=embedder, clock=clock, categories=LABELS, semantic=True)
    await mem.capture(ctx, [{"role": "user", "content": SAID}, {"role": "assistant", "content": "Noted."}])
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    return mem


def _call(arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": "memory_recall", "arguments": json.dumps(arguments)}
    return {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": function}]}


async def _tool_call(mem: MemorySystem, ctx: MemoryContext, arguments: dict[str, Any]) -> dict[str, Any]:
    (answer,) = await mem.tools(ctx).execute(_call(arguments))
    envelope: dict[str, Any] = json.loads(answer["content"])
    return envelope


@pytest.mark.parametrize(
    ("categories", "labels"),
    [(["health"], {"health"}), (["Work ", "family"], {"work", "family"})],
    ids=["one-label", "normalised-any-of"],
)
async def test_the_recall_tool_filters_as_recall_does(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    categories: list[str],
    labels: set[str],
) -> None:
    mem = await _labelled_memory(store_path, embedder, clock, ctx)

    envelope = await _tool_call(mem, ctx, {"query": QUERY, "categories": categories, "verbose": True})
    direct = await mem.recall(ctx, QUERY, categories=categories)

    assert envelope["ok"], envelope
    results = envelope["results"]
    assert results and [r["id"] for r in results] == [i.id for i in direct]
    assert all(set(r["metadata"]["categories"]) & labels for r in results)
    unfiltered = await _tool_call(mem, ctx, {"query": QUERY})
    assert len(unfiltered["results"]) > len(results)  # the filter left something out


@pytest.mark.parametrize(
    ("categories", "message"),
    [
        (["gossip"], "'work', 'health' or 'family'"),
        (["work", "hobby"], "'work', 'health' or 'family'"),
        ([], "at least 1 item"),
        ("work", "valid list"),
        ([""], "1 to 40 characters"),
    ],
    ids=["outside-the-vocabulary", "one-outside", "empty", "a-string", "empty-label"],
)
async def test_a_bad_category_is_a_clear_error(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext, categories: Any, message: str
) -> None:
    mem = await _labelled_memory(store_path, embedder, clock, ctx)

    envelope = await _tool_call(mem, ctx, {"query": QUERY, "categories": categories})

    assert envelope["ok"] is False and envelope["results"] == []
    assert "invalid arguments for memory_recall" in envelope["error"] and message in envelope["error"]


async def test_the_handler_refuses_a_label_outside_the_vocabulary_whatever_model_validated_it(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    """REST validates its body with the table's model (any label): the tool itself still refuses."""
    mem = await _labelled_memory(store_path, embedder, clock, ctx)
    tool = read_tools(mem.capability, ctx)[RECALL.name]

    with pytest.raises(InvalidArgumentError, match=r"\['gossip'\] are not among this memory's categories"):
        await tool.run(RecallArguments(query=QUERY, categories=["gossip"]))


async def test_the_schema_lists_the_vocabulary_and_a_capability_alone_takes_any_label(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = await _labelled_memory(store_path, embedder, clock, ctx)
    alone = create_memory_capability(store=store_path, embedder=embedder, clock=clock, semantic=True)

    offered = mem.tools(ctx)[0].parameters["properties"]["categories"]
    plain = alone.tools(ctx)[0]
    found = await plain.call({"query": QUERY, "categories": ["work"]})
    unknown = await plain.call({"query": QUERY, "categories": ["gossip"]})

    assert offered["anyOf"][0]["items"]["enum"] == LABELS
    assert "enum" not in json.dumps(plain.parameters["properties"]["categories"])
    assert found["ok"] and [r["categories"] for r in found["results"]] == ["work"]  # the working entry is flushed
    assert unknown["ok"] and unknown["results"] == []  # no vocabulary known: nothing carries that label


async def test_the_mcp_recall_tool_lists_and_filters_by_category(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = await _labelled_memory(store_path, embedder, clock, ctx)
    config = McpConfig(store=store_path, user_id=ctx.user_id)
    async with Client(build_server(config, capability=mem.capability)) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        health = await client.call_tool("recall", {"query": QUERY, "categories": ["health"]})
        refused = await client.call_tool("recall", {"query": QUERY, "categories": ["gossip"]})

    assert listed["recall"].input_schema["properties"]["categories"]["anyOf"][0]["items"]["enum"] == LABELS
    assert health.is_error is False and health.structured_content is not None
    assert [r["text"] for r in health.structured_content["results"]] == ["The user is allergic to peanuts."]
    assert refused.is_error is True and refused.structured_content is not None
    assert "'work', 'health' or 'family'" in refused.structured_content["error"]
