"""Recall by meaning with the default embedder: paraphrases that share no word, unrelated cues, the context block.

Stores are real LanceDB folders; the large ones are written in batches straight to the facts table
(the rows recall reads), so a 4,000-memory store builds in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.prebuilt import prebuilt
from tiermem import Fact, MemoryCapability, MemoryContext, create_memory_capability, system
from tiermem.memory._embed._names import resolve_embedder
from tiermem.memory._recall._relevance import calibration
from tiermem.memory._text import STOP_WORDS, terms
from tiermem.memory.testing import FrozenClock
from tiermem.pipelines import _sentences as sentences

# One worker runs this module (pytest-xdist --dist loadgroup), so that its stores are written
# once, on one worker, and no worker idles waiting for another to write them.
pytestmark = pytest.mark.xdist_group("recall-meaning")
DATA = Path(__file__).resolve().parents[1] / "data"
PARAPHRASES: dict[str, Any] = json.loads((DATA / "paraphrases.json").read_text())
PAIRS: list[dict[str, str]] = PARAPHRASES["pairs"]
UNRELATED: list[str] = PARAPHRASES["unrelated"]
FILLER: list[str] = json.loads((DATA / "filler.json").read_text())["memories"]
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def default_embedder() -> Any:
    return resolve_embedder(None)


def write(mem: MemoryCapability, ctx: MemoryContext, texts: Sequence[str]) -> None:
    """Facts about the user, written in batches with their vectors (what consolidation would store)."""
    facts = [
        Fact.new(ctx, subject="user", text=t, now=START + timedelta(seconds=i), provenance=(f"t{i}",))
        for i, t in enumerate(texts)
    ]
    vectors = mem.embedder.embed(list(texts))
    for at in range(0, len(facts), 2000):
        mem.store.upsert("facts", facts[at : at + 2000], vectors[at : at + 2000])


def capability(folder: Path, embedder: Any) -> MemoryCapability:
    return create_memory_capability(store=str(folder), embedder=embedder, clock=FrozenClock(START + timedelta(days=1)))


# -- the three cases of the issue, as a new user would meet them ------------------------------------

ISSUE_MEMORIES = ["I am allergic to peanuts.", "My sister lives in Porto.", "I play the guitar on weekends."]


@pytest.fixture(scope="module")
def new_user(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, MemoryContext]]:
    """A user of ``system()`` (the default embedder, the offline rules model) who said four things."""
    mem = system(
        model="rules",
        store=str(tmp_path_factory.mktemp("new-user") / "store"),
        clock=FrozenClock(START),
    )
    sync = mem.blocking()
    ctx = MemoryContext(user_id="new-user", session_id="s-1")
    for text in [*ISSUE_MEMORIES, "I moved from Berlin to Lisbon last month."]:
        sync.capture(ctx, [{"role": "user", "content": text}])
    sync.end_session(ctx)
    sync.consolidate(MemoryContext(user_id="new-user"))
    yield sync, MemoryContext(user_id="new-user")


def test_nuts_cue_recalls_the_peanut_allergy(new_user: tuple[Any, MemoryContext]) -> None:
    mem, ctx = new_user
    found = mem.recall(ctx, "which nuts must I avoid eating?")
    assert found and "peanuts" in found[0].text


def test_context_block_for_dinner_carries_the_allergy(new_user: tuple[Any, MemoryContext]) -> None:
    mem, ctx = new_user
    block = mem.format_context(ctx, "what can I eat tonight?")
    assert "(no relevant memories)" not in block
    assert "peanuts" in block


def test_where_the_user_lives_recalls_the_move(new_user: tuple[Any, MemoryContext]) -> None:
    mem, ctx = new_user
    found = mem.recall(ctx, "where does the user live")
    assert any("Lisbon" in item.text for item in found[:3])


# -- paraphrases on small stores, unrelated cues on a large one ---------------------------------------

SMALL = [1, 3, 10]
# Every fourth pair of the set on a store of 1, 3 and 10 memories: the pair's memory, then other pairs'.
SAMPLE = PAIRS[::4]


@pytest.fixture(scope="module")
def small_stores(tmp_path_factory: pytest.TempPathFactory, default_embedder: Any) -> MemoryCapability:
    """One user per (sampled pair, store size): the pair's memory and size - 1 other pairs' memories."""
    mem = capability(tmp_path_factory.mktemp("small") / "store", default_embedder)
    others = [p["memory"] for p in PAIRS]
    for pair in SAMPLE:
        rest = [m for m in others if m != pair["memory"]]
        for size in SMALL:
            offset = PAIRS.index(pair) * 7 % len(rest)
            texts = [pair["memory"], *(rest[offset:] + rest[:offset])[: size - 1]]
            write(mem, MemoryContext(user_id=f"{pair['id']}-{size}"), texts)
    return mem


@pytest.mark.parametrize("size", SMALL, ids=[f"{n}-memories" for n in SMALL])
def test_paraphrase_recalls_its_memory_on_a_small_store(small_stores: MemoryCapability, size: int) -> None:
    """Nine in ten of the sampled cues find their memory in the first three, with no shared word."""
    hits = []
    for pair in SAMPLE:
        found = small_stores.recall_sync(MemoryContext(user_id=f"{pair['id']}-{size}"), pair["cue"], limit=3)
        hits.append(pair["memory"] in [i.text for i in found])
    assert sum(hits) >= 0.9 * len(SAMPLE), [p["id"] for p, hit in zip(SAMPLE, hits, strict=True) if not hit]


@pytest.mark.parametrize("pair", SAMPLE[:6], ids=[p["id"] for p in SAMPLE[:6]])
def test_paraphrase_on_a_one_memory_store_is_not_hidden(small_stores: MemoryCapability, pair: dict[str, str]) -> None:
    found = small_stores.recall_sync(MemoryContext(user_id=f"{pair['id']}-1"), pair["cue"])
    assert [i.text for i in found] == [pair["memory"]]


@pytest.fixture(scope="module")
def large_store(tmp_path_factory: pytest.TempPathFactory, default_embedder: Any) -> MemoryCapability:
    """4,000 everyday memories of one user: every pair's memory and filler (written once per session)."""

    def write_large(folder: Path) -> None:
        mem = capability(folder, default_embedder)
        texts = [p["memory"] for p in PAIRS] + FILLER[: 4000 - len(PAIRS)]
        write(mem, MemoryContext(user_id="large"), texts)
        mem.store.optimize(cleanup_older_than=timedelta(0))

    return capability(prebuilt(tmp_path_factory, "recall-meaning-large", write_large), default_embedder)


