"""Recall prefers what is current (issue 12, item 3): the demo's employer change and a move, with the rules model.

A real LanceDB in a temporary folder, the offline rules model, a frozen clock; the hashing embedder
(fast) and the default embedder (what a new user runs). A superseded fact and the turns whose every
fact was superseded stay recallable, marked past in ``metadata``, below the fact that replaced them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tiermem import MemoryContext, MemoryItem, MemorySystem, RankedMemoryItem, RecallOptions, system
from tiermem.memory._embed._names import resolve_embedder
from tiermem.memory._recall._ranking import PAST_WEIGHT, Candidate, rank
from tiermem.memory.testing import FrozenClock, HashingEmbedder

BASE = MemoryContext(namespace="current", user_id="sam")
FIRST = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
SECOND = datetime(2026, 3, 16, 18, 0, tzinfo=UTC)

EMBEDDERS = [
    pytest.param(lambda: HashingEmbedder(256), id="hashing"),
    pytest.param(lambda: resolve_embedder(None), id="default"),
]


async def _session(mem: MemorySystem, clock: FrozenClock, sid: str, when: datetime, *texts: str) -> None:
    clock.set(when)
    ctx = BASE.model_copy(update={"session_id": sid})
    for text in texts:
        await mem.capture(ctx, [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
        clock.advance(timedelta(minutes=2))
    await mem.end_session(ctx)
    await mem.consolidate(BASE)


async def _employer_change(tmp_path: Path, embedder: Any) -> MemorySystem:
    """The demo's sessions about work: Acme Corp, other things, then Globex."""
    clock = FrozenClock(FIRST)
    mem = system(model="rules", store=str(tmp_path / "store"), embedder=embedder, clock=clock)
    await mem.add_alias(BASE, "Sam")
    await _session(
        mem, clock, "s-1", FIRST,
        "Hi, I'm Sam. I work at Acme Corp as a data engineer.",
        "My wife Moni is allergic to shellfish, so we never order paella.",
    )  # fmt: skip
    await _session(mem, clock, "s-2", FIRST + timedelta(days=7), "I love hiking in the mountains with our dog Biscuit.")
    await _session(mem, clock, "s-3", SECOND, "I work at Globex now.", "Moni is training for the Lisbon half marathon.")
    return mem


def _position(items: Sequence[RankedMemoryItem], needle: str, *, kind: str | None = None) -> int:
    for i, item in enumerate(items):
        if needle in item.text and (kind is None or item.metadata.get("kind") == kind or item.tier == kind):
            return i
    raise AssertionError(f"{needle!r} ({kind}) not recalled: {[i.text for i in items]}")


@pytest.mark.parametrize("make_embedder", EMBEDDERS)
async def test_the_new_employer_ranks_first_and_the_old_one_is_marked_past(tmp_path: Path, make_embedder: Any) -> None:
    mem = await _employer_change(tmp_path, make_embedder())
    facts = {f.text: f for f in await mem.facts(BASE, include_inactive=True)}
    globex = next(f for t, f in facts.items() if "Globex" in t)
    acme = next(f for t, f in facts.items() if "Acme" in t)
    assert (globex.status, acme.status, acme.superseded_by) == ("active", "superseded", globex.id)

    items = await mem.recall(BASE, "Where does Sam work?", limit=20)

    assert items[0].id == globex.id
    acme_fact = _position(items, "Acme Corp", kind="semantic")
    acme_turn = _position(items, "I work at Acme Corp", kind="turn")
    assert acme_fact > 0 and acme_turn > 0
    for past in (items[acme_fact], items[acme_turn]):
        assert past.metadata["superseded"] is True
        assert past.metadata["replaced_by"] == [globex.id]
        assert past.metadata["superseded_by"] == globex.id
        assert past.metadata["valid_to"] == acme.valid_to.isoformat()  # type: ignore[union-attr]
    assert "superseded" not in items[0].metadata


async def test_a_turn_stays_current_while_any_fact_citing_it_holds(tmp_path: Path) -> None:
    """The first turn's allergy fact still holds: that turn is current, the Acme one is past."""
    mem = await _employer_change(tmp_path, HashingEmbedder(256))
    items = await mem.recall(BASE, "What is Moni allergic to? Where does Sam work?", limit=30, tiers=["episodic"])
    turns = {i.text.split("\n")[0]: i for i in items if i.metadata.get("kind") == "turn"}
    allergy = next(i for t, i in turns.items() if "shellfish" in t)
    acme = next(i for t, i in turns.items() if "Acme" in t)
    assert "superseded" not in allergy.metadata
    assert acme.metadata["superseded"] is True


