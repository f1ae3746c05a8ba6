"""Recall's searches served from a user's cached block in one call, and one version check per table per recall."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from lancedb.table import LanceTable

from tiermem import Fact, HashingEmbedder, MemoryContext, Store, create_memory_capability
from tiermem.memory._index import _cached_search, _products
from tiermem.memory._index._products import similarities
from tiermem.memory._store import _versions
from tiermem.memory._store._versions import VersionWatch
from tiermem.memory.testing import FrozenClock, Where

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DIMS = 8
TEXTS = [
    "The user moved to Lisbon in May.",
    "Moni plays tennis on Sundays.",
    "Caroline's sister lives in Lisbon and plays the piano.",
    "She adopted a dog named Biscuit last year.",
    "The user went hiking with Moni near Lisbon.",
    "Tennis lessons start again in September.",
]
SCOPE = {"namespace": "default", "user_id": "u-1"}


def _fact(
    fact_id: str, text: str, *, subject: str = "user", status: Literal["active", "superseded"] = "active"
) -> Fact:
    return Fact(
        id=fact_id,
        namespace="default",
        user_id="u-1",
        subject=subject,
        text=text,
        status=status,
        created_at=NOW,
        updated_at=NOW,
        reinforced_at=NOW,
    )


def _write(store: Store, facts: list[Fact], seed: int = 0) -> None:
    vectors = np.random.default_rng(seed).standard_normal((len(facts), DIMS)).astype(np.float32)
    store.upsert("facts", facts, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


@pytest.fixture
def store(store_path: str) -> Store:
    store = Store(store_path, embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS)
    facts = [_fact(f"f-{i}", t, subject="moni" if "Moni" in t else "user") for i, t in enumerate(TEXTS)]
    _write(store, [*facts, _fact("f-old", "The user lived in Porto near Lisbon.", status="superseded")])
    return store


WHERES = [
    Where(eq=SCOPE),
    Where(eq=SCOPE, isin={"status": ["active"]}),
    Where(eq={**SCOPE, "subject": "moni"}, isin={"status": ["active", "superseded"]}),
    Where(eq=SCOPE, isin={"id": ["f-0", "f-2", "f-old"]}, ne={"status": "superseded"}),
]


@pytest.mark.parametrize("where", WHERES, ids=["user", "active", "subject", "ids-and-ne"])
@pytest.mark.parametrize("cue", ["Lisbon", "tennis with Moni", "nothing matches"], ids=["word", "words", "no-match"])
def test_one_call_returns_what_the_single_searches_return(store: Store, where: Where, cue: str) -> None:
    assert store.cached_searches("facts", cue, None, where, limit=3) is None  # nothing cached yet
    store.text_search("facts", cue, where, limit=3)  # loads the user's rows and words
    query = np.random.default_rng(7).standard_normal(DIMS).astype(np.float32)
    found = store.cached_searches("facts", cue, query, where, limit=3)
    assert found is not None
    text = store.text_search("facts", cue, where, limit=3)
    vector = store.vector_search("facts", query, where, limit=3)
    assert [(h.record, h.score) for h in found.text] == [(h.record, h.score) for h in text]
    assert [(h.record, h.score) for h in found.vector] == [(h.record, h.score) for h in vector]
    assert found.searched == store.searched("facts", where)
    no_vector = store.cached_searches("facts", cue, None, where, limit=3)
    assert no_vector is not None and no_vector.vector == []


@pytest.mark.parametrize("where", WHERES, ids=["user", "active", "subject", "ids-and-ne"])
@pytest.mark.parametrize("cue", ["Lisbon", "tennis with Moni", "nothing matches"], ids=["word", "words", "no-match"])
def test_the_pool_is_the_engines_hits_pooled(store: Store, where: Where, cue: str) -> None:
    """What recall ranks from the block is what it would rank from the engine's two searches."""
    store.text_search("facts", cue, where, limit=3)  # loads the user's rows and words
    query = np.random.default_rng(7).standard_normal(DIMS).astype(np.float32)
    found = store.cached_searches("facts", cue, query, where, limit=3)
    assert found is not None
    text, vector = store.text_search("facts", cue, where, limit=3), store.vector_search("facts", query, where, limit=3)
    engine = _cached_search.CachedSearches.of(text=text, vector=vector, searched=found.searched).pool
    ids = [r.id for r in found.pool.records]
    assert ids == [r.id for r in engine.records]
    assert ids == list(dict.fromkeys([h.record.id for h in vector] + [h.record.id for h in text]))  # vector hits first
    assert found.pool.lexical.tolist() == engine.lexical.tolist()
    assert found.pool.lexical.tolist() == [next((h.score for h in text if h.record.id == i), 0.0) for i in ids]
    assert np.array_equal(found.pool.vectors, engine.vectors)
    assert np.shape(found.pool.vectors) == (len(ids), DIMS)


