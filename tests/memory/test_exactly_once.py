"""Every captured turn reaches every tier it should, exactly once: idempotent capture, turns pending at
``end_session``, crashes between writes, bounded retries, an embedder that fails, dated imports."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from tests.fakes import AnyCall, Switch, calls_for, default_reply, messages_of, session, stage_model
from tiermem import EmbedderError, MemoryContext, MemorySystem, system
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, ScriptedModel, TableName, Where
from tiermem.prompts import observe

Builder = Callable[..., MemorySystem]

pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")


@pytest.fixture
def build(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> Builder:
    def make(model: Any = "rules", **options: Any) -> MemorySystem:
        model = model.model if isinstance(model, FunctionModel) else model
        return system(model=model, store=store_path, embedder=options.pop("embedder", embedder), clock=clock, **options)

    return make


def _rows(mem: MemorySystem, table: TableName, ctx: MemoryContext) -> list[Any]:
    return list(mem.store.query(table, Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})))


def _observer_down(switch: Switch) -> FunctionModel:
    """Every stage answers, except the observer while ``switch.broken``."""

    def answer(messages: list[dict[str, Any]], call: AnyCall) -> Any:
        if switch.broken and call.stage is observe.STAGE:
            raise ConnectionError("provider down: 503 Service Unavailable")
        return default_reply(call)

    return FunctionModel(function=answer)


# -- idempotent capture -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [pytest.param("req-42", id="caller-key"), pytest.param(None, id="derived-key")],
)
async def test_rerun_of_a_capture_returns_the_first_turn(build: Builder, ctx: MemoryContext, key: str | None) -> None:
    mem = build()
    first = await mem.capture(ctx, messages_of("I bake rye bread every Sunday."), idempotency_key=key)
    again = await mem.capture(ctx, messages_of("I bake rye bread every Sunday."), idempotency_key=key)

    assert again.duplicate and not first.duplicate
    assert again.turn.id == first.turn.id
    assert len(_rows(mem, "turns", ctx)) == 1
    assert {e.id for e in again.entries} == {e.id for e in first.entries}
    assert len(_rows(mem, "working", ctx)) == len(first.entries)


async def test_the_same_words_after_another_turn_are_a_new_turn(build: Builder, ctx: MemoryContext) -> None:
    mem = build()
    for text in ("Yes.", "Should I book the table?", "Yes."):  # within a minute: only context tells them apart
        await mem.capture(ctx, messages_of(text))
    assert [t.messages[0].content for t in sorted(_rows(mem, "turns", ctx), key=lambda t: t.seq)] == [
        "Yes.", "Should I book the table?", "Yes.",
    ]  # fmt: skip


async def test_a_rerun_after_the_window_is_a_new_turn_unless_keyed(
    build: Builder, ctx: MemoryContext, clock: FrozenClock
) -> None:
    mem = build()
    await mem.capture(ctx, messages_of("Yes."))
    clock.advance(minutes=25)
    await mem.capture(ctx, messages_of("Yes."))  # the user said it again, later: a new turn
    await mem.capture(ctx, messages_of("Yes."), idempotency_key="k")
    await mem.capture(ctx, messages_of("Yes."), idempotency_key="k")
    assert len(_rows(mem, "turns", ctx)) == 3


async def test_a_rerun_finishes_a_turn_a_crash_left_pending(build: Builder, ctx: MemoryContext) -> None:
    switch = Switch(broken=True)
    mem = build(_observer_down(switch))
    first = await mem.capture(ctx, messages_of("I bake rye bread."), idempotency_key="k-1")
    assert first.deferred
    switch.broken = False
    again = await mem.capture(ctx, messages_of("I bake rye bread."), idempotency_key="k-1")
    assert not again.deferred and again.turn.status == "observed" and again.entries
    assert len(_rows(mem, "turns", ctx)) == 1


@pytest.mark.parametrize(
    "bad",
    [pytest.param({"idempotency_key": ""}, id="empty-key"), pytest.param({"at": "2024-01-01"}, id="at-not-datetime")],
)
async def test_bad_capture_options_raise_and_write_nothing(build: Builder, ctx: MemoryContext, bad: Any) -> None:
    from tiermem import InvalidArgumentError

    mem = build()
    with pytest.raises(InvalidArgumentError):
        await mem.capture(ctx, messages_of("hello"), **bad)
    assert _rows(mem, "turns", ctx) == []


# -- dated capture --------------------------------------------------------------------------------


async def test_a_dated_history_yields_records_dated_by_it(build: Builder, ctx: MemoryContext) -> None:
    mem = build()
    day = datetime(2024, 5, 3, 18, 30, tzinfo=UTC)
    for i, text in enumerate(["I live in Porto.", "I work at Acme Corp as a nurse."]):
        await mem.capture(ctx, messages_of(text), at=day + timedelta(minutes=i))
    episode = (await mem.end_session(ctx)).episode
    await mem.consolidate(ctx)

    assert episode is not None and episode.created_at.year == 2024 and episode.started_at == day
    facts = await mem.facts(ctx)
    assert facts and all(f.created_at.year == 2024 and f.valid_from and f.valid_from.year == 2024 for f in facts)
    assert all(e.created_at.year == 2024 for e in _rows(mem, "working", ctx))
    # re-importing the same dated turns adds nothing
    again = await mem.capture(ctx, messages_of("I live in Porto."), at=day)
    assert again.duplicate and len(_rows(mem, "turns", ctx)) == 2


# -- pending turns and sessions --------------------------------------------------------------------


async def test_a_turn_pending_at_end_session_reaches_the_episode_and_facts_later(
    build: Builder, ctx: MemoryContext
) -> None:
    switch = Switch(broken=False)
    mem = build(_observer_down(switch))
    await mem.capture(ctx, messages_of("I bake rye bread every Sunday."))
    switch.broken = True
    late = await mem.capture(ctx, messages_of("I keep bees on my roof."))
    assert late.deferred
    ended = await mem.end_session(ctx)
    assert ended.episode is not None and late.turn.id not in ended.episode.provenance  # honest provenance
    await mem.consolidate(ctx)

    switch.broken = False
    report = await mem.retry_pending(ctx)
    assert report.turns_ok == 1 and report.sessions == 1
    episodes = _rows(mem, "episodes", ctx)
    assert len(episodes) == 1 and late.turn.id in episodes[0].provenance
    assert any("bees" in f.text for f in await mem.facts(ctx))
    assert [e for e in _rows(mem, "working", ctx) if e.status == "active"] == []  # a closed session stays closed


async def test_end_session_rerun_after_a_crash_closes_working_memory(build: Builder, ctx: MemoryContext) -> None:
    mem = build()
    await mem.capture(ctx, messages_of("I bake rye bread every Sunday."))
    ended = await mem.end_session(ctx)
    assert ended.episode is not None
    # the crash: the episode was written, the working entries were not closed
    entries = [e.model_copy(update={"status": "active"}) for e in _rows(mem, "working", ctx)]
    mem.tiers.put_working(entries)

    again = await mem.end_session(ctx)
    assert again.episode is not None and again.episode.id == ended.episode.id
    assert {e.status for e in _rows(mem, "working", ctx)} == {"closed"}


async def test_a_consolidation_rerun_does_not_reinforce_its_own_facts(build: Builder, ctx: MemoryContext) -> None:
    mem = build(stage_model())
    await mem.capture(ctx, messages_of("I bake rye bread every Sunday."))
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    before = {f.id: f.reinforcements for f in await mem.facts(ctx)}
    # the crash: facts were written, the episode was not marked consolidated
    mem.tiers.put_episodes([e.model_copy(update={"status": "pending"}) for e in _rows(mem, "episodes", ctx)])
    await mem.consolidate(ctx)
    assert {f.id: f.reinforcements for f in await mem.facts(ctx)} == before
    assert len(_rows(mem, "facts", ctx)) == len(before)


# -- bounded retries ----------------------------------------------------------------------------


async def test_a_turn_is_parked_after_bounded_attempts_and_retried_when_asked(
    build: Builder, ctx: MemoryContext, clock: FrozenClock
) -> None:
    from tiermem.memory._retries import RetryPolicy

    switch = Switch(broken=True)
    mem = build(_observer_down(switch))
    mem.retries = mem._capture.retries = RetryPolicy(max_attempts=3, backoff=timedelta(seconds=10))
    result = await mem.capture(ctx, messages_of("I keep bees."))
    assert result.turn.retry_at == clock.now() + timedelta(seconds=10)
    assert (await mem.retry_pending(ctx, due_only=True)).turns == 0  # its backoff has not passed
    for _ in range(2):
        clock.advance(hours=1)
        await mem.retry_pending(ctx, due_only=True)
    (turn,) = _rows(mem, "turns", ctx)
    assert turn.status == "failed" and turn.attempts == 3  # parked
    assert (await mem.stats(ctx)).pending["turns_parked"] == 1
    switch.broken = False
    assert (await mem.retry_pending(ctx)).turns == 0  # parked: not retried unless asked
    report = await mem.retry_pending(ctx, include_parked=True)
    assert report.turns_ok == 1
    assert _rows(mem, "turns", ctx)[0].status == "observed"


# -- embedder failures ----------------------------------------------------------------------------


class _FlakyEmbedder(HashingEmbedder):
    broken = False

    def embed(self, texts: Any) -> np.ndarray:
        if self.broken:
            raise EmbedderError("embedder unavailable")
        return super().embed(texts)


async def test_a_turn_is_journaled_when_the_embedder_fails_and_found_by_text(
    build: Builder, ctx: MemoryContext
) -> None:
    flaky = _FlakyEmbedder(dimensions=64)
    mem = build("rules", embedder=flaky)
    flaky.broken = True
    result = await mem.capture(ctx, messages_of("My dentist is Dr. Okonkwo."))
    assert result.deferred and "embedder" in (result.error or "")
    (turn,) = _rows(mem, "turns", ctx)
    flaky.broken = False
    hits = await mem.recall(session(ctx, "s-2"), "Okonkwo")  # the next conversation
    assert turn.id in {h.id for h in hits}  # full-text search finds it before it has a vector
    assert (await mem.retry_pending(ctx)).turns_ok == 1
    assert _rows(mem, "working", ctx)


# -- two processes, one session -----------------------------------------------------------------

_WRITER = """
import asyncio, sys
from tiermem import MemoryContext, system
from tiermem.memory.testing import HashingEmbedder

