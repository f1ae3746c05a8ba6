"""Shared scopes are ranked as one pool with the user's own memories (issue 37): a memory scores the same
whichever scope holds it, so a small scope's best match is not lifted to the top by being best of few."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import Fact, MemoryContext, MemorySystem, system
from tiermem.memory.testing import FrozenClock, HashingEmbedder

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TEAM = "team:eng"
OWN = (
    "I drink green tea every morning.",
    "Standup is every morning at nine.",
    "My sister lives in Porto.",
    "I am learning the cello.",
    "We deploy on Tuesdays.",
    "I keep my bike in the hallway.",
    "The quarterly review is in March.",
    "I prefer trains to planes.",
)
SHARED = MemoryContext(namespace="default", user_id="gina", read_scopes=(TEAM,), write_scope=TEAM)
OWN_ONLY = MemoryContext(namespace="default", user_id="gina")
READS_TEAM = MemoryContext(namespace="default", user_id="gina", read_scopes=(TEAM,))


@pytest.fixture
async def mem(tmp_path: Path) -> MemorySystem:
    mem = system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256), clock=FrozenClock(START))
    await mem.grant("default", "gina", TEAM, "write")
    written = {text: await mem.remember(OWN_ONLY, text) for text in OWN}
    await mem.share(SHARED, written["Standup is every morning at nine."].id, TEAM)  # a copy: gina keeps hers
    return mem


@pytest.mark.parametrize(
    "cue", ["what do I drink every morning?", "when is standup?", "morning routine"], ids=["drink", "standup", "vague"]
)
async def test_a_memory_scores_the_same_in_either_scope(mem: MemorySystem, cue: str) -> None:
    found = await mem.recall(SHARED, cue, limit=20)
    copies = {item.metadata["scope"]: item for item in found if item.text == "Standup is every morning at nine."}
    assert set(copies) == {"user", TEAM}
    assert copies[TEAM].score == pytest.approx(copies["user"].score)
    assert copies[TEAM].relevance == pytest.approx(copies["user"].relevance)


async def test_the_own_best_match_stays_first_beside_a_scope_of_one(mem: MemorySystem) -> None:
    found = await mem.recall(SHARED, "what do I drink every morning?", limit=5)
    assert found[0].text == "I drink green tea every morning." and found[0].metadata["scope"] == "user"
    alone = await mem.recall(OWN_ONLY, "what do I drink every morning?", limit=5)
    assert alone[0].id == found[0].id and "scope" not in alone[0].metadata  # reading only one's own: unlabelled


async def test_the_context_block_ranks_both_scopes_as_one(mem: MemorySystem) -> None:
    block = await mem.format_context(SHARED, "what do I drink every morning?")
    assert block.index("I drink green tea every morning.") < block.index(f"[{TEAM} / user] Standup is every morning")


# -- an empty scope read beside one's own changes nothing: the pooled word scores are the index's --

FACTS = (
    ("Peanuts give me an allergy.", ("nut", "food")),
    ("My allergy doctor is in Porto.", ()),
    ("I keep my bike in the hallway.", ()),
    ("I prefer trains to planes.", ()),
)


@pytest.fixture
async def keyed(tmp_path: Path) -> MemorySystem:
    mem = system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256), clock=FrozenClock(START))
    await mem.grant("default", "gina", TEAM, "read")  # the team scope stays empty
    facts = [Fact.new(OWN_ONLY, subject="user", text=t, now=START, keys=k) for t, k in FACTS]
    mem.tiers.write("facts", facts)
    return mem


@pytest.mark.parametrize("cue", ["nut allergy", "food allergy doctor"], ids=["key-word", "key-and-text-words"])
async def test_reading_an_empty_scope_leaves_the_own_ranking_as_it_was(keyed: MemorySystem, cue: str) -> None:
    """The pool is every fact here (fewer than a vector search's 30), so the pooled BM25 has the index's
    statistics, and scores the index's columns (a fact's retrieval keys included): nothing moves."""
    alone = {i.id: i.relevance for i in await keyed.recall(OWN_ONLY, cue, tiers=["semantic"])}
    pooled = {i.id: i.relevance for i in await keyed.recall(READS_TEAM, cue, tiers=["semantic"])}
    assert pooled == pytest.approx(alone)


async def test_reading_an_empty_scope_leaves_a_ranking_over_turns_and_facts_as_it_was(keyed: MemorySystem) -> None:
    """Each table has its own full-text index: turns' words are weighed by turns, facts' by facts."""
    said = MemoryContext(namespace="default", user_id="gina", session_id="s-1")
    for text in ("My allergy got worse in spring.", "The doctor said to avoid nuts.", "I biked to work today."):
        await keyed.capture(said, [{"role": "user", "content": text}])
    await keyed.end_session(said)
    tiers = ["semantic", "episodic"]
    alone = {i.id: i.relevance for i in await keyed.recall(OWN_ONLY, "allergy doctor", tiers=tiers)}
    pooled = {i.id: i.relevance for i in await keyed.recall(READS_TEAM, "allergy doctor", tiers=tiers)}
    assert pooled == pytest.approx(alone)
