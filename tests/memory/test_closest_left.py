"""Recall is never worse than dense retrieval by meaning (rank() alone, no store).

The meaning gate holds back a memory that shares no word with the cue and falls short of the
similarity the best unrelated memory could reach, unless something else passed: then a memory above
what unrelated memories typically reach competes on its relevance (a list of memories sharing one
common word with the cue no longer leaves it out). What the relative gate then holds back still
comes back when the list has room, after everything that passed, unless its similarity is no more
than unrelated memories typically reach. A cue nothing relates to still recalls nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tiermem import MemoryItem, RecallOptions
from tiermem.memory._recall._ranking import Candidate, rank

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CUE = "where did I spend my childhood?"
RELATED = 0.32  # what the best unrelated memory reaches once in twenty cues
UNRELATED = 0.22  # what it typically reaches


def _fact(rid: str, text: str, *, similarity: float, lexical: float = 0.0, **metadata: object) -> Candidate:
    item = MemoryItem(
        id=rid, tier="semantic", subject="user", text=text, confidence=0.8, created_at=NOW, updated_at=NOW,
        provenance=(rid,), metadata=dict(metadata),
    )  # fmt: skip
    return Candidate(item=item, similarity=similarity, lexical=lexical)


FARM = _fact("farm", "I grew up on a farm in Iowa.", similarity=0.30)
WEEKEND = _fact("spent", "I spend weekends at my childhood friend's house.", similarity=0.35, lexical=3.0)
FAR = _fact("far", "I drink three espressos every morning.", similarity=0.10)


def _ids(pool: list[Candidate], *, limit: int = 10, options: RecallOptions | None = None) -> list[str]:
    ranked = rank(
        pool, now=NOW, options=options or RecallOptions(), cue=CUE, related_similarity=RELATED,
        unrelated_similarity=UNRELATED, limit=limit,
    )  # fmt: skip
    return [r.id for r in ranked]


def test_the_closest_held_back_memory_comes_after_what_passed() -> None:
    assert _ids([WEEKEND, FARM, FAR]) == ["spent", "farm"]


def test_its_score_stays_below_every_memory_that_passed() -> None:
    ranked = rank(
        [WEEKEND, FARM], now=NOW, options=RecallOptions(), cue=CUE, related_similarity=RELATED,
        unrelated_similarity=UNRELATED, limit=10,
    )  # fmt: skip
    assert ranked[1].score < ranked[0].score


def test_a_cue_nothing_relates_to_recalls_nothing() -> None:
    assert _ids([FARM, FAR]) == []


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (_fact("typical", "I water the plants on Sunday.", similarity=0.21), ["spent"]),
        (_fact("past", "I grew up in Ohio.", similarity=0.31, superseded=True), ["spent"]),
    ],
    ids=["typical-of-unrelated", "superseded"],
)
def test_what_is_held_back_for_good(extra: Candidate, expected: list[str]) -> None:
    assert _ids([WEEKEND, extra]) == expected


def test_a_full_list_takes_none() -> None:
    assert _ids([WEEKEND, FARM], limit=1) == ["spent"]


def test_without_a_meaning_nothing_is_added() -> None:
    ranked = rank([WEEKEND, FARM], now=NOW, options=RecallOptions(), cue=CUE, related_similarity=RELATED, limit=10)
    assert [r.id for r in ranked] == ["spent"]


def test_memories_sharing_one_common_word_do_not_hide_the_closest_in_meaning() -> None:
    # Ten memories sharing "spend" with the cue, far from it in meaning; the farm shares no word.
    common = [
        _fact(f"common-{n}", f"I spend too much on item {n}.", similarity=0.05 + n / 1000, lexical=1.0)
        for n in range(10)
    ]
    ranked = _ids([*common, FARM], limit=10)
    # Held back by the meaning gate alone, the farm still set the relative gate's bar: nothing came back.
    assert ranked[0] == "farm"
