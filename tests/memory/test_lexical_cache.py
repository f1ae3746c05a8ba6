"""Full-text search of one user from the cached words (memory/_index/_lexical.py) against LanceDB's own index."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest

from tiermem import Fact, HashingEmbedder, MemoryContext, Store, create_memory_capability
from tiermem.memory._index._lexical import LexicalIndex, query_terms
from tiermem.memory.testing import FrozenClock, Where

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DIMS = 8
TEXTS = [
    "The user moved to Lisbon in May.",
    "Moni plays tennis on Sundays.",
    "The user hikes in the Alps every summer; hiking is her favourite.",
    "Caroline's sister lives in Lisbon and plays the piano.",
    "She adopted a dog named Biscuit last year.",
    "The user went hiking with Moni near Lisbon.",
    "Tennis lessons start again in September.",
    "The user's favourite food is grilled sardines.",
    "Biscuit the dog loves long walks.",
    "Piano recital on Friday evening at the school in Zürich.",
]
CUES = [
    "Lisbon",
    "tennis Sundays",
    "where does the user go hiking?",
    "Caroline's sister piano",
    "what food does she like",
    "walks with the dog",
    '"Lisbon" AND (tennis',
    "Zurich",
    "nothing matches this",
]
CUE_IDS = ["word", "two-words", "question", "possessive", "stop-words", "plural", "syntax", "accent", "no-match"]


def _fact(fact_id: str, text: str, user: str = "u-1") -> Fact:
    return Fact(
        id=fact_id,
        namespace="default",
        user_id=user,
        subject="user",
        text=text,
        created_at=NOW,
        updated_at=NOW,
        reinforced_at=NOW,
    )


def _scope(user: str = "u-1") -> Where:
    return Where(eq={"namespace": "default", "user_id": user})


def _write(store: Store, facts: Sequence[Fact]) -> None:
    store.upsert("facts", list(facts), np.ones((len(facts), DIMS), dtype=np.float32))


def _ids(store: Store, cue: str, where: Where, *, lance: bool = False) -> list[str]:
    search = store.lance_text_search if lance else store.text_search
    return sorted(h.record.id for h in search("facts", cue, where, limit=50))


def _cached(store: Store, user: str = "u-1") -> bool:
    """Whether the user's words are held (the last full-text search was served from memory)."""
    block = store._vectors.peek(("facts", "default", user))
    return block is not None and block.lexical is not None


@pytest.fixture
def store(store_path: str) -> Store:
    store = Store(store_path, embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS)
    _write(store, [_fact(f"f-{i}", text) for i, text in enumerate(TEXTS)])
    # Another user's rows in the same table: never found, and they move the engine's word statistics.
    _write(store, [_fact(f"g-{i}", text, user="u-2") for i, text in enumerate(TEXTS[:5])])
    store.optimize()
    return store


@pytest.mark.parametrize("cue", CUES, ids=CUE_IDS)
def test_cached_words_find_what_the_engine_finds(store: Store, cue: str) -> None:
    assert _ids(store, cue, _scope()) == _ids(store, cue, _scope(), lance=True)
    assert _cached(store)


@pytest.mark.parametrize("cue", CUES[:6], ids=CUE_IDS[:6])
def test_cached_scores_match_the_engine_for_one_user(store_path: str, cue: str) -> None:
    store = Store(store_path, embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS)
    _write(store, [_fact(f"f-{i}", text) for i, text in enumerate(TEXTS)])
    store.optimize()
    cached = [(h.record.id, h.score) for h in store.text_search("facts", cue, _scope(), limit=5)]
    engine = [(h.record.id, h.score) for h in store.lance_text_search("facts", cue, _scope(), limit=5)]
    assert [i for i, _ in cached] == [i for i, _ in engine]
    assert [s for _, s in cached] == pytest.approx([s for _, s in engine], rel=1e-3)


def test_other_filters_apply(store: Store) -> None:
    where = Where(eq={**_scope().eq, "subject": "user"}, isin={"id": ["f-0", "f-1"]}, ne={"status": "superseded"})
    assert _ids(store, "Lisbon tennis", where) == ["f-0", "f-1"]
    assert _ids(store, "Lisbon tennis", Where(eq={**_scope().eq, "subject": "moni"})) == []


def test_cache_follows_this_process_writes(store: Store) -> None:
    assert _ids(store, "sardines", _scope()) == ["f-7"]
    _write(store, [_fact("f-7", "The user's favourite food is octopus."), _fact("f-new", "Sardines at the harbour.")])
    assert _cached(store)  # written through, not reloaded
    assert _ids(store, "sardines", _scope()) == ["f-new"]
    assert _ids(store, "octopus", _scope()) == ["f-7"]
    store.delete("facts", Where(eq={"id": "f-new"}))
    assert _ids(store, "sardines", _scope()) == []
    assert _ids(store, "Lisbon", _scope()) == _ids(store, "Lisbon", _scope(), lance=True)