async def test_the_context_block_marks_the_past(tmp_path: Path) -> None:
    mem = await _employer_change(tmp_path, HashingEmbedder(256))
    ctx = BASE.model_copy(update={"session_id": "s-4"})
    block = await mem.format_context(ctx, "Where does Sam work?", max_tokens=800)
    lines = block.splitlines()
    globex = next(i for i, line in enumerate(lines) if "works at Globex" in line and "[user]" in line)
    acme = next(i for i, line in enumerate(lines) if "works at Acme Corp" in line)
    assert "(past" not in lines[globex]
    assert "(past, until 2026-03-16)" in lines[acme]
    assert globex < acme


async def test_browsing_without_a_cue_shows_only_what_holds(tmp_path: Path) -> None:
    mem = await _employer_change(tmp_path, HashingEmbedder(256))
    texts = [i.text for i in await mem.recall(BASE, None, limit=50, tiers=["semantic"])]
    assert any("Globex" in t for t in texts) and not any("Acme" in t for t in texts)


@pytest.mark.parametrize("make_embedder", EMBEDDERS)
async def test_a_move_puts_the_new_home_first(tmp_path: Path, make_embedder: Any) -> None:
    clock = FrozenClock(FIRST)
    mem = system(model="rules", store=str(tmp_path / "store"), embedder=make_embedder(), clock=clock)
    await _session(mem, clock, "s-1", FIRST, "I live in Berlin.")
    await _session(mem, clock, "s-2", SECOND, "I moved from Berlin to Lisbon last month.")
    facts = await mem.facts(BASE, include_inactive=True)
    assert [f.status for f in facts if "Berlin" in f.text and "Lisbon" not in f.text] == ["superseded"]
    items = await mem.recall(BASE, "where does the user live", limit=10)
    assert "Lisbon" in items[0].text and "superseded" not in items[0].metadata
    assert all(i.metadata.get("superseded") for i in items if "Berlin" in i.text and "Lisbon" not in i.text)


# -- rank() alone: the order rule, whatever the scores -------------------------------------------------------

NOW = SECOND


def _candidate(rid: str, text: str, *, similarity: float, lexical: float, **metadata: Any) -> Candidate:
    item = MemoryItem(
        id=rid, tier="semantic", subject="user", text=text, confidence=0.8,
        created_at=FIRST, updated_at=FIRST, metadata=metadata,
    )  # fmt: skip
    return Candidate(item=item, similarity=similarity, lexical=lexical)


CASES = [
    pytest.param(0.9, 5.0, 0.2, 0.0, id="old-matches-far-better"),
    pytest.param(0.5, 1.0, 0.5, 1.0, id="equal-matches"),
    pytest.param(0.1, 0.0, 0.9, 5.0, id="new-matches-better"),
]


@pytest.mark.parametrize(("old_sim", "old_lex", "new_sim", "new_lex"), CASES)
def test_rank_puts_the_replacement_above_what_it_replaced(
    old_sim: float, old_lex: float, new_sim: float, new_lex: float
) -> None:
    old = _candidate(
        "fact_old", "works at acme", similarity=old_sim, lexical=old_lex,
        superseded=True, replaced_by=["fact_new"],
    )  # fmt: skip
    new = _candidate("fact_new", "works at globex", similarity=new_sim, lexical=new_lex)
    other = _candidate("fact_x", "likes hiking", similarity=0.3, lexical=0.0)
    ranked = rank([old, new, other], now=NOW, options=RecallOptions(), cue="where does sam work", limit=10)
    ids = [r.id for r in ranked]
    assert ids[0] == "fact_new"  # first, and the old fact (when related at all) below it
    by_id = {r.id: r for r in ranked}
    if "fact_old" in by_id:
        assert by_id["fact_new"].relevance >= by_id["fact_old"].relevance


def test_rank_scales_a_past_memory_without_its_replacement() -> None:
    cue = "where does sam work"
    past = _candidate("a", "sam works at acme", similarity=0.8, lexical=2.0, superseded=True, replaced_by=[])
    same = _candidate("b", "sam works at acme", similarity=0.8, lexical=2.0)
    ranked = {r.id: r for r in rank([past, same], now=NOW, options=RecallOptions(), cue=cue, limit=10)}
    assert ranked["a"].score == pytest.approx(PAST_WEIGHT * ranked["b"].score)
