"""Evidence spread over sessions (issue 34 item 4): the switches measured for multi-hop questions.

Both are off by default (``bench/RESULTS.md``: neither paid on both dev conversations): a cap on
one session's memories before every other session's, and a second retrieval hop that widens the
cue with the rarest word of the first results. The store tests capture real sessions through
LanceDB with the rules model; the ordering tests call the diversity step alone.
"""

from __future__ import annotations

import asyncio
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tiermem import MemoryContext, MemoryItem, RankedMemoryItem, RecallOptions, system
from tiermem.memory._recall._diversity import diversified
from tiermem.memory._recall._hops import merged, widened
from tiermem.memory.testing import FrozenClock, HashingEmbedder

NOW = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
CTX = MemoryContext(namespace="hops", user_id="mel")
# One long session about camping, then one line about it in another session.
SESSIONS = [
    (
        "s-trip",
        [
            "We went camping at the lake with the kids.",
            "The camping site had a fire pit and a view of the lake.",
            "Tahoe campsite, marshmallows every evening.",
            "Our tent leaked on the second night.",
            "Camping in the rain at the lake was still fun for the kids.",
            "The kids want to go camping at the lake again.",
        ],
    ),
    (
        "s-later",
        [
            "Work was busy this month, and maybe next summer there is time for camping.",
            "Tahoe was freezing, pack warmer.",
        ],
    ),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hops") / "store"
    clock = FrozenClock(NOW)

    async def write() -> None:
        mem = system(model="rules", store=str(folder), embedder=HashingEmbedder(256), clock=clock)
        for sid, lines in SESSIONS:
            session = CTX.model_copy(update={"session_id": sid})
            for line in lines:
                await mem.capture(session, [{"role": "user", "content": line}])
                clock.advance(timedelta(minutes=1))
            await mem.end_session(session)
            await mem.consolidate(CTX)
            clock.advance(timedelta(days=7))

    asyncio.run(write())
    return folder


def _recall(built: Path, tmp_path: Path, options: RecallOptions, cue: str, limit: int) -> list[RankedMemoryItem]:
    shutil.copytree(built, tmp_path / "store")
    mem = system(
        model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256), clock=FrozenClock(NOW),
        recall=options,
    )  # fmt: skip
    return asyncio.run(mem.recall(CTX, cue, limit=limit, tiers=["episodic"]))


@pytest.mark.parametrize("cap", [1, 2], ids=["cap-1", "cap-2"])
def test_a_session_cap_brings_the_other_sessions_line_into_a_short_list(built: Path, tmp_path: Path, cap: int) -> None:
    found = _recall(built, tmp_path, RecallOptions(per_session=cap), "where did we go camping?", limit=cap + 1)
    sessions = [item.metadata["session_id"] for item in found]
    assert "s-later" in sessions, sessions
    assert max(sessions.count(s) for s in set(sessions)) <= cap


def _said(items: list[RankedMemoryItem]) -> set[str]:
    """The turns' own words (a turn's text may carry its speaker first)."""
    return {item.text.split(": ", 1)[-1] for item in items if item.metadata.get("kind") == "turn"}


def test_the_second_hop_recalls_what_only_the_first_results_words_reach(built: Path, tmp_path: Path) -> None:
    cue = "what about the marshmallows?"
    first = _recall(built, tmp_path / "a", RecallOptions(), cue, limit=10)
    hopped = _recall(built, tmp_path / "b", RecallOptions(second_hop=1), cue, limit=10)
    assert "marshmallows" in first[0].text
    # No word of the cue, and far in meaning: reached only through "tahoe", the first result's rarest word.
    assert "Tahoe was freezing, pack warmer." not in _said(first)
    assert "Tahoe was freezing, pack warmer." in _said(hopped)


# -- the diversity step alone --------------------------------------------------------------


@pytest.mark.parametrize(
    ("discount", "cap", "expected"),
    [
        (0.0, None, ["a1", "a2", "a3", "b1", "f1"]),
        (0.0, 2, ["a1", "a2", "b1", "f1", "a3"]),
        (0.5, None, ["a1", "b1", "f1", "a2", "a3"]),
    ],
    ids=["off", "cap-2", "discount-half"],
)
def test_diversity_reorders_across_sessions_and_keeps_each_sessions_order(
    discount: float, cap: int | None, expected: list[str]
) -> None:
    scored = [(1.0, "a1", 0), (0.9, "a2", 1), (0.8, "a3", 2), (0.7, "b1", 3), (0.6, "f1", 4)]
    sessions = ["a", "a", "a", "b", None]  # f1: a fact, no session
    out = diversified(scored, sessions, discount=discount, cap=cap)
    assert [rid for _, rid, _ in out] == expected
    assert [s for s, _, _ in out] == sorted((s for s, _, _ in out), reverse=True)  # scores stay in order


def _ranked(rid: str, text: str) -> RankedMemoryItem:
    item = MemoryItem(id=rid, tier="episodic", subject="mel", text=text, confidence=0.5, created_at=NOW, updated_at=NOW)
    return RankedMemoryItem(**item.model_dump(), score=1.0, relevance=1.0)


def test_the_widened_cue_takes_the_first_results_rarest_word_the_cue_lacks() -> None:
    first = [_ranked("1", "camping trip to Tahoe lake"), _ranked("2", "the lake trip"), _ranked("3", "a trip")]
    assert widened("where did we go camping?", first, 1) == "where did we go camping? tahoe"
    assert widened("where did we go camping?", [], 1) is None


def test_merging_by_reciprocal_rank_keeps_what_both_lists_rank_high() -> None:
    a, b, c = _ranked("a", "x"), _ranked("b", "y"), _ranked("c", "z")
    assert [i.id for i in merged([a, b], [b, c], limit=3)] == ["b", "a", "c"]
