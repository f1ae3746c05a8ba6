"""An import observes its history by windows of consecutive turns: fewer calls, the same entries.

One observer call per window of up to ``observe_window`` turns of one session (``prompts/observe_window.py``),
as many as fit the model's input; each entry is the one the turn alone would get. A window whose answer
does not validate after its retries is observed turn by turn; a turn too large for a window is observed alone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes import AnyCall, Switch, calls_for, default_reply, stage_model
from tiermem import InvalidArgumentError, MemoryContext, MemorySystem, system
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, Where
from tiermem.prompts import observe, observe_window

pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

START = datetime(2024, 5, 1, 18, 0, tzinfo=UTC)
SAID = [
    "My sister Ana plays the cello.",
    "I work at Acme Corp as a nurse.",
    "I adopted a cat named Miso.",
    "Miso sleeps on the balcony.",
    "I started learning Japanese.",
    "My brother Tom lives in Porto.",
    "I run every morning before work.",
    "I bake bread on Sundays.",
    "I moved to Lisbon last spring.",
    "Ana is moving to Berlin.",
    "I am allergic to peanuts.",
]
CTX = MemoryContext(user_id="u-window")


def _history(sessions: int = 2, turns: int = len(SAID)) -> list[dict[str, Any]]:
    return [
        {
            "session_id": f"past-{s}",
            "turns": [
                {
                    "at": START + timedelta(days=s, minutes=t),
                    "messages": [
                        {"role": "user", "content": SAID[(s + t) % len(SAID)]},
                        {"role": "assistant", "content": "Noted."},
                    ],
                }
                for t in range(turns)
            ],
        }
        for s in range(sessions)
    ]


def _entries(mem: MemorySystem) -> list[dict[str, Any]]:
    """Every working entry, every field, the prompt version left out."""
    rows = mem.store.query("working", Where(eq={"user_id": CTX.user_id}))
    return sorted(
        ({**e.model_dump(exclude={"metadata"}), **{k: v for k, v in e.metadata.items() if k != "prompt_version"}}
         for e in rows),
        key=lambda e: e["id"],
    )  # fmt: skip


def _versions(mem: MemorySystem) -> set[str]:
    return {e.metadata["prompt_version"] for e in mem.store.query("working", Where(eq={"user_id": CTX.user_id}))}


def _state(mem: MemorySystem) -> dict[str, Any]:
    where = Where(eq={"user_id": CTX.user_id})
    return {
        "turns": sorted((t.id, t.seq, t.status, t.attempts) for t in mem.store.query("turns", where)),
        "working": sorted((e.id, e.text, e.subject, e.status) for e in mem.store.query("working", where)),
        "episodes": sorted((e.id, e.summary, e.status) for e in mem.store.query("episodes", where)),
        "facts": sorted((f.text, f.subject, f.status) for f in mem.store.query("facts", where)),
    }


async def test_the_rules_model_writes_the_same_entries_whatever_the_window(
    tmp_path: Any, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    stores = {}
    for window in (1, 5, 32):
        mem = system(model="rules", store=str(tmp_path / f"w{window}"), embedder=embedder, clock=clock)
        report = await mem.import_conversations(CTX, _history(), observe_window=window)
        assert (report.turns, report.deferred, report.errors) == (2 * len(SAID), 0, [])
        stores[window] = mem

    per_turn = _entries(stores[1])
    assert per_turn and {e["subject"] for e in per_turn} > {"user"}  # the rules attribute to other people too
    assert _entries(stores[5]) == per_turn and _entries(stores[32]) == per_turn
    assert _state(stores[5]) == _state(stores[1]) == _state(stores[32])
    assert _versions(stores[1]) == {observe.VERSION}
    assert _versions(stores[32]) == {observe_window.VERSION}  # 11 turns a session: every turn in a window
    assert _versions(stores[5]) == {observe_window.VERSION, observe.VERSION}  # 5 + 5, and a lone last turn alone


@pytest.mark.parametrize(
    ("window", "window_calls", "turn_calls"),
    [(1, 0, 8), (3, 3, 0), (4, 2, 0), (8, 1, 0), (32, 1, 0)],
    ids=["one-per-turn", "three", "four", "eight", "larger-than-the-session"],
)
async def test_a_window_is_one_observer_call(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, window: int, window_calls: int, turn_calls: int
) -> None:
    fake = stage_model()
    mem = system(model=fake.model, store=store_path, embedder=embedder, clock=clock)

    report = await mem.import_conversations(CTX, _history(sessions=1, turns=8), observe_window=window)

    assert (report.turns, report.deferred) == (8, 0)
    assert (len(calls_for(fake, observe_window.STAGE)), len(calls_for(fake, observe.STAGE))) == (
        window_calls,
        turn_calls,
    )
    assert len(_entries(mem)) == 8  # one observation per user message, each on its own turn
    for call in calls_for(fake, observe_window.STAGE):  # consecutive turns, numbered from 1 in the prompt
        assert call.call is not None and call.messages[1]["content"].startswith("Turn 1 (at ")


async def test_entries_of_a_window_are_those_of_its_turns_alone(
    tmp_path: Any, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    fake = stage_model()
    one = system(model=fake.model, store=str(tmp_path / "one"), embedder=embedder, clock=clock)
    four = system(model=fake.model, store=str(tmp_path / "four"), embedder=embedder, clock=clock)

    await one.import_conversations(CTX, _history(), observe_window=1)
    alone = len(fake.calls)
    await four.import_conversations(CTX, _history(), observe_window=4)

    assert _entries(four) == _entries(one)
    assert len(fake.calls) - alone < alone


def _out_of_window(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
    """Every observation filed under a turn past the window's end."""
    reply = default_reply(call)
    return {"observations": [{**o, "turn": len(call.inputs.turns) + 1} for o in reply["observations"]]}