async def main(store: str, name: str, n: int) -> None:
    mem = system(model="rules", store=store, embedder=HashingEmbedder(dimensions=64))
    ctx = MemoryContext(user_id="u-1", session_id="shared")
    for i in range(n):
        await mem.capture(ctx, [{"role": "user", "content": f"{name} says line {i}."}])

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def test_two_processes_capturing_into_one_session_lose_nothing(store_path: str, tmp_path: Any) -> None:
    import subprocess
    import sys

    from tests.subprocesses import clean_env

    system(model="rules", store=store_path, embedder=HashingEmbedder(dimensions=64))  # create the store first
    n = 60
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, store_path, name, str(n)],
            cwd=tmp_path,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("alpha", "beta")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    mem = system(model="rules", store=store_path, embedder=HashingEmbedder(dimensions=64))
    ctx = MemoryContext(user_id="u-1", session_id="shared")
    turns = _rows(mem, "turns", ctx)
    assert len(turns) == 2 * n and len({t.id for t in turns}) == 2 * n
    assert len({t.seq for t in turns}) == 2 * n  # sequence numbers unique across processes
    assert {t.status for t in turns} == {"observed"}


# -- capture off the response path ----------------------------------------------------------------


async def test_background_capture_returns_after_the_journal_and_observes_later(
    build: Builder, ctx: MemoryContext
) -> None:
    mem = build(stage_model(latency=0.05))
    results = [await mem.capture(ctx, messages_of(f"I planted {n} tulips."), background=True) for n in range(5)]
    assert all(r.queued and r.turn.status == "pending" and not r.entries for r in results)
    assert len(_rows(mem, "turns", ctx)) == 5  # durable before any observation
    await mem.flush()
    assert {t.status for t in _rows(mem, "turns", ctx)} == {"observed"}
    assert len(_rows(mem, "working", ctx)) == 5
    await mem.aclose()


