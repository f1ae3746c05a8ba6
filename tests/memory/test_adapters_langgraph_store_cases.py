"""LangGraph's own BaseStore cases, run against TiermemStore.

LangGraph ships no store conformance suite (langgraph-checkpoint-conformance covers checkpointers); these
are the behavioural cases of its InMemoryStore tests (langchain-ai/langgraph,
libs/checkpoint/tests/test_store.py: test_list_namespaces_basic, _with_wildcards, _pagination, _max_depth,
_no_conditions, _empty_store, test_cannot_put_empty_namespace), ported to drive our adapter. A fixed user
holds every namespace, so the namespaces are LangGraph's own, not shaped by a user label.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.store.base import InvalidNamespaceError

from tiermem import HashingEmbedder, TiermemStore, system

Namespace = tuple[str, ...]


@pytest.fixture
def store(tmp_path: Path) -> TiermemStore:
    mem = system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256))
    return TiermemStore(mem, user="sam")


async def _put_all(store: TiermemStore, namespaces: list[Namespace]) -> None:
    for i, ns in enumerate(namespaces):
        await store.aput(ns, f"id_{i}", {"data": f"value_{i:02d}"})


async def test_list_namespaces_basic(store: TiermemStore) -> None:
    await _put_all(
        store,
        [
            ("a", "b", "c"),
            ("a", "b", "d", "e"),
            ("a", "b", "d", "i"),
            ("a", "b", "f"),
            ("a", "c", "f"),
            ("b", "a", "f"),
            ("users", "123"),
            ("users", "456", "settings"),
            ("admin", "users", "789"),
        ],
    )
    listed = store.alist_namespaces
    assert sorted(await listed(prefix=("a", "b"))) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert sorted(await listed(suffix=("f",))) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert sorted(await listed(prefix=("a",), suffix=("f",))) == [("a", "b", "f"), ("a", "c", "f")]
    assert sorted(await listed(prefix=("a", "b"), max_depth=3)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert await listed(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert await listed(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert sorted(await listed(prefix=("a", "*", "f"))) == [("a", "b", "f"), ("a", "c", "f")]
    assert sorted(await listed(suffix=("*", "f"))) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert await listed(prefix=("nonexistent",)) == []
    assert await listed(prefix=("users", "123")) == [("users", "123")]


async def test_list_namespaces_with_wildcards(store: TiermemStore) -> None:
    await _put_all(
        store,
        [
            ("users", "123"),
            ("users", "456"),
            ("users", "789", "settings"),
            ("admin", "users", "789"),
            ("guests", "123"),
            ("guests", "456", "preferences"),
        ],
    )
    assert sorted(await store.alist_namespaces(prefix=("users", "*"))) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert await store.alist_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert await store.alist_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []


@pytest.mark.parametrize("offset", [0, 5, 15], ids=["first-page", "second-page", "last-page"])
async def test_list_namespaces_pagination(store: TiermemStore, offset: int) -> None:
    await _put_all(store, [("namespace", f"sub_{i:02d}") for i in range(20)])
    page = await store.alist_namespaces(prefix=("namespace",), limit=5, offset=offset)
    assert page == [("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]


async def test_list_namespaces_max_depth(store: TiermemStore) -> None:
    await _put_all(
        store, [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"), ("h", "i", "j", "k")]
    )
    assert sorted(await store.alist_namespaces(max_depth=2)) == [("a", "b"), ("a", "g"), ("h", "i")]


async def test_list_namespaces_no_conditions_and_empty(store: TiermemStore) -> None:
    assert await store.alist_namespaces() == []
    namespaces: list[Namespace] = [("a", "b"), ("c", "d"), ("e", "f", "g")]
    await _put_all(store, namespaces)
    assert sorted(await store.alist_namespaces()) == namespaces


@pytest.mark.parametrize(
    "namespace",
    [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")],
    ids=["empty", "dotted-label", "empty-label", "reserved-root"],
)
async def test_cannot_put_an_invalid_namespace(store: TiermemStore, namespace: Namespace) -> None:
    with pytest.raises(InvalidNamespaceError):
        await store.aput(namespace, "foo", {"foo": "bar"})
    with pytest.raises(InvalidNamespaceError):
        store.put(namespace, "foo", {"foo": "bar"})
    assert await store.alist_namespaces() == []


async def test_langgraph_may_label_a_namespace_below_its_root(store: TiermemStore) -> None:
    ns = ("foo", "langgraph", "foo")
    doc = {"foo": "bar"}
    await store.aput(ns, "bar", doc)
    got = await store.aget(ns, "bar")
    assert got is not None and got.value == doc
    assert (await store.asearch(ns))[0].value == doc
    await store.adelete(ns, "bar")
    assert await store.aget(ns, "bar") is None