async def test_an_answer_naming_a_turn_outside_the_window_is_retried_then_observed_per_turn(
    tmp_path: Any, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    fake = stage_model({observe_window.STAGE: _out_of_window})
    mem = system(model=fake.model, store=str(tmp_path / "bad"), embedder=embedder, clock=clock)
    clean = system(model="rules", store=str(tmp_path / "clean"), embedder=embedder, clock=clock)
    history = _history(sessions=1, turns=8)
    await clean.import_conversations(CTX, history, observe_window=1)

    report = await mem.import_conversations(CTX, history, observe_window=4)

    assert (report.turns, report.deferred, report.errors) == (8, 0, [])
    # Two windows, each asked three times (two validation retries), then each turn alone.
    assert len(calls_for(fake, observe_window.STAGE)) == 6 and len(calls_for(fake, observe.STAGE)) == 8
    fed_back = [m["content"] for c in calls_for(fake, observe_window.STAGE) for m in c.messages if m["role"] == "user"]
    assert any("did not validate" in m and "less than or equal to 4" in m for m in fed_back)
    assert mem.usage()["observe_window"]["failures"] == 2
    assert [e["id"] for e in _entries(mem)] == [e["id"] for e in _entries(clean)]
    assert _versions(mem) == {observe.VERSION}
    assert {t.status for t in mem.store.query("turns", Where(eq={"user_id": CTX.user_id}))} == {"observed"}


async def test_turns_of_a_failed_window_that_fail_alone_wait_as_capture_leaves_them(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    switch = Switch()

    def broken(messages: list[dict[str, Any]], call: AnyCall) -> Any:
        return "Sure! Noted." if switch.broken else default_reply(call)

    fake = stage_model({observe.STAGE: broken, observe_window.STAGE: broken})
    mem = system(model=fake.model, store=store_path, embedder=embedder, clock=clock)

    report = await mem.import_conversations(CTX, _history(sessions=1, turns=4), observe_window=4)

    turns = mem.store.query("turns", Where(eq={"user_id": CTX.user_id}))
    # One window asked three times, then each turn alone three times (and again when the session ends).
    assert report.deferred >= 4 and len(calls_for(fake, observe_window.STAGE)) == 3
    assert len(calls_for(fake, observe.STAGE)) in {4 * 3, 2 * 4 * 3}
    assert {(t.status, "did not validate" in (t.error or "")) for t in turns} == {("pending", True)}
    assert _entries(mem) == []
    switch.broken = False
    assert (await mem.retry_pending()).turns_ok == 4
    again = await mem.import_conversations(CTX, _history(sessions=1, turns=4), observe_window=4)
    assert (again.duplicates, again.deferred) == (4, 0) and len(_entries(mem)) == 4


async def test_a_turn_too_large_for_a_window_is_observed_alone_in_parts(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    def short(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:  # texts within the 1000 allowed
        reply = default_reply(call)
        if call.stage is observe.STAGE:
            reply["observations"] = [{**o, "text": o["text"][:300]} for o in reply["observations"]]
        return reply

    fake = FunctionModel(short, context_window=2500)
    mem = system(model=fake.model, store=store_path, embedder=embedder, clock=clock)
    history = _history(sessions=1, turns=5)
    huge = " ".join(f"Fact number {n} about my week is worth keeping." for n in range(400))  # ~4k tokens
    history[0]["turns"][2]["messages"][0]["content"] = huge

    report = await mem.import_conversations(CTX, history, observe_window=4, consolidate=False)  # the observer only

    assert (report.turns, report.deferred, report.errors) == (5, 0, [])
    windows = calls_for(fake, observe_window.STAGE)
    parts = calls_for(fake, observe.STAGE)
    assert len(windows) == 2 and len(parts) >= 2  # turns 1-2 and 4-5 by windows; turn 3 alone, in parts
    assert not any(c.refused for c in fake.calls)
    assert all("Fact number" not in c.prompt for c in windows)
    stored = mem.store.query("working", Where(eq={"user_id": CTX.user_id}))
    third = [e for e in stored if e.seq == 2]
    assert third and all(e.metadata["prompt_version"] == observe.VERSION and e.metadata["parts"] >= 2 for e in third)
    assert {e.seq for e in stored} == {0, 1, 2, 3, 4}


@pytest.mark.parametrize(
    "window",
    [0, -1, 33, True, 2.5, "4", None],
    ids=["zero", "negative", "above-the-maximum", "bool", "float", "string", "none"],
)
async def test_a_bad_observe_window_is_refused_and_writes_nothing(mem_rules: MemorySystem, window: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="observe_window"):
        await mem_rules.import_conversations(CTX, _history(), observe_window=window)
    where = Where(eq={"user_id": CTX.user_id})
    assert [len(mem_rules.store.query(t, where)) for t in ("turns", "working", "episodes", "facts")] == [0, 0, 0, 0]


@pytest.fixture
def mem_rules(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> MemorySystem:
    return system(model="rules", store=store_path, embedder=embedder, clock=clock)


class _Crash(Exception):
    """Stands in for the process dying mid-import."""


@pytest.mark.parametrize("crash_at", [2, 4], ids=["after-a-window", "after-two-windows"])
async def test_an_import_by_windows_interrupted_mid_observation_is_finished_by_a_rerun(
    tmp_path: Any, embedder: HashingEmbedder, clock: FrozenClock, crash_at: int
) -> None:
    clean = system(model="rules", store=str(tmp_path / "clean"), embedder=embedder, clock=clock)
    await clean.import_conversations(CTX, _history(sessions=3), observe_window=4)
    seen = [0]

    def progress(_: Any) -> None:
        seen[0] += 1
        if seen[0] == crash_at + 1:  # the first report comes before anything is observed
            raise _Crash

    path = str(tmp_path / "crashed")
    crashed = system(model="rules", store=path, embedder=embedder, clock=clock)
    with pytest.raises(_Crash):
        await crashed.import_conversations(CTX, _history(sessions=3), observe_window=4, on_progress=progress)
    # A group's turns are journaled once observed: the crashed run left none, the rerun imports them all.
    assert crashed.store.count("turns") == 0
    rerun = system(model="rules", store=path, embedder=embedder, clock=clock)
    report = await rerun.import_conversations(CTX, _history(sessions=3), observe_window=4)

    assert report.duplicates == 0 and report.turns == 3 * len(SAID) and report.errors == []
    assert _state(rerun) == _state(clean)
    assert _entries(rerun) == _entries(clean)
