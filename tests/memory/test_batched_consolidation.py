"""Batched consolidation keeps what was said and when (issue 32, item 1).

Four sessions months apart consolidated in one batch, through the real store, under the offline rules
model and a scripted LLM stage model (litellm routed to an in-process fake): a compound statement
keeps both its facts, each fact is dated by the turn it was said in, and a move inside the batch keeps
the old home as history, closed when the move was said. Every read surface marks the old home alike.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes import AnyCall, stage_model
from tiermem import MemoryContext, MemorySystem, system
from tiermem.memory._cli._output import items_text
from tiermem.memory._tools import compact_item
from tiermem.memory.testing import FrozenClock, HashingEmbedder
from tiermem.prompts import consolidate, encode_consolidate, observe

pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

BASE = MemoryContext(namespace="batch", user_id="ana")
S1, S2, S3, S4 = (datetime(2024, m, d, 10, 0, tzinfo=UTC) for m, d in ((5, 2), (6, 10), (7, 20), (9, 1)))
SESSIONS = [
    (S1, "I live in Porto and work at Farfetch as a designer."),
    (S2, "My sister Moni plays the cello."),
    (S3, "I moved to Lisbon."),
    (S4, "I bake bread on Sundays."),
]
PORTO, LISBON = "The user lives in Porto.", "The user lives in Lisbon."
FARFETCH = "The user works at Farfetch as a designer."
CELLO, BREAD = "Moni, the user's sister, plays the cello.", "The user bakes bread on Sundays."

# What the scripted model observes in each message: one observation per thing said.
OBSERVED = {
    SESSIONS[0][1]: [("user", PORTO), ("user", FARFETCH)],
    SESSIONS[1][1]: [("moni", CELLO)],
    SESSIONS[2][1]: [("user", "The user moved to Lisbon.")],
    SESSIONS[3][1]: [("user", BREAD)],
    "I live in Porto.": [("user", PORTO)],
}


def _observe(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
    said = [m.content for m in call.inputs.messages if m.role == "user"]
    found = [(s, t) for text in said for s, t in OBSERVED.get(text, [])]
    return {"observations": [{"subject": s, "kind": "fact", "text": t, "salience": 0.8} for s, t in found]}


def _consolidate(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
    """A model's answer, out of order on purpose: the move first, naming the old home added later as "#N"
    (or the stored fact when the old home was consolidated in an earlier call)."""
    inputs = call.inputs
    by_text = {o.text: next(e.id for e in inputs.episodes if e.session_id == o.session_id) for o in inputs.observations}
    said = dict.fromkeys(p for pairs in OBSERVED.values() for p in pairs)
    adds = [(s, t) for s, t in said if t in by_text and "moved" not in t]
    ops: list[dict[str, Any]] = [
        {"op": "add", "subject": s, "text": t, "source_episode_ids": [by_text[t]]} for s, t in reversed(adds)
    ]
    if "The user moved to Lisbon." in by_text:
        n = next((i + 1 for i, op in enumerate(ops) if op["text"] == PORTO), None)
        stored = next((f.id for f in inputs.existing if f.text == PORTO), None)
        target = f"#{n + 1}" if n is not None else stored  # "#" counts the answer with the move put first
        move = {"op": "update", "subject": "user", "target_id": target, "text": LISBON}
        ops.insert(0, {**move, "source_episode_ids": [by_text["The user moved to Lisbon."]]})
    out: dict[str, Any] = {"operations": ops, "edges": []}
    if isinstance(inputs, encode_consolidate.Input):
        summaries = {e.id: " ".join(t for t, i in by_text.items() if i == e.id) for e in inputs.episodes}
        out["episodes"] = [
            {"id": i, "summary": summaries[i] or "The user chatted.", "subjects": ["user"]} for i in inputs.encode
        ]
    return out


def _rules() -> str:
    return "rules"


def _scripted() -> str:
    fake = stage_model(
        {observe.STAGE: _observe, consolidate.STAGE: _consolidate, encode_consolidate.STAGE: _consolidate}
    )
    return fake.model


MODELS = [pytest.param(_rules, id="rules"), pytest.param(_scripted, id="scripted-llm")]
ENCODE = [pytest.param("consolidation", id="encode-at-consolidation"), pytest.param("session", id="encode-at-end")]


def _open(store: str, model: Callable[[], str], clock: FrozenClock, encode: str = "consolidation") -> MemorySystem:
    return system(model=model(), store=store, embedder=HashingEmbedder(256), clock=clock, episodic={"encode": encode})


async def _captured(mem: MemorySystem, clock: FrozenClock) -> None:
    """The four sessions captured and ended as they happened, consolidated together afterwards."""
    for i, (when, text) in enumerate(SESSIONS):
        clock.set(when)
        ctx = BASE.model_copy(update={"session_id": f"s-{i + 1}"})
        await mem.capture(ctx, [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
        clock.advance(timedelta(minutes=5))
        await mem.end_session(ctx)
    clock.set(S4 + timedelta(days=1))
    result = await mem.consolidate(BASE)
    assert result.episodes == 4 and not result.refusals


async def _imported(mem: MemorySystem, clock: FrozenClock) -> None:
    clock.set(datetime(2026, 1, 5, tzinfo=UTC))
    history = [
        {"session_id": f"old-{i + 1}", "turns": [{"at": when.isoformat(), "messages": [
            {"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]}]}
        for i, (when, text) in enumerate(SESSIONS)
    ]  # fmt: skip
    report = await mem.import_conversations(BASE, history)
    assert report.consolidated == 4 and not report.deferred


async def _facts(mem: MemorySystem) -> dict[str, Any]:
    return {f.text: f for f in await mem.facts(BASE, include_inactive=True)}


async def _check_history(mem: MemorySystem) -> None:
    facts = await _facts(mem)
    assert {PORTO, LISBON, FARFETCH, CELLO, BREAD} <= set(facts), sorted(facts)
    porto, lisbon = facts[PORTO], facts[LISBON]
    assert (porto.status, porto.valid_from, porto.valid_to, porto.superseded_by) == ("superseded", S1, S3, lisbon.id)
    assert (lisbon.status, lisbon.valid_from, lisbon.valid_to) == ("active", S3, None)
    dated = {text: (facts[text].status, facts[text].valid_from) for text in (FARFETCH, CELLO, BREAD)}
    assert dated == {FARFETCH: ("active", S1), CELLO: ("active", S2), BREAD: ("active", S4)}
    versions = await mem.history(BASE, lisbon.id)
    assert [(v.item.text, v.status, v.valid_from, v.valid_to) for v in versions] == [
        (PORTO, "superseded", S1, S3),
        (LISBON, "active", S3, None),
    ]
    assert [t.created_at for t in versions[0].turns] == [S1] and [t.created_at for t in versions[1].turns] == [S3]


@pytest.mark.parametrize("encode", ENCODE)
@pytest.mark.parametrize("model", MODELS)
async def test_a_batch_of_four_sessions_keeps_the_old_home_and_both_halves(
    store_path: str, model: Callable[[], str], encode: str
) -> None:
    clock = FrozenClock(S1)
    mem = _open(store_path, model, clock, encode)
    await _captured(mem, clock)
    await _check_history(mem)


@pytest.mark.parametrize("model", MODELS)
async def test_an_imported_history_keeps_the_old_home_and_both_halves(
    store_path: str, model: Callable[[], str]
) -> None:
    clock = FrozenClock(S1)
    mem = _open(store_path, model, clock)
    await _imported(mem, clock)
    await _check_history(mem)


async def test_every_read_surface_marks_the_old_home_alike(store_path: str) -> None:
    """A move said a session after the old home, both consolidated together: the old home and the turn that
    said only it rank below the new home, marked "(past, until <the move's day>)" by recall, the tools (and
    MCP), the CLI's search and the context block."""
    clock = FrozenClock(S1)
    mem = _open(store_path, _rules, clock)
    for i, (when, text) in enumerate([(S1, "I live in Porto."), (S3, "I moved to Lisbon.")]):
        clock.set(when)
        ctx = BASE.model_copy(update={"session_id": f"s-{i + 1}"})
        await mem.capture(ctx, [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
        await mem.end_session(ctx)
    await mem.consolidate(BASE)
    mark = "(past, until 2024-07-20)"

    items = await mem.recall(BASE, "Where does the user live?", limit=10)

    assert items[0].text == LISBON and items[0].past_mark() == ""
    old = [i for i in items if "Porto" in i.text]
    assert {i.metadata.get("kind", i.tier) for i in old} >= {"semantic", "turn"}
    assert all(i.past_mark() == mark and compact_item(i)["past"] == mark for i in old)
    lines = items_text(items).splitlines()
    assert all(mark in line for line in lines if "Porto" in line) and mark not in lines[0]
    block = await mem.format_context(BASE.model_copy(update={"session_id": "s-3"}), "Where does the user live?")
    assert all(f"{mark} [user]" in line for line in block.splitlines() if "Porto" in line)


async def test_an_update_said_before_the_fact_it_targets_is_kept_as_its_history(store_path: str) -> None:
    """A model may "update" today's home from an older session (an import after live use): the older home
    is stored as what held before, and today's stays current."""
    now = datetime(2025, 3, 1, tzinfo=UTC)
    clock = FrozenClock(now)

    def reply(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
        target = next(f.id for f in call.inputs.existing if f.text == LISBON)
        out: dict[str, Any] = {"operations": [{"op": "update", "subject": "user", "target_id": target, "text": PORTO}]}
        if isinstance(call.inputs, encode_consolidate.Input):
            out["episodes"] = []
        return out

    fake = stage_model({observe.STAGE: _observe, consolidate.STAGE: reply, encode_consolidate.STAGE: reply})
    mem = system(model=fake.model, store=store_path, embedder=HashingEmbedder(256), clock=clock)
    lisbon = await mem.add_semantic_fact(BASE, LISBON, subject="user", valid_from=now)
    history = [{"session_id": "old", "turns": [{"at": S1.isoformat(), "messages": [
        {"role": "user", "content": "I live in Porto."}, {"role": "assistant", "content": "Noted."}]}]}]  # fmt: skip
    await mem.import_conversations(BASE, history)

    facts = await _facts(mem)
    assert (facts[LISBON].status, facts[LISBON].valid_from) == ("active", now)
    porto = facts[PORTO]
    assert (porto.status, porto.valid_from, porto.valid_to, porto.superseded_by) == ("superseded", S1, now, lisbon.id)