@pytest.mark.parametrize("where", WHERES, ids=["user", "active", "subject", "ids-and-ne"])
def test_records_parsed_elsewhere_are_used_as_given_and_change_nothing(store: Store, where: Where) -> None:
    store.text_search("facts", "Lisbon", where, limit=3)  # loads the user's rows and words
    query = np.random.default_rng(7).standard_normal(DIMS).astype(np.float32)
    alone = store.cached_searches("facts", "Lisbon tennis", query, where, limit=4)
    records = {r.id: r for r in store.query("facts", Where(eq=SCOPE))}  # what recall's lineage holds
    given = store.cached_searches("facts", "Lisbon tennis", query, where, limit=4, parsed=records)
    assert alone is not None and given is not None
    for mine, theirs in ((alone.text, given.text), (alone.vector, given.vector)):
        assert [(h.record, h.score) for h in mine] == [(h.record, h.score) for h in theirs]
        assert all(h.record is records[h.record.id] for h in theirs)
    assert given.searched == alone.searched
    partial = store.cached_searches("facts", "Lisbon tennis", query, where, limit=4, parsed={})  # none given
    assert partial is not None and [h.record for h in partial.vector] == [h.record for h in alone.vector]


def test_no_call_when_the_words_are_not_cached(store_path: str, store: Store) -> None:
    store.vector_search("facts", np.ones(DIMS, dtype=np.float32), Where(eq=SCOPE), limit=3)  # vectors only
    assert store.cached_searches("facts", "Lisbon", None, Where(eq=SCOPE), limit=3) is None
    assert store.cached_searches("facts", "Lisbon", None, Where(eq={"user_id": "u-1"}), limit=3) is None  # no ns
    uncached = Store(store_path, embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS, vector_cache_bytes=0)
    uncached.text_search("facts", "Lisbon", Where(eq=SCOPE), limit=3)
    assert uncached.cached_searches("facts", "Lisbon", None, Where(eq=SCOPE), limit=3) is None


def test_pinned_versions_hold_for_one_recall_and_then_move(store_path: str, store: Store) -> None:
    store.text_search("facts", "Lisbon", Where(eq=SCOPE), limit=3)
    other = Store(store_path, embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS)  # another process's connection
    with store.pinned_versions():
        pinned = store.version("facts")
        _write(other, [_fact("f-new", "Lisbon trams are yellow.")], seed=1)
        assert store.version("facts") == pinned
        within = store.cached_searches("facts", "trams", None, Where(eq=SCOPE), limit=3)
        assert within is not None and within.text == []  # one recall reads one version of the table
    assert store.version("facts") > pinned
    assert [h.record.id for h in store.text_search("facts", "trams", Where(eq=SCOPE), limit=3)] == ["f-new"]


async def test_recall_sees_another_writer(store_path: str, clock: FrozenClock) -> None:
    ctx = MemoryContext(user_id="u-1", session_id="s-1")
    mine = create_memory_capability(store=store_path, embedder=HashingEmbedder(64), clock=clock)
    for text in TEXTS:
        await mine.add_semantic_fact(ctx, text)
    assert "trams" not in " ".join(i.text for i in await mine.recall(ctx, "Lisbon trams", limit=5))
    theirs = create_memory_capability(store=store_path, embedder=HashingEmbedder(64), clock=clock)
    await theirs.add_semantic_fact(ctx, "Lisbon trams are yellow.")
    found = await mine.recall(ctx, "Lisbon trams", limit=5)
    assert found[0].text == "Lisbon trams are yellow."