def test_cache_sees_another_writer(store: Store, store_path: str) -> None:
    assert _ids(store, "octopus", _scope()) == []
    other = Store(store_path, embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS)
    _write(other, [_fact("f-9", "Octopus salad for dinner.")])  # replaces the piano recital
    assert _ids(store, "octopus", _scope()) == ["f-9"]
    assert _ids(store, "recital", _scope()) == []
    other.delete("facts", Where(eq={"id": "f-9"}))
    assert _ids(store, "octopus", _scope()) == []


def test_words_over_the_budget_go_to_the_engine(store_path: str, store: Store) -> None:
    store.text_search("facts", "Lisbon", _scope(), limit=5)
    block = store._vectors.peek(("facts", "default", "u-1"))
    assert block is not None
    # Room for the vectors and texts, not for the index: vector search stays cached, words go to LanceDB.
    tight = Store(
        store_path,
        embedder_id=f"hashing-v1-{DIMS}",
        dimensions=DIMS,
        vector_cache_bytes=block.vector_bytes + block.text_bytes + block.parsed_bytes + 1,
    )
    assert _ids(tight, "Lisbon", _scope()) == _ids(store, "Lisbon", _scope())
    held = tight._vectors.peek(("facts", "default", "u-1"))
    assert held is not None and held.lexical is None and held.lexical_refused
    assert tight._vectors.total_bytes() <= tight._vectors.max_bytes
    small = Store(store_path, embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS, vector_cache_bytes=block.vector_bytes)
    for _ in range(2):  # the user's rows are not held at all: LanceDB for both searches, every time
        assert _ids(small, "Lisbon", _scope()) == _ids(store, "Lisbon", _scope())
        assert small._vectors.peek(("facts", "default", "u-1")) is None
    none = Store(store_path, embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS, vector_cache_bytes=0)
    assert _ids(none, "Lisbon", _scope()) == _ids(store, "Lisbon", _scope())
    assert none._vectors.peek(("facts", "default", "u-1")) is None


@pytest.mark.parametrize(
    "user", ["o'brien", "x' OR '1'='1", 'say "hi"', "użytkownik-😀"], ids=["apostrophe", "injection", "quotes", "emoji"]
)
def test_scope_ids_with_quotes(store: Store, user: str) -> None:
    _write(store, [_fact("q-1", "Lisbon again, with quotes in the user id.", user=user)])
    assert _ids(store, "Lisbon 'again'", _scope(user)) == ["q-1"]
    assert _cached(store, user)
    assert "q-1" not in _ids(store, "Lisbon again", _scope())


def test_words_of_other_scripts(store: Store) -> None:
    _write(store, [_fact("jp", "東京 に 住んで います"), _fact("pl", "Mieszka w Łodzi od maja.")])
    assert query_terms("東京") == ["東京"]
    for cue in ["東京", "Łodzi", "lodzi"]:
        assert _ids(store, cue, _scope()) == _ids(store, cue, _scope(), lance=True)
        assert _cached(store)
    assert _ids(store, "東京", _scope()) == ["jp"]


def test_index_updated_in_place_equals_one_built_anew() -> None:
    first: dict[str, Sequence[str | None]] = {"text": TEXTS[:6], "context": [f"context {t}" for t in TEXTS[:6]]}
    index = LexicalIndex.build(first)
    keep = np.array([True, False, True, True, False, True])
    added: dict[str, Sequence[str | None]] = {"text": TEXTS[6:], "context": ["", None, "dogs and cats", "Lisbon"]}
    updated = index.upsert(keep, added)
    rows = [i for i, k in enumerate(keep) if k]
    fresh = LexicalIndex.build(
        {name: [first[name][i] for i in rows] + list(added[name]) for name in ("text", "context")}
    )
    for cue in ["Lisbon", "dog walks", "tennis piano Sundays", "hiking summer"]:
        terms = query_terms(cue)
        assert terms is not None
        np.testing.assert_allclose(updated.scores(terms), fresh.scores(terms), rtol=1e-6)


class BreakableEmbedder(HashingEmbedder):
    """Hashing vectors until ``broken`` is set; then every call fails as an unreachable service would."""

    broken = False

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.broken:
            raise ConnectionError("embedding service unreachable")
        return super().embed(texts)


async def test_recall_falls_back_to_words_when_the_embedder_fails(
    store_path: str, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = BreakableEmbedder(64)
    capability = create_memory_capability(store=store_path, embedder=embedder, clock=clock)
    ctx = MemoryContext(user_id="u-1", session_id="s-1")
    for text in TEXTS:
        await capability.add_semantic_fact(ctx, text)
    embedder.broken = True
    with caplog.at_level(logging.WARNING, logger="tiermem"):
        found = await capability.recall(ctx, "Who plays tennis?", limit=5)
    texts = [i.text for i in found]
    assert texts[0] == "Moni plays tennis on Sundays."
    assert all("tennis" in t.lower() or "plays" in t for t in texts), texts  # by shared words only
    assert any(r.levelno == logging.WARNING and r.name.startswith("tiermem.") for r in caplog.records)
