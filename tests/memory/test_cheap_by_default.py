"""Out of the box (no episodic option) a session's end makes no model call: its episode is provisional and
searchable at once, and the scheduled consolidation job writes summaries and facts with one call per batch of 4
episodes (or fewer holding 20 turns), waiting at most 3 days for a batch to fill; ``consolidate()`` called directly
never waits."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.fakes import calls_for, messages_of, session, stage_model
from tiermem import EpisodicOptions, InvalidArgumentError, MemoryContext, MemorySystem, system
from tiermem.jobs import close_idle_sessions, run_consolidation, run_digests
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder
from tiermem.prompts import consolidate, encode_consolidate, encode_episode, observe

pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")


def _default(fake: FunctionModel, store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> MemorySystem:
    return system(model=fake.model, store=store_path, embedder=embedder, clock=clock)  # no episodic option


async def _ended(
    mem: MemorySystem,
    ctx: MemoryContext,
    count: int,
    start: int = 0,
    *,
    clock: FrozenClock | None = None,
    turns: int = 5,
) -> None:
    """``count`` sessions of ``turns`` turns, ended; with ``clock``, each a minute after the one before."""
    for number in range(start, start + count):
        if clock is not None:
            clock.advance(minutes=1)
        sctx = session(ctx, f"s-{number}")
        for turn in range(turns):
            trees = number * turns + turn + 2
            await mem.capture(sctx, messages_of(f"I planted {trees} pear trees in Evora.", "Nice."))
        await mem.end_session(sctx)


def test_the_defaults_are_the_cheap_path() -> None:
    options = EpisodicOptions()

    assert (options.encode, options.batch_wait, options.batch_turns) == ("consolidation", timedelta(days=3), 20)


async def test_a_default_system_ends_a_session_without_a_model_call_and_recalls_it_at_once(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = stage_model()
    mem = _default(fake, store_path, embedder, clock)
    await mem.capture(ctx, messages_of("I keep three beehives on the roof in Evora.", "Lovely."))
    before = len(fake.calls)

    ended = await mem.end_session(ctx)

    assert len(fake.calls) == before and len(calls_for(fake, observe.STAGE)) == before == 1
    assert ended.episode is not None and ended.episode.status == "pending"
    assert ended.episode.metadata["provisional"] is True
    found = await mem.recall(ctx.model_copy(update={"session_id": "s-later"}), "beehives", tiers=["episodic"])
    assert ended.episode.id in [item.id for item in found]  # searchable before any consolidation


async def test_the_idle_session_job_closes_a_session_without_a_model_call(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = stage_model()
    mem = _default(fake, store_path, embedder, clock)
    await mem.capture(ctx, messages_of("I keep three beehives on the roof.", "Lovely."))

    report = await close_idle_sessions(mem, clock.advance(minutes=31))

    assert report["closed"] == 1 and [c.stage_name for c in fake.calls] == [observe.STAGE.name]


@pytest.mark.parametrize(
    ("sessions", "after", "waiting"),
    [
        (4, timedelta(minutes=15), 0),
        (3, timedelta(days=3) - timedelta(minutes=1), 1),
        (3, timedelta(days=3), 0),
    ],
    ids=["full-batch-at-once", "partial-batch-waits", "partial-batch-after-the-wait"],
)
async def test_the_default_consolidation_job_waits_for_a_batch_or_the_wait_then_makes_one_call(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    sessions: int,
    after: timedelta,
    waiting: int,
) -> None:
    fake = stage_model()
    mem = _default(fake, store_path, embedder, clock)
    await _ended(mem, ctx, sessions)

    report = await run_consolidation(mem, clock.advance(after))

    assert report["waiting"] == waiting and report["episodes"] == (0 if waiting else sessions)
    combined = calls_for(fake, encode_consolidate.STAGE)
    assert calls_for(fake, encode_episode.STAGE) == [] and calls_for(fake, consolidate.STAGE) == []
    assert len(combined) == (0 if waiting else 1)
    statuses = {e.status for e in mem.tiers.episodes(ctx)}
    assert statuses == ({"pending"} if waiting else {"consolidated"})
    if not waiting:
        (call,) = combined
        assert len(call.call.inputs.encode) == sessions  # type: ignore[union-attr]  # every summary in that call
        assert len(await mem.facts(ctx)) == sessions


async def test_four_sessions_cost_one_call_beyond_their_observer_calls_with_the_default_job(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = stage_model()
    mem = _default(fake, store_path, embedder, clock)
    await _ended(mem, ctx, 3)
    assert (await run_consolidation(mem, clock.advance(minutes=15)))["waiting"] == 1
    await _ended(mem, ctx, 1, start=3)

    await run_consolidation(mem, clock.advance(minutes=15))

    assert {c.stage_name for c in fake.calls} == {observe.STAGE.name, encode_consolidate.STAGE.name}
    assert (len(calls_for(fake, observe.STAGE)), len(calls_for(fake, encode_consolidate.STAGE))) == (20, 1)


async def test_only_full_batches_go_at_once_and_the_rest_waits_its_turn(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = stage_model()
    mem = _default(fake, store_path, embedder, clock)
    await _ended(mem, ctx, 5, clock=clock)  # one full batch and one more

    first = await run_consolidation(mem, clock.advance(minutes=15))

    assert (first["episodes"], first["waiting"]) == (4, 1)
    (call,) = calls_for(fake, encode_consolidate.STAGE)
    assert len(call.call.inputs.encode) == 4  # type: ignore[union-attr]
    left = [e for e in mem.tiers.episodes(ctx) if e.status == "pending"]
    assert [e.session_id for e in left] == ["s-4"]  # the latest session waits, the earliest went

    assert (await run_consolidation(mem, clock.advance(days=2)))["episodes"] == 0  # still within its wait
    last = await run_consolidation(mem, clock.advance(days=1))

    assert (last["episodes"], last["waiting"]) == (1, 0)
    assert len(calls_for(fake, encode_consolidate.STAGE)) == 2
    assert {e.status for e in mem.tiers.episodes(ctx)} == {"consolidated"}


async def test_consolidate_takes_at_most_limit_episodes_the_earliest_first(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = stage_model()
    mem = _default(fake, store_path, embedder, clock)
    await _ended(mem, ctx, 3, clock=clock)

    result = await mem.consolidate(ctx, limit=2)

    assert result.episodes == 2
    status = {e.session_id: e.status for e in mem.tiers.episodes(ctx)}
    assert status == {"s-0": "consolidated", "s-1": "consolidated", "s-2": "pending"}


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "2"], ids=["zero", "negative", "bool", "float", "str"])
async def test_consolidate_refuses_a_bad_limit(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext, limit: object
) -> None:
    mem = _default(stage_model(), store_path, embedder, clock)

    with pytest.raises(InvalidArgumentError, match="limit"):
        await mem.consolidate(ctx, limit=limit)  # type: ignore[arg-type]


async def test_consolidate_called_directly_does_not_wait_for_a_batch(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = stage_model()
    mem = _default(fake, store_path, embedder, clock)
    await _ended(mem, ctx, 1)

    result = await mem.consolidate(ctx)

    assert result.episodes == 1 and len(calls_for(fake, encode_consolidate.STAGE)) == 1
    (episode,) = mem.tiers.episodes(ctx)
    assert episode.status == "consolidated" and "provisional" not in episode.metadata


async def test_an_import_with_the_defaults_summarises_and_consolidates_every_session(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = stage_model()
    mem = _default(fake, store_path, embedder, clock)
    start = clock.now() - timedelta(days=30)
    history = [
        {
            "session_id": f"h-{n}",
            "turns": [{"at": start + timedelta(days=n), "messages": messages_of(f"I ran {n + 3} km today.", "Wow.")}],
        }
        for n in range(5)
    ]

    report = await mem.import_conversations(ctx, history)

    assert (report.episodes, report.consolidated, report.errors) == (5, 5, [])
    assert calls_for(fake, encode_episode.STAGE) == [] and len(calls_for(fake, encode_consolidate.STAGE)) == 2
    episodes = mem.tiers.episodes(ctx)
    assert {e.status for e in episodes} == {"consolidated"} and len(episodes) == 5
    assert not any(e.metadata.get("provisional") for e in episodes)  # every summary is the model's


@pytest.mark.parametrize(
    ("sessions", "turns", "batch_turns", "consolidated"),
    [(2, 10, 20, True), (2, 5, 20, False), (1, 20, 20, True), (3, 5, 15, True), (2, 10, None, False)],
    ids=["two-of-ten-turns-go", "two-of-five-wait", "one-long-session-goes", "a-lower-threshold", "turns-not-counted"],
)
async def test_a_partial_batch_holding_enough_turns_goes_without_waiting(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    sessions: int,
    turns: int,
    batch_turns: int | None,
    consolidated: bool,
) -> None:
    fake = stage_model()
    mem = system(
        model=fake.model, store=store_path, embedder=embedder, clock=clock, episodic={"batch_turns": batch_turns}
    )
    await _ended(mem, ctx, sessions, turns=turns)

    report = await run_consolidation(mem, clock.advance(minutes=15))

    assert (report["episodes"], report["waiting"]) == ((sessions, 0) if consolidated else (0, 1))
    assert len(calls_for(fake, encode_consolidate.STAGE)) == int(consolidated)
    assert {e.status for e in mem.tiers.episodes(ctx)} == ({"consolidated"} if consolidated else {"pending"})


async def test_a_full_batch_goes_and_a_short_rest_still_waits_for_its_turns(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = stage_model()
    mem = _default(fake, store_path, embedder, clock)
    await _ended(mem, ctx, 4, clock=clock)
    await _ended(mem, ctx, 1, start=4, clock=clock, turns=10)  # 10 turns: under the 20 that would send it

    first = await run_consolidation(mem, clock.advance(minutes=15))
    await _ended(mem, ctx, 1, start=5, clock=clock, turns=10)  # now 20 turns wait
    second = await run_consolidation(mem, clock.advance(minutes=15))

    assert (first["episodes"], first["waiting"], second["episodes"], second["waiting"]) == (4, 1, 2, 0)
    assert [len(c.call.inputs.encode) for c in calls_for(fake, encode_consolidate.STAGE)] == [4, 2]  # type: ignore[union-attr]


@pytest.mark.parametrize("turns", [5, 10], ids=["five-turns-a-day", "ten-turns-a-day"])
async def test_one_short_session_a_day_costs_at_most_1_15_calls_a_turn_with_the_default_jobs(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext, turns: int
) -> None:
    """A user once a day: the jobs run every few hours, every session's facts arrive within the wait."""
    fake = stage_model()
    mem = _default(fake, store_path, embedder, clock)
    days = 8
    for day in range(days):
        await _ended(mem, ctx, 1, start=day, turns=turns)
        for _ in range(6):  # the rest of the day, the jobs running every 4 hours
            now = clock.advance(hours=4)
            await run_consolidation(mem, now)
            await run_digests(mem, now)
    now = clock.advance(days=3)
    await run_consolidation(mem, now)
    await run_digests(mem, now)

    assert {e.status for e in mem.tiers.episodes(ctx)} == {"consolidated"}
    assert len(calls_for(fake, observe.STAGE)) == days * turns
    assert len(fake.calls) <= 1.15 * days * turns
    assert len(fake.calls) > days * turns  # consolidations and digests were made, just few