def _aged(folder: Path) -> None:
    """The folder as if it had last changed an hour ago (its ctime still moves to now)."""
    old = time.time() - 3600
    os.utime(folder, (old, old))


def test_a_versions_folder_stands_for_the_version_while_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "_versions"
    folder.mkdir()
    reads: list[int] = []

    def current() -> int:
        reads.append(1)
        return len(reads)

    watch = VersionWatch()
    assert [watch.read(str(folder), current) for _ in range(3)] == [1, 2, 3]  # just changed: not settled yet
    assert [watch.read(None, current), watch.read(str(tmp_path / "missing"), current)] == [4, 5]
    monkeypatch.setattr(_versions, "_SETTLED_NS", 0)
    _aged(folder)
    assert [watch.read(str(folder), current) for _ in range(3)] == [6, 6, 6]  # settled: one engine read
    (folder / "7.manifest").write_text("")  # a commit
    assert [watch.read(str(folder), current) for _ in range(2)] == [7, 7]
    _aged(folder)
    (folder / "7.manifest").unlink()  # a cleanup of old versions
    assert watch.read(str(folder), current) == 8


async def test_recall_skips_the_engines_version_reads_and_still_sees_another_writer(
    store_path: str, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = MemoryContext(user_id="u-1")
    mine = create_memory_capability(store=store_path, embedder=HashingEmbedder(64), clock=clock)
    for text in TEXTS:
        await mine.add_semantic_fact(ctx, text)
    await mine.recall(ctx, "Lisbon", limit=5, tiers=["semantic"])  # the user's rows and words cached
    reads: list[str] = []
    engine_version = LanceTable.__dict__["version"]  # the property itself, to call its getter

    def counted(table: LanceTable) -> int:
        reads.append(table.name)
        return int(engine_version.fget(table))

    monkeypatch.setattr(LanceTable, "version", property(counted))
    monkeypatch.setattr(_versions, "_SETTLED_NS", 0)
    for folder in Path(store_path).glob("*.lance/_versions"):
        _aged(folder)
    first = [i.model_dump() for i in await mine.recall(ctx, "Lisbon trams", limit=5, tiers=["semantic"])]
    assert sorted(set(reads)) == ["aliases", "facts"]  # the folders' state changed (aged): read once
    reads.clear()
    again = [i.model_dump() for i in await mine.recall(ctx, "Lisbon trams", limit=5, tiers=["semantic"])]
    assert reads == [] and again == first
    theirs = create_memory_capability(store=store_path, embedder=HashingEmbedder(64), clock=clock)
    await theirs.add_semantic_fact(ctx, "Lisbon trams are yellow.")
    reads.clear()
    found = await mine.recall(ctx, "Lisbon trams", limit=5, tiers=["semantic"])
    assert "facts" in reads and found[0].text == "Lisbon trams are yellow."


@pytest.mark.parametrize("rows", [0, 1, 63, 2501, 10_000], ids=["empty", "one", "one-block", "odd", "10k"])
def test_similarities_do_not_depend_on_the_chunk_size(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    rng = np.random.default_rng(rows)
    matrix = rng.standard_normal((rows, 384)).astype(np.float32)
    vector = rng.standard_normal(384)
    found = []
    for chunk_rows in (64, 1000, 1365):  # rounded down to multiples of 64 rows; 1365: the old default at 384
        monkeypatch.setattr(_products, "PRODUCT", chunk_rows * 384)
        found.append(similarities(matrix, vector))
    assert all(np.array_equal(found[0], other) for other in found[1:])
    np.testing.assert_allclose(found[0], matrix @ vector.astype(np.float32), rtol=1e-5, atol=1e-5)
