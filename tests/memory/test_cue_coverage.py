"""A lexical match counts by the share of the cue's information it covers (rank() alone, no store).

A cue word most candidates share says little about which one is meant: "week" in "what water
exercise do I do each week?" matches every weekly habit, and the memory meant ("I swim laps at the
public pool on Tuesdays") shares no word with the cue at all. Words weigh by their rarity among the
candidates, and the share of the cue a memory covers scales its match.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tiermem import MemoryItem, RecallOptions
from tiermem.memory._recall._ranking import Candidate, rank

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CUE = "what water exercise do I do each week?"


def _fact(rid: str, text: str, *, similarity: float, lexical: float = 0.0) -> Candidate:
    item = MemoryItem(
        id=rid, tier="semantic", subject="user", text=text, confidence=0.8, created_at=NOW, updated_at=NOW,
        provenance=(rid,),
    )  # fmt: skip
    return Candidate(item=item, similarity=similarity, lexical=lexical)


def _pool() -> list[Candidate]:
    weekly = [
        "I climb at the bouldering gym twice a week.",
        "I train in kickboxing three times a week.",
        "I call my sister once a week.",
        "I bake bread every week.",
    ]
    return [
        _fact("swim", "I swim laps at the public pool on Tuesdays.", similarity=0.45),
        *(_fact(f"w{i}", text, similarity=0.30 - 0.02 * i, lexical=2.0) for i, text in enumerate(weekly)),
    ]


def _first(options: RecallOptions) -> str:
    ranked = rank(_pool(), now=NOW, options=options, cue=CUE, related_similarity=0.35, limit=10)
    return ranked[0].id


def test_a_common_word_does_not_outrank_the_memory_meant() -> None:
    assert _first(RecallOptions()) == "swim"


def test_without_coverage_the_common_word_wins() -> None:
    # The same pool with the match taken at face value: the check above can fail.
    assert _first(RecallOptions(coverage_weight=0.0)) == "w0"


@pytest.mark.parametrize(
    ("text", "covered"),
    [
        ("I play water polo every week.", "rare word and common word"),
        ("Water aerobics is my exercise.", "both rare words"),
    ],
    ids=["rare-and-common", "two-rare"],
)
def test_covering_the_rare_words_wins_back_the_lead(text: str, covered: str) -> None:
    pool = [*_pool(), _fact("match", text, similarity=0.40, lexical=2.5)]
    ranked = rank(pool, now=NOW, options=RecallOptions(), cue=CUE, related_similarity=0.35, limit=10)
    assert ranked[0].id == "match", covered
