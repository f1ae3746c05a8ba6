"""Importing past conversations: dated by the history, resumable after a crash, checked before writing."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes import AnyCall, Switch, calls_for, default_reply, stage_model
from tiermem import HistoryProgress, InvalidArgumentError, MemoryContext, MemorySystem, system
from tiermem.memory.testing import FrozenClock, HashingEmbedder, Where
from tiermem.prompts import observe, observe_window

# litellm lazily imports a module whose pydantic TypedDict warns on every model call (see test_capture_durability).
pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
LINES = [
    ["I live in Porto.", "I work at Acme Corp as a nurse."],
    ["My sister Ana plays the cello.", "I adopted a cat named Miso."],
    ["I started learning Japanese.", "I run every morning before work."],
    ["I moved to Lisbon.", "I work at Globex now."],
    ["Miso likes the balcony.", "I bake bread on Sundays."],
]
TURNS = sum(len(lines) for lines in LINES)


class _Crash(Exception):
    """Stands in for the process dying mid-import."""


def _history() -> list[dict[str, Any]]:
    return [
        {
            "session_id": f"old-{i}",
            "turns": [
                {
                    "at": (START + timedelta(days=7 * i, minutes=t)).isoformat(),
                    "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
                }
                for t, text in enumerate(lines)
            ],
        }
        for i, lines in enumerate(LINES)
    ]


def _census(mem: MemorySystem, ctx: MemoryContext) -> dict[str, int]:
    where = Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})
    return {table: len(mem.store.query(table, where)) for table in ("turns", "working", "episodes", "facts")}  # type: ignore[arg-type]


def _state(mem: MemorySystem, ctx: MemoryContext) -> dict[str, Any]:
    """What an import leaves, by content: the turns, the entries, the episodes and the facts."""
    where = Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})
    turns = mem.store.query("turns", where)
    working = mem.store.query("working", where)
    episodes = mem.store.query("episodes", where)
    facts = mem.store.query("facts", where)
    return {
        "turns": sorted((t.id, t.session_id, t.seq, t.status, t.context) for t in turns),
        "working": sorted((e.id, e.text, e.status) for e in working),
        "episodes": sorted((e.id, e.summary, e.status) for e in episodes),
        "facts": sorted((f.text, f.status) for f in facts),
    }


@pytest.fixture
def mem(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> MemorySystem:
    return system(model="rules", store=store_path, embedder=embedder, clock=clock)


@pytest.mark.parametrize("concurrency", [1, 3], ids=["sequential", "concurrent"])
async def test_an_imported_history_is_dated_by_it(mem: MemorySystem, concurrency: int) -> None:
    ctx = MemoryContext(user_id="u-hist")
    seen: list[HistoryProgress] = []
    report = await mem.import_conversations(ctx, _history(), concurrency=concurrency, on_progress=seen.append)

    assert (report.conversations, report.turns, report.duplicates, report.episodes) == (5, TURNS, 0, 5)
    assert report.consolidated == 5 and report.errors == []
    assert seen[-1].turns_done == seen[-1].turns_total == TURNS and seen[-1].conversations_done == 5
    assert [p.turns_done for p in seen] == sorted(p.turns_done for p in seen)
    episodes = mem.store.query("episodes", Where(eq={"namespace": "default", "user_id": "u-hist"}))
    assert {e.status for e in episodes} == {"consolidated"}
    assert all(e.started_at.year == 2024 and e.created_at.year == 2024 for e in episodes)
    facts = await mem.facts(ctx)
    assert facts and all(f.created_at.year == 2024 and f.reinforced_at.year == 2024 for f in facts)
    turns = mem.store.query("turns", Where(eq={"namespace": "default", "user_id": "u-hist", "session_id": "old-1"}))
    assert [(t.seq, t.status, t.context) for t in sorted(turns, key=lambda t: t.seq)] == [
        (0, "observed", ""),
        (1, "observed", "My sister Ana plays the cello. Noted."),
    ]


async def test_an_imported_turn_is_the_turn_capture_names(mem: MemorySystem) -> None:
    ctx = MemoryContext(user_id="u-hist")
    await mem.import_conversations(ctx, _history())
    first = _history()[0]
    turn = first["turns"][1]

    again = await mem.capture(
        ctx.model_copy(update={"session_id": first["session_id"]}),
        turn["messages"],
        at=datetime.fromisoformat(turn["at"]),
    )

    assert again.duplicate and again.turn.seq == 1
    assert _census(mem, ctx)["turns"] == TURNS


async def test_an_import_over_captured_turns_skips_them(mem: MemorySystem) -> None:
    ctx = MemoryContext(user_id="u-hist")
    first = _history()[0]
    sctx = ctx.model_copy(update={"session_id": first["session_id"]})
    turn = first["turns"][0]
    await mem.capture(sctx, turn["messages"], at=datetime.fromisoformat(turn["at"]))

    report = await mem.import_conversations(ctx, _history())

    assert (report.turns, report.duplicates) == (TURNS, 1)
    assert _census(mem, ctx)["turns"] == TURNS


async def test_a_turn_captured_while_the_import_observes_it_keeps_the_captures_row_and_entries(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    live = system(model="rules", store=store_path, embedder=embedder, clock=clock)  # another process, capturing
    ctx = MemoryContext(user_id="u-hist")
    first = _history()[0]
    raced = first["turns"][0]

    async def observed(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
        said = [m.content for m in call.inputs.messages if m.role == "user"]
        if said == [raced["messages"][0]["content"]]:  # the same turn, captured live while the import observes it
            sctx = ctx.model_copy(update={"session_id": first["session_id"]})
            await live.capture(sctx, raced["messages"], at=datetime.fromisoformat(raced["at"]))
        return {"observations": [{"subject": "user", "kind": "fact", "text": f"Imported: {t}", "salience": 0.6}
                                 for t in said]}  # fmt: skip

    mem = system(model=stage_model({observe.STAGE: observed}).model, store=store_path, embedder=embedder, clock=clock)
    report = await mem.import_conversations(ctx, _history(), observe_window=1)

    where = Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})
    turns = {t.id: t for t in mem.store.query("turns", where)}
    entries = mem.store.query("working", where)
    (captured,) = [t for t in turns.values() if t.messages[0].content == raced["messages"][0]["content"]]
    theirs = [e.text for e in entries if captured.id in e.provenance]
    assert (report.turns, report.duplicates, report.deferred) == (TURNS, 1, 0)
    assert len(turns) == TURNS and {t.status for t in turns.values()} == {"observed"}
    assert theirs and not any(text.startswith("Imported:") for text in theirs)  # the capture's observation stands
    assert sum(e.text.startswith("Imported:") for e in entries) == TURNS - 1


def _crash_on_progress(at: int) -> Callable[[MemorySystem], Callable[[HistoryProgress], None] | None]:
    """The process dies at the ``at``-th progress report (the first comes before anything is written)."""

    def arm(mem: MemorySystem) -> Callable[[HistoryProgress], None]:
        seen: list[HistoryProgress] = []

        def report(progress: HistoryProgress) -> None:
            seen.append(progress)
            if len(seen) == at:
                raise _Crash("the process died here")

        return report

    return arm


def _crash_in(method: str, call: int) -> Callable[[MemorySystem], None]:
    """The process dies right after the ``call``-th real ``method`` call of the system or its tiers wrote."""

    def arm(mem: MemorySystem) -> None:
        owner: Any = mem.tiers if hasattr(mem.tiers, method) and not hasattr(mem, method) else mem
        real = getattr(owner, method)
        calls = [0]

        def count() -> None:
            calls[0] += 1
            if calls[0] == call:
                raise _Crash(f"the process died after {method} #{call}")

        if inspect.iscoroutinefunction(real):

            async def crashing_async(*args: Any, **kwargs: Any) -> Any:
                result = await real(*args, **kwargs)
                count()
                return result

            setattr(owner, method, crashing_async)
        else:

            def crashing(*args: Any, **kwargs: Any) -> Any:
                result = real(*args, **kwargs)
                count()
                return result

            setattr(owner, method, crashing)

    return arm


@pytest.mark.parametrize(
    "arm",
    [
        pytest.param(_crash_on_progress(2), id="after-the-first-journal"),
        pytest.param(_crash_on_progress(5), id="mid-observation"),
        pytest.param(_crash_in("add_working_entries", 2), id="after-entries-before-status"),
        pytest.param(_crash_in("journal_many", 1), id="after-a-groups-turns"),
        pytest.param(_crash_in("end_sessions", 1), id="after-an-end"),
        pytest.param(_crash_in("consolidate", 1), id="after-the-first-consolidation"),
        pytest.param(_crash_in("digest", 1), id="after-the-digest"),
    ],
)
@pytest.mark.parametrize("concurrency", [1, 3], ids=["sequential", "concurrent"])
async def test_an_interrupted_import_is_finished_by_running_it_again(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    tmp_path: Any,
    arm: Callable[[MemorySystem], Any],
    concurrency: int,
) -> None:
    clean = system(model="rules", store=str(tmp_path / "clean"), embedder=embedder, clock=clock)
    ctx = MemoryContext(user_id="u-hist")
    await clean.import_conversations(ctx, _history(), concurrency=concurrency)

    crashed = system(model="rules", store=store_path, embedder=embedder, clock=clock)
    progress = arm(crashed)
    with pytest.raises(_Crash):
        await crashed.import_conversations(ctx, _history(), concurrency=concurrency, on_progress=progress)
    journaled = _census(crashed, ctx)["turns"]
    mem = system(model="rules", store=store_path, embedder=embedder, clock=clock)  # the process restarted
    report = await mem.import_conversations(ctx, _history(), concurrency=concurrency)

    assert report.duplicates == journaled and report.turns == TURNS
    assert _census(mem, ctx) == _census(clean, ctx)
    assert _state(mem, ctx) == _state(clean, ctx)


async def test_a_cancelled_import_leaves_no_write_behind(mem: MemorySystem) -> None:
    ctx = MemoryContext(user_id="u-hist")
    tables = ("turns", "working", "episodes", "facts")
    started = asyncio.Event()

    def progress(p: HistoryProgress) -> None:
        if p.turns_done >= 3:
            started.set()

    task = asyncio.ensure_future(mem.import_conversations(ctx, _history(), concurrency=3, on_progress=progress))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    versions = {t: mem.store.version(t) for t in tables}  # type: ignore[arg-type]
    await asyncio.sleep(0.3)  # room for a worker thread the cancellation left running to commit
    assert {t: mem.store.version(t) for t in tables} == versions  # type: ignore[arg-type]

    report = await mem.import_conversations(ctx, _history(), concurrency=3)
    assert report.turns == TURNS and report.errors == []
    assert {t.status for t in mem.store.query("turns", Where(eq={"user_id": "u-hist"}))} == {"observed"}


@pytest.mark.parametrize(("window", "stage", "calls"), [(1, observe.STAGE, TURNS), (8, observe_window.STAGE, 5)],
                         ids=["per-turn", "by-windows"])  # fmt: skip
async def test_observer_calls_in_flight_stay_within_the_concurrency(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, window: int, stage: Any, calls: int
) -> None:
    flying, peaks = [0], [0]

    async def observed(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
        flying[0] += 1
        peaks[0] = max(peaks[0], flying[0])
        await asyncio.sleep(0.01)  # the call is in flight: the others may start
        flying[0] -= 1
        return default_reply(call)

    fake = stage_model({stage: observed})
    mem = system(model=fake.model, store=store_path, embedder=embedder, clock=clock)
    ctx = MemoryContext(user_id="u-hist")
    report = await mem.import_conversations(ctx, _history(), concurrency=3, observe_window=window)

    assert report.turns == TURNS and report.deferred == 0
    assert len(calls_for(fake, stage)) == calls  # a window per session: each has two turns
    assert 1 < peaks[0] <= 3
    assert _census(mem, ctx)["working"] == TURNS


async def test_turns_whose_observation_fails_wait_for_retry_pending(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    switch = Switch()

    def flaky(messages: list[dict[str, Any]], call: AnyCall) -> Any:
        return "Sure! Noted." if switch.broken else default_reply(call)

    mem = system(model=stage_model({observe.STAGE: flaky}).model, store=store_path, embedder=embedder, clock=clock)
    ctx = MemoryContext(user_id="u-hist")
    report = await mem.import_conversations(ctx, _history()[:2])

    turns = mem.store.query("turns", Where(eq={"user_id": "u-hist"}))
    assert report.deferred >= 4 and report.episodes == 0
    assert {(t.status, "did not validate" in (t.error or "")) for t in turns} == {("pending", True)}
    assert _census(mem, ctx)["working"] == 0
    switch.broken = False
    retried = await mem.retry_pending()
    assert retried.turns_ok == 4
    assert {t.status for t in mem.store.query("turns", Where(eq={"user_id": "u-hist"}))} == {"observed"}
    again = await mem.import_conversations(ctx, _history()[:2])
    assert (again.duplicates, again.deferred) == (4, 0)


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param({"session_id": "", "turns": []}, id="empty-session-id"),
        pytest.param({"session_id": "s", "turns": [{"at": "yesterday", "messages": []}]}, id="bad-time"),
        pytest.param(
            {"session_id": "s", "turns": [{"at": "2024-01-01", "messages": [{"role": "x"}]}]}, id="bad-message"
        ),
        pytest.param({"session_id": "s", "turns": "hello"}, id="turns-not-a-list"),
    ],
)
async def test_a_bad_history_raises_and_writes_nothing(mem: MemorySystem, broken: dict[str, Any]) -> None:
    ctx = MemoryContext(user_id="u-hist")
    with pytest.raises(InvalidArgumentError):
        await mem.import_conversations(ctx, [*_history(), broken])
    assert _census(mem, ctx) == {"turns": 0, "working": 0, "episodes": 0, "facts": 0}
