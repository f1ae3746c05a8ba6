"""Feedback on recall (issue 13, item 7): receipts, reinforcement of what was used, a step down for what was not.

A real LanceDB in a temporary folder, the hashing embedder and a frozen clock; facts written with
``add_semantic_fact`` so each test knows exactly what recall can return.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tiermem import InvalidArgumentError, MemoryContext, MemorySystem, RankedMemoryItem, RecallResult, system
from tiermem.memory._govern._feedback import MAX_RECEIPTS, STEP
from tiermem.memory.testing import FrozenClock, HashingEmbedder

CTX = MemoryContext(namespace="fb", user_id="ana")
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(START)


@pytest.fixture
async def mem(tmp_path: Path, clock: FrozenClock) -> MemorySystem:
    mem = system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256), clock=clock)
    await mem.add_semantic_fact(CTX, "Ana is allergic to peanuts.", confidence=0.8)
    await mem.add_semantic_fact(CTX, "Ana likes peanut-free chocolate cake.", confidence=0.6)
    await mem.add_semantic_fact(CTX, "Ana plays the violin.", confidence=0.7)
    clock.advance(days=10)
    return mem


async def _recall(mem: MemorySystem, cue: str = "peanuts allergic chocolate cake") -> RecallResult:
    found = await mem.recall(CTX, cue, limit=10)
    assert isinstance(found, RecallResult)
    return found


def _by_text(items: list[RankedMemoryItem], word: str) -> RankedMemoryItem:
    return next(i for i in items if word in i.text)


async def test_recall_is_still_a_list_and_carries_a_receipt(mem: MemorySystem) -> None:
    found = await _recall(mem)
    assert isinstance(found, list) and found == list(found)
    assert all(isinstance(i, RankedMemoryItem) for i in found)
    assert found.receipt.startswith("rcpt_")
    assert (await _recall(mem)).receipt != found.receipt  # one receipt per recall


async def test_used_is_reinforced_and_shows_in_history(mem: MemorySystem, clock: FrozenClock) -> None:
    found = await _recall(mem)
    allergy = _by_text(found, "allergic")
    before = await mem.get(CTX, allergy.id)

    report = await mem.feedback(CTX, found.receipt, used=[allergy.id])

    assert report.reinforced == (allergy.id,) and not report.lowered and not report.repeated
    fact = next(f for f in await mem.facts(CTX) if f.id == allergy.id)
    assert fact.reinforcements == 1 and fact.reinforced_at == clock.now() and fact.confidence == 0.8
    after = await mem.get(CTX, allergy.id)
    assert after.confidence > before.confidence  # decay restarted from now
    (version,) = await mem.history(CTX, allergy.id)
    assert [(e["signal"], e["receipt"]) for e in version.feedback] == [("used", found.receipt)]


async def test_unhelpful_goes_down_a_step_and_never_below_zero(mem: MemorySystem) -> None:
    cake = _by_text(await _recall(mem), "cake")
    confidences = []
    for _ in range(8):
        found = await _recall(mem)
        await mem.feedback(CTX, found.receipt, unhelpful=[cake.id])
        confidences.append(next(f.confidence for f in await mem.facts(CTX) if f.id == cake.id))
    assert confidences[0] == pytest.approx(0.6 - STEP)
    assert confidences[-1] == 0.0 and min(confidences) == 0.0
    history = (await mem.history(CTX, cake.id))[-1].feedback
    assert [e["signal"] for e in history] == ["unhelpful"] * 8
    assert history[0]["confidence"] == [0.6, pytest.approx(0.5)]


async def test_a_pinned_memory_is_never_lowered(mem: MemorySystem) -> None:
    found = await _recall(mem)
    allergy = _by_text(found, "allergic")
    await mem.pin(CTX, allergy.id)
    report = await mem.feedback(CTX, found.receipt, unhelpful=[allergy.id])
    assert report.unchanged == (allergy.id,) and not report.lowered
    fact = next(f for f in await mem.facts(CTX) if f.id == allergy.id)
    assert fact.confidence == 0.8 and "feedback" not in fact.metadata


async def test_feedback_is_applied_once_per_receipt(mem: MemorySystem) -> None:
    found = await _recall(mem)
    allergy, cake = _by_text(found, "allergic"), _by_text(found, "cake")
    first = await mem.feedback(CTX, found.receipt, used=[allergy.id], unhelpful=[cake.id])
    again = await mem.feedback(CTX, found.receipt, used=[allergy.id], unhelpful=[cake.id])
    assert again.repeated and again.model_copy(update={"repeated": False}) == first
    facts = {f.id: f for f in await mem.facts(CTX)}
    assert facts[allergy.id].reinforcements == 1
    assert facts[cake.id].confidence == pytest.approx(0.6 - STEP)
    with pytest.raises(InvalidArgumentError, match="already given"):
        await mem.feedback(CTX, found.receipt, used=[cake.id])


def _ids(found: list[RankedMemoryItem]) -> dict[str, str]:
    return {"allergy": _by_text(found, "allergic").id, "cake": _by_text(found, "cake").id}


BAD: list[Any] = [
    pytest.param(lambda r, ids: {"receipt": r, "used": ["fact_not_returned"]}, "not returned", id="id-not-returned"),
    pytest.param(lambda r, ids: {"receipt": "rcpt_" + "0" * 32, "used": [ids["cake"]]}, "unknown", id="unknown"),
    pytest.param(lambda r, ids: {"receipt": r, "used": ids["cake"]}, "list", id="ids-as-a-string"),
    pytest.param(
        lambda r, ids: {"receipt": r, "used": [ids["cake"]], "unhelpful": [ids["cake"]]}, "both", id="both-ways"
    ),
    pytest.param(lambda r, ids: {"receipt": 7, "used": []}, "receipt", id="receipt-not-a-string"),
    pytest.param(lambda r, ids: {"receipt": r, "used": [ids["cake"], "x' OR '1'='1"]}, "not returned", id="hostile-id"),
]


@pytest.mark.parametrize(("call", "message"), BAD)
async def test_bad_feedback_is_refused_and_writes_nothing(mem: MemorySystem, call: Any, message: str) -> None:
    found = await _recall(mem)
    before = {f.id: f for f in await mem.facts(CTX)}
    args = call(found.receipt, _ids(found))
    with pytest.raises(InvalidArgumentError, match=message):
        await mem.feedback(CTX, args.pop("receipt"), **args)
    assert {f.id: f for f in await mem.facts(CTX)} == before
    # The receipt is still good after a refused call.
    assert (await mem.feedback(CTX, found.receipt, used=[_ids(found)["cake"]])).reinforced


async def test_another_users_receipt_is_unknown(mem: MemorySystem) -> None:
    found = await _recall(mem)
    other = MemoryContext(namespace="fb", user_id="bob")
    with pytest.raises(InvalidArgumentError, match="unknown receipt"):
        await mem.feedback(other, found.receipt, used=[found[0].id])


async def test_feedback_on_a_turn_or_a_forgotten_memory_changes_nothing(mem: MemorySystem) -> None:
    found = await _recall(mem)
    cake = _by_text(found, "cake")
    await mem.forget(CTX, cake.id)
    report = await mem.feedback(CTX, found.receipt, used=[cake.id])
    assert report.unchanged == (cake.id,) and not report.reinforced


def test_the_blocking_facade_gives_feedback(mem: MemorySystem) -> None:
    sync = mem.blocking()
    found = sync.recall(CTX, "violin", limit=5)
    violin = _by_text(found, "violin")
    assert sync.feedback(CTX, found.receipt, used=[violin.id]).reinforced == (violin.id,)


async def test_receipts_are_bounded(mem: MemorySystem) -> None:
    receipts = mem.capability.receipts
    assert receipts.limit == MAX_RECEIPTS
    receipts.limit = 3
    first = await _recall(mem)
    for _ in range(3):
        await _recall(mem)
    with pytest.raises(InvalidArgumentError, match="unknown receipt"):
        await mem.feedback(CTX, first.receipt, used=[first[0].id])


async def test_episodes_move_by_salience(mem: MemorySystem, clock: FrozenClock) -> None:
    ctx = CTX.model_copy(update={"session_id": "s-1"})
    await mem.capture(ctx, [{"role": "user", "content": "We baked a lemon tart for the violin recital."}])
    episode = (await mem.end_session(ctx)).episode
    assert episode is not None
    clock.advance(timedelta(hours=1))
    found = await mem.recall(CTX, "lemon tart recital", limit=10, tiers=["episodic"])
    item = next(i for i in found if i.id == episode.id)
    report = await mem.feedback(CTX, found.receipt, used=[item.id])
    assert report.reinforced == (episode.id,)
    (latest,) = await mem.recent_episodes(CTX, limit=1)
    assert latest.salience == pytest.approx(min(1.0, episode.salience + STEP))
