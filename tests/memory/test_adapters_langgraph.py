"""TiermemStore as LangGraph calls it: the BaseStore methods, and a real graph reading it through get_store()."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import InvalidNamespaceError, MatchCondition

from tiermem import HashingEmbedder, InvalidArgumentError, MemoryContext, MemorySystem, TiermemStore, system


@pytest.fixture
def mem(tmp_path: Path) -> MemorySystem:
    return system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256))


@pytest.fixture
def store(mem: MemorySystem) -> TiermemStore:
    return TiermemStore(mem, user=1)  # LangMem's ("memories", "{user_id}")


async def test_put_get_replace_and_delete(store: TiermemStore) -> None:
    ns = ("memories", "alice")
    await store.aput(ns, "food", {"content": "Alice is allergic to shellfish.", "tags": ["health"], "n": 1})
    first = await store.aget(ns, "food")
    assert first is not None
    assert (first.namespace, first.key) == (ns, "food")
    assert first.value == {"content": "Alice is allergic to shellfish.", "tags": ["health"], "n": 1}

    await store.aput(ns, "food", {"content": "Alice is allergic to peanuts."})
    second = await store.aget(ns, "food")
    assert second is not None and second.value == {"content": "Alice is allergic to peanuts."}
    assert second.created_at == first.created_at  # a put replaces the value, the item keeps its birth

    await store.aput(ns, "food", {"content": "Alice is allergic to peanuts.", "n": 2})  # same text, new value
    third = await store.aget(ns, "food")
    assert third is not None and third.value["n"] == 2
    assert len(await store.asearch(ns)) == 1

    await store.adelete(ns, "food")
    assert await store.aget(ns, "food") is None
    assert await store.aget(("memories", "alice"), "never-put") is None


async def test_items_are_pinned_facts_of_the_user_the_namespace_names(store: TiermemStore, mem: MemorySystem) -> None:
    await store.aput(("memories", "alice"), "k1", {"content": "Alice plays the cello."})
    alice, bob = MemoryContext(user_id="alice"), MemoryContext(user_id="bob")
    found = await mem.recall(alice, "cello")
    assert found and found[0].text == "Alice plays the cello." and found[0].tier == "semantic"
    assert [(f.id, f.pinned) for f in await mem.facts(alice)] == [(found[0].id, True)]  # the janitor leaves it
    assert not await mem.recall(bob, "cello")
    assert "Alice plays the cello." in await mem.format_context(alice, "Does Alice play the cello?")


async def test_search_ranks_filters_and_pages(store: TiermemStore) -> None:
    ns = ("memories", "alice")
    await store.aput(ns, "a", {"content": "Alice likes green tea in the morning.", "kind": "drink", "rank": 1})
    await store.aput(ns, "b", {"content": "Alice works at Acme as an engineer.", "kind": "work", "rank": 2})
    await store.aput(ns, "c", {"content": "Alice drinks coffee after lunch.", "kind": "drink", "rank": 3})
    await store.aput(("other", "alice"), "d", {"content": "Alice likes green tea too.", "kind": "drink"})

    ranked = await store.asearch(ns, query="green tea morning")
    assert ranked[0].key == "a" and ranked[0].score is not None
    assert {i.namespace for i in ranked} == {ns}

    drinks = await store.asearch(ns, filter={"kind": "drink"})
    assert sorted(i.key for i in drinks) == ["a", "c"]
    assert [i.key for i in await store.asearch(ns, filter={"rank": {"$gte": 2}, "kind": "drink"})] == ["c"]
    coffee = await store.asearch(ns, query="coffee", filter={"kind": {"$ne": "work"}})
    assert coffee[0].key == "c" and "b" not in {i.key for i in coffee}

    everything = await store.asearch(ns, limit=10)
    assert [i.key for i in everything] == ["c", "b", "a"]  # newest first
    assert [i.key for i in await store.asearch(ns, limit=1, offset=1)] == ["b"]


async def test_a_prefix_without_the_user_searches_every_user(store: TiermemStore) -> None:
    await store.aput(("memories", "alice"), "k", {"content": "Alice owns a red bicycle."})
    await store.aput(("memories", "bob"), "k", {"content": "Bob owns a blue bicycle."})
    found = await store.asearch(("memories",), query="bicycle")
    assert sorted(i.namespace for i in found) == [("memories", "alice"), ("memories", "bob")]


async def test_list_namespaces(store: TiermemStore) -> None:
    for ns in [("memories", "alice"), ("memories", "bob"), ("prefs", "alice", "ui"), ("prefs", "bob", "ui")]:
        await store.aput(ns, "k", {"content": f"an item of {'/'.join(ns)}"})
    assert await store.alist_namespaces(prefix=("memories",)) == [("memories", "alice"), ("memories", "bob")]
    assert await store.alist_namespaces(suffix=("ui",)) == [("prefs", "alice", "ui"), ("prefs", "bob", "ui")]
    assert await store.alist_namespaces(prefix=("prefs", "*", "ui")) == [
        ("prefs", "alice", "ui"),
        ("prefs", "bob", "ui"),
    ]
    assert await store.alist_namespaces(max_depth=1) == [("memories",), ("prefs",)]
    assert len(await store.alist_namespaces(limit=2, offset=3)) == 1
    assert await store.alist_namespaces(prefix=("memories", "alice")) == [("memories", "alice")]


@pytest.mark.parametrize(
    ("namespace", "value", "kwargs", "error"),
    [
        pytest.param(("memories",), {"content": "x"}, {}, InvalidArgumentError, id="no-user-label"),
        pytest.param(
            ("memories", "alice"), {"content": "x"}, {"ttl": 5.0}, NotImplementedError, id="ttl-langgraph-refuses"
        ),
        pytest.param(("memories", "a.b"), {"content": "x"}, {}, InvalidNamespaceError, id="dotted-label"),
        pytest.param(("memories", "alice"), {"content": {1, 2}}, {}, InvalidArgumentError, id="not-json"),
    ],
)
async def test_bad_puts_are_refused_and_write_nothing(
    store: TiermemStore, namespace: tuple[str, ...], value: dict[str, Any], kwargs: dict[str, Any], error: type
) -> None:
    with pytest.raises(error):
        await store.aput(namespace, "k", value, **kwargs)
    assert await store.alist_namespaces() == []


async def test_the_same_text_under_two_keys_is_refused(store: TiermemStore) -> None:
    ns = ("memories", "alice")
    await store.aput(ns, "one", {"content": "Alice has a cat."})
    with pytest.raises(InvalidArgumentError, match="one fact per text"):
        await store.aput(ns, "two", {"content": "Alice has a cat."})
    assert await store.aget(ns, "two") is None
    kept = await store.aget(ns, "one")
    assert kept is not None and kept.value == {"content": "Alice has a cat."}


async def test_index_fields_choose_the_searchable_text(store: TiermemStore, mem: MemorySystem) -> None:
    ns = ("memories", "alice")
    await store.aput(ns, "k", {"title": "Trip", "body": "Alice flies to Lisbon in May."}, index=["body"])
    found = await mem.recall(MemoryContext(user_id="alice"), "Lisbon")
    assert found[0].text == "Alice flies to Lisbon in May."


def test_a_fixed_user_holds_every_namespace(mem: MemorySystem) -> None:
    store = TiermemStore(mem, user="carol", namespace="app")
    store.put(("notes",), "n1", {"text": "Carol's flight is on Friday."})  # the sync API, through batch()
    assert store.list_namespaces() == [("notes",)]
    got = store.get(("notes",), "n1")
    assert got is not None and got.value == {"text": "Carol's flight is on Friday."}
    found = mem.blocking().recall(MemoryContext(namespace="app", user_id="carol"), "flight")
    assert found[0].text == "Carol's flight is on Friday."


class _State(TypedDict):
    user: str
    said: str
    recalled: list[str]


def _remember(state: _State) -> dict[str, Any]:
    store = get_store()  # how a LangGraph node reaches the store it was compiled with
    store.put(("memories", state["user"]), f"m{len(state['said'])}", {"content": state["said"]})
    return {}


def _recall(state: _State) -> dict[str, Any]:
    found = get_store().search(("memories", state["user"]), query=state["said"], limit=3)
    return {"recalled": [i.value["content"] for i in found]}


def _graph(store: TiermemStore) -> Any:
    graph = StateGraph(_State)
    graph.add_node("remember", _remember)
    graph.add_node("recall", _recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    return graph.compile(store=store)


def test_a_graph_uses_the_store_through_get_store(store: TiermemStore, mem: MemorySystem) -> None:
    out = _graph(store).invoke({"user": "dana", "said": "Dana is training for a marathon.", "recalled": []})
    assert out["recalled"] == ["Dana is training for a marathon."]
    assert [i.text for i in mem.blocking().recall(MemoryContext(user_id="dana"), "marathon")] == [
        "Dana is training for a marathon."
    ]


async def test_an_async_graph_uses_abatch(store: TiermemStore) -> None:
    said = "Erin keeps bees on the roof."
    out = await _graph(store).ainvoke({"user": "erin", "said": said, "recalled": []})
    assert out["recalled"] == [said]
    assert await store.alist_namespaces() == [("memories", "erin")]


def test_the_matching_helpers_follow_langgraph() -> None:
    from tiermem.memory._adapters._langgraph import _matches, _namespace_matches

    assert _matches({"a": {"b": 1}}, {"a": {"b": 1}}) and not _matches({"a": 1}, {"a": {"b": 1}})
    assert _matches(3, {"$gt": 2, "$lte": 3}) and not _matches("3", {"$gt": 2})
    assert _namespace_matches(("a", "b", "c"), MatchCondition("suffix", ("*", "c")))
    assert not _namespace_matches(("a",), MatchCondition("prefix", ("a", "b")))
