"""Shared scopes are ranked as one pool with the user's own memories (issue 37): a memory scores the same
whichever scope holds it, so a small scope's best match is not lifted to the top by being best of few."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import MemoryContext, MemorySystem, system
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