@pytest.mark.parametrize("cue", UNRELATED, ids=[c[:40] for c in UNRELATED])
def test_unrelated_cue_on_thousands_of_memories_returns_nothing(large_store: MemoryCapability, cue: str) -> None:
    assert large_store.recall_sync(MemoryContext(user_id="large"), cue) == []


def test_unrelated_cue_context_block_is_empty_of_memories(large_store: MemoryCapability) -> None:
    block = large_store.format_context_sync(MemoryContext(user_id="large"), UNRELATED[0])
    assert "(no relevant memories)" in block


# -- the context block ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cue", "expected"),
    [
        ("which nuts must I avoid eating?", "peanuts"),
        ("what can I eat tonight?", "peanuts"),
        ("which city do I live in now?", "Lisbon"),
    ],
    ids=["nuts", "eat", "city"],
)
def test_context_block_carries_what_only_meaning_links(
    tmp_path: Path, default_embedder: Any, cue: str, expected: str
) -> None:
    mem = capability(tmp_path / "store", default_embedder)
    ctx = MemoryContext(user_id="u-1")
    write(mem, ctx, ["I am allergic to peanuts.", "I moved from Berlin to Lisbon last month.", "I play chess."])
    block = mem.format_context_sync(ctx, cue)
    assert expected in block


def test_context_block_with_nothing_relevant_still_carries_the_digest(tmp_path: Path, default_embedder: Any) -> None:
    mem = capability(tmp_path / "store", default_embedder)
    ctx = MemoryContext(user_id="u-1")
    write(mem, ctx, ISSUE_MEMORIES)
    mem.tiers.set_digest(ctx, "The user is a retired teacher who loves the sea.")
    block = mem.format_context_sync(ctx, UNRELATED[1])
    assert '<section tier="digest"' in block
    assert "retired teacher" in block
    assert '<section tier="semantic"' not in block


# -- the calibration behind the gate ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["minilm-onnx", "minilm-static", "hashing"], ids=["onnx", "static", "hashing"])
def test_meaning_gate_rises_with_the_memories_searched(name: str) -> None:
    """Calibrated per embedder on the shipped background: the bar for "related by meaning" is what the best
    of n unrelated memories reaches, so it rises with n, and sits above the background's typical pair."""
    calibrated = calibration(resolve_embedder(name))
    bars = [calibrated.threshold(n, 0.05) for n in (1, 3, 40, 400, 4000)]
    assert bars == sorted(bars) and len(set(bars)) == len(bars)
    assert bars[0] > calibrated.null_mean + calibrated.null_std


def test_text_normalisation_is_shared() -> None:
    assert terms("Hiking with Caroline's dogs") == terms("hike with caroline dog")
    assert "the" in STOP_WORDS and "really" in STOP_WORDS
    assert sentences.STOPWORDS >= STOP_WORDS
