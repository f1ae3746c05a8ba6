"""Review of today's changes: failing tests that show what the pooled scoring and propose_shared miss."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import Fact, MemoryContext, MemorySystem, system
from tiermem.memory.testing import FrozenClock, HashingEmbedder

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TEAM = "team:eng"
OWN_ONLY = MemoryContext(namespace="default", user_id="gina")
READS_TEAM = MemoryContext(namespace="default", user_id="gina", read_scopes=(TEAM,))
FACTS = (
    ("Peanuts give me an allergy.", ("nut", "food")),
    ("My allergy doctor is in Porto.", ()),
    ("I keep my bike in the hallway.", ()),
    ("I prefer trains to planes.", ()),
)


@pytest.fixture
async def mem(tmp_path: Path) -> MemorySystem:
    mem = system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256), clock=FrozenClock(START))
    await mem.grant("default", "gina", TEAM, "read")  # the team scope stays empty
    facts = [Fact.new(OWN_ONLY, subject="user", text=t, now=START, keys=k) for t, k in FACTS]
    mem.tiers.write("facts", facts)
    return mem


@pytest.mark.parametrize("cue", ["nut allergy", "food allergy doctor"], ids=["key-word", "key-and-text-words"])
async def test_reading_an_empty_scope_leaves_the_own_ranking_as_it_was(mem: MemorySystem, cue: str) -> None:
    """The pool is every fact here (fewer than a vector search's 30), so the pooled BM25 statistics are the
    index's: only what the pool scores (text without the retrieval keys in the context column) differs."""
    alone = {i.id: i.relevance for i in await mem.recall(OWN_ONLY, cue, tiers=["semantic"])}
    pooled = {i.id: i.relevance for i in await mem.recall(READS_TEAM, cue, tiers=["semantic"])}
    assert pooled == pytest.approx(alone)


@pytest.mark.parametrize(
    "nick_says",
    ["We do not use pytest for tests.", "We don't use pytest for tests.", "We no longer use pytest for tests."],
    ids=["not", "don't", "no-longer"],
)
async def test_a_negated_fact_is_not_held_alike(tmp_path: Path, nick_says: str) -> None:
    mem = system(model="rules", store=str(tmp_path / "s"), embedder=HashingEmbedder(64), clock=FrozenClock(START))
    for user in ("gina", "nick"):
        await mem.grant("default", user, TEAM, "write")
    await mem.remember(MemoryContext(namespace="default", user_id="gina"), "We use pytest for tests.")
    await mem.remember(MemoryContext(namespace="default", user_id="nick"), nick_says)
    assert await mem.propose_shared("default", TEAM) == []


async def test_reading_an_empty_scope_leaves_a_ranking_over_turns_and_facts_as_it_was(mem: MemorySystem) -> None:
    """Each table has its own full-text index: turns' words are weighed by turns, facts' by facts."""
    said = MemoryContext(namespace="default", user_id="gina", session_id="s-1")
    for text in ("My allergy got worse in spring.", "The doctor said to avoid nuts.", "I biked to work today."):
        await mem.capture(said, [{"role": "user", "content": text}])
    await mem.end_session(said)
    tiers = ["semantic", "episodic"]
    alone = {i.id: i.relevance for i in await mem.recall(OWN_ONLY, "allergy doctor", tiers=tiers)}
    pooled = {i.id: i.relevance for i in await mem.recall(READS_TEAM, "allergy doctor", tiers=tiers)}
    assert pooled == pytest.approx(alone)
