"""LangMem's own memory tools over TiermemStore: the tools an agent calls to manage and search its memories,
run as LangMem builds them (``create_manage_memory_tool``, ``create_search_memory_tool``), given the store
directly and inside a LangGraph graph through ``get_store()``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langmem import create_manage_memory_tool, create_search_memory_tool

from tiermem import HashingEmbedder, MemoryContext, MemorySystem, TiermemStore, system

NAMESPACE = ("memories", "{user_id}")  # LangMem's documented shape: one namespace per user
CONFIG = {"configurable": {"user_id": "alice"}}


@pytest.fixture
def mem(tmp_path: Path) -> MemorySystem:
    return system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256))


@pytest.fixture
def store(mem: MemorySystem) -> TiermemStore:
    return TiermemStore(mem, user=1)


def _found(result: Any) -> list[dict[str, Any]]:
    return list(json.loads(result) if isinstance(result, str) else result)


async def test_langmem_tools_create_search_update_and_delete_through_tiermem(
    store: TiermemStore, mem: MemorySystem
) -> None:
    manage = create_manage_memory_tool(NAMESPACE, store=store)
    search = create_search_memory_tool(NAMESPACE, store=store)

    created = await manage.ainvoke({"content": "Alice is allergic to shellfish.", "action": "create"}, CONFIG)
    key = created.split()[-1]  # "created memory <id>"
    [hit] = _found(await search.ainvoke({"query": "shellfish allergy"}, CONFIG))
    assert (hit["key"], hit["namespace"], hit["value"]) == (
        key, ["memories", "alice"], {"content": "Alice is allergic to shellfish."}
    )  # fmt: skip
    alice = MemoryContext(user_id="alice")
    assert [f.text for f in await mem.facts(alice)] == ["Alice is allergic to shellfish."]  # a tiermem fact

    await manage.ainvoke({"content": "Alice is allergic to peanuts.", "action": "update", "id": key}, CONFIG)
    [hit] = _found(await search.ainvoke({"query": "allergic"}, CONFIG))
    assert hit["value"] == {"content": "Alice is allergic to peanuts."}
    assert "Alice is allergic to peanuts." in await mem.format_context(alice, "What is Alice allergic to?")

    await manage.ainvoke({"action": "delete", "id": key}, CONFIG)
    assert _found(await search.ainvoke({"query": "allergic"}, CONFIG)) == []
    assert not await mem.recall(alice, "allergic peanuts")


async def test_langmem_tools_read_the_store_a_graph_was_compiled_with(store: TiermemStore, mem: MemorySystem) -> None:
    manage = create_manage_memory_tool(NAMESPACE)  # no store given: LangMem asks the graph (get_store())
    search = create_search_memory_tool(NAMESPACE)

    class State(TypedDict):
        said: str
        found: list[dict[str, Any]]

    async def remember(state: State) -> dict[str, Any]:
        await manage.ainvoke({"content": state["said"], "action": "create"})
        return {}

    async def look(state: State) -> dict[str, Any]:
        return {"found": _found(await search.ainvoke({"query": "cello"}))}

    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_node("look", look)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "look")
    graph.add_edge("look", END)
    app = graph.compile(store=store)

    for user in ("alice", "bob"):
        said = f"{user.title()} plays the cello."
        out = await app.ainvoke({"said": said, "found": []}, {"configurable": {"user_id": user}})
        assert [hit["value"]["content"] for hit in out["found"]] == [said]  # each user's own memory only
    assert [f.text for f in await mem.facts(MemoryContext(user_id="bob"))] == ["Bob plays the cello."]