def _gated_observer() -> tuple[FunctionModel, asyncio.Event]:
    """A model whose observer answers only once the test opens the gate."""
    gate = asyncio.Event()

    async def held(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
        await gate.wait()
        return default_reply(call)

    return stage_model({observe.STAGE: held}), gate


async def _observer_called(model: FunctionModel, times: int = 1) -> None:
    while len(calls_for(model, observe.STAGE)) < times:
        await asyncio.sleep(0.01)


async def test_the_next_capture_journals_while_a_background_observation_waits_for_the_model(
    build: Builder, ctx: MemoryContext
) -> None:
    model, gate = _gated_observer()
    mem = build(model)
    await mem.capture(ctx, messages_of("I keep bees."), background=True)
    await asyncio.wait_for(_observer_called(model), timeout=30)
    # The first turn's model call is in flight; the session is not held by it.
    second = await asyncio.wait_for(mem.capture(ctx, messages_of("I sell their honey."), background=True), timeout=30)
    assert second.queued and [t.status for t in _rows(mem, "turns", ctx)] == ["pending", "pending"]
    gate.set()
    await mem.flush()
    assert {t.status for t in _rows(mem, "turns", ctx)} == {"observed"}
    assert len(_rows(mem, "working", ctx)) == 2
    await mem.aclose()


async def test_callers_observing_one_pending_turn_at_once_share_one_model_call(
    build: Builder, ctx: MemoryContext
) -> None:
    model, gate = _gated_observer()
    mem = build(model)
    await mem.capture(ctx, messages_of("I keep bees."), background=True)
    await asyncio.wait_for(_observer_called(model), timeout=30)
    # end_session and retry_pending both find the turn pending while the queue observes it.
    ending = asyncio.create_task(mem.end_session(ctx))
    retrying = asyncio.create_task(mem.retry_pending())
    await asyncio.sleep(0.2)
    gate.set()
    ended, retried = await asyncio.wait_for(asyncio.gather(ending, retrying), timeout=30)
    await mem.flush()
    assert len(calls_for(model, observe.STAGE)) == 1
    assert ended.episode is not None and len(ended.episode.provenance) == 1
    assert len(_rows(mem, "working", ctx)) == 1 and retried.turns <= 1
    # Once observed here, an older copy of the pending turn does not call the model again.
    stale = [t.model_copy(update={"status": "pending"}) for t in _rows(mem, "turns", ctx)]
    again = await mem._capture.observe(ctx, stale[0])
    assert again.turn.status == "observed" and len(calls_for(model, observe.STAGE)) == 1
    await mem.aclose()


async def test_turns_queued_when_the_process_dies_are_observed_by_retry_pending(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    gone = system(model=stage_model(latency=5.0).model, store=store_path, embedder=embedder, clock=clock)
    await gone.capture(ctx, messages_of("I keep bees."), background=True)
    # the process dies here: the queue is lost, the journal is not
    mem = system(model="rules", store=store_path, embedder=embedder, clock=clock)
    assert (await mem.retry_pending()).turns_ok == 1
    assert {t.status for t in _rows(mem, "turns", ctx)} == {"observed"}


async def test_a_session_id_reused_after_its_episode_expired_keeps_every_turn(
    build: Builder, ctx: MemoryContext, clock: FrozenClock
) -> None:
    from tiermem.jobs import run_janitor

    mem = build(episodic={"ttl": timedelta(days=30)})
    await mem.capture(ctx, messages_of("I bake rye bread every Sunday."))
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    clock.advance(days=90)
    await run_janitor(mem)  # the episode expires
    assert {e.status for e in _rows(mem, "episodes", ctx)} <= {"expired"}

    again = [await mem.capture(ctx, messages_of(f"Back again, day {n}.")) for n in range(3)]
    ended = await mem.end_session(ctx)

    turns = _rows(mem, "turns", ctx)
    assert len({t.id for t in turns}) == len(turns) and {r.turn.id for r in again} <= {t.id for t in turns}
    assert ended.episode is not None and set(ended.episode.provenance) == {r.turn.id for r in again}


async def test_a_turn_observed_again_with_another_answer_keeps_only_the_new_entries(
    build: Builder, ctx: MemoryContext
) -> None:
    """The first answer's entries were written, then the process died before the turn was marked observed;
    the rerun's model answers otherwise: the turn's entries are exactly the second answer's."""

    def answer(*texts: str) -> dict[str, Any]:
        return {"observations": [{"subject": "user", "kind": "fact", "text": t, "salience": 0.7} for t in texts]}

    first = answer("The user bakes rye bread.", "The user bakes on Sundays.")
    second = answer("The user bakes sourdough rye bread every Sunday.")
    scripted = ScriptedModel([first, second])
    mem = build(scripted.model)
    done = await mem.capture(ctx, messages_of("I bake rye bread every Sunday."), idempotency_key="k-1")
    assert sorted(e.text for e in done.entries) == ["The user bakes on Sundays.", "The user bakes rye bread."]
    mem.tiers.put_turns([done.turn.model_copy(update={"status": "pending"})])  # the state the crash left

    again = await mem.capture(ctx, messages_of("I bake rye bread every Sunday."), idempotency_key="k-1")

    expected = ["The user bakes sourdough rye bread every Sunday."]
    assert again.turn.status == "observed" and [e.text for e in again.entries] == expected
    assert [e.text for e in _rows(mem, "working", ctx)] == expected
    assert [e.text for e in await mem.working_memory(ctx)] == expected
    assert scripted.remaining == 0
