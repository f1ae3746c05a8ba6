"""A turn of the session log is ranked with its neighbours in the dialogue (rank() alone, no store).

An answer replies to the turn before it (``reply_weight``), and the reply a statement gets often
repeats it in the words a later cue uses (``replied_weight``): "We went to the lake" is found for
"where did the family go camping?" through "Camping by the lake with the family sounds lovely!" said
after it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tiermem import MemoryItem, RecallOptions
from tiermem.memory._recall._ranking import Candidate, rank

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CUE = "where did the family go camping?"


def _turn(rid: str, text: str, *, speaker: str, seq: int, similarity: float, lexical: float = 0.0) -> Candidate:
    item = MemoryItem(
        id=rid, tier="episodic", subject=speaker, text=text, confidence=0.5, created_at=NOW, updated_at=NOW,
        provenance=(rid,), metadata={"kind": "turn", "session_id": "s-1", "seq": seq},
    )  # fmt: skip
    return Candidate(item=item, similarity=similarity, lexical=lexical)


def _pool(reply_speaker: str) -> list[Candidate]:
    """Two equally close statements; only the first got a reply that matches the cue's words."""
    return [
        _turn("s2-lake", "We went to the lake last weekend.", speaker="melanie", seq=4, similarity=0.38),
        _turn(
            "reply",
            "Camping by the lake with the family sounds lovely!",
            speaker=reply_speaker,
            seq=5,
            similarity=0.30,
            lexical=2.0,
        ),
        _turn("s1-mall", "We went to the mall last weekend.", speaker="melanie", seq=9, similarity=0.38),
        _turn("other", "Did the camping gear arrive?", speaker="caroline", seq=12, similarity=0.40, lexical=2.0),
    ]


def _order(pool: list[Candidate], options: RecallOptions) -> list[str]:
    # The gate takes the cue's shared words; the two statements pass on meaning (similarity 0.38 >= 0.25).
    return [i.id for i in rank(pool, now=NOW, options=options, cue=CUE, related_similarity=0.25, limit=10)]


def test_a_statement_gains_from_the_reply_it_got() -> None:
    order = _order(_pool("caroline"), RecallOptions())
    assert order.index("s2-lake") < order.index("s1-mall")


def test_without_replied_weight_the_two_statements_tie_on_text() -> None:
    order = _order(_pool("caroline"), RecallOptions(replied_weight=0.0, reply_weight=0.0))
    assert order.index("s2-lake") > order.index("s1-mall")  # a tie goes by id: "s1-mall" first


def test_the_same_speaker_going_on_is_no_reply() -> None:
    order = _order(_pool("melanie"), RecallOptions(reply_weight=0.0))
    assert order.index("s2-lake") > order.index("s1-mall")


@pytest.mark.parametrize("weight", [0.1, 0.2, 0.5], ids=["w0.1", "w0.2", "w0.5"])
def test_the_gain_grows_with_the_weight(weight: float) -> None:
    def score(options: RecallOptions) -> float:
        ranked = rank(_pool("caroline"), now=NOW, options=options, cue=CUE, related_similarity=0.25, limit=10)
        return next(i.relevance for i in ranked if i.id == "s2-lake")

    base = score(RecallOptions(replied_weight=0.0))
    assert score(RecallOptions(replied_weight=weight)) > base
