"""Scheduled pipeline jobs: consolidation, digests, idle sessions and retries, on an injected clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from tiermem import MemoryContext, MemorySystem, ModelError, UsageLedger, system
from tiermem.jobs import close_idle_sessions, retry_pending, run_consolidation, run_digests
from tiermem.memory._stage import Stage
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, StageCall, Where
from tiermem.pipelines import RulesStages
from tiermem.prompts import observe

# litellm imports some modules lazily on the first fake-model call; one of them trips a pydantic
# UserWarning that pyproject's filterwarnings="error" would turn into a failed model call.
pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT", bound=BaseModel)


class FlakyStages:
    """The offline rules model, except that the stages in ``failing`` raise like a provider outage."""

    name = "flaky-rules"

    def __init__(self) -> None:
        self.ledger = UsageLedger()
        self.failing: set[str] = set()
        self.calls: list[str] = []
        self._rules = RulesStages(self.ledger)

    async def run(self, stage: Stage[InputT, OutputT], inputs: InputT) -> OutputT:
        self.calls.append(stage.name)
        if stage.name in self.failing:
            raise ModelError(f"{stage.name}: provider unavailable", stage=stage.name, attempts=1)
        return await self._rules.run(stage, inputs)


def make_system(store_path: str, clock: FrozenClock, embedder: HashingEmbedder, **options: Any) -> MemorySystem:
    return system(model=options.pop("model", "rules"), store=store_path, embedder=embedder, clock=clock, **options)


def say(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


# -- consolidation ----------------------------------------------------------------------------


async def test_run_consolidation_consolidates_every_user_with_pending_episodes(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder
) -> None:
    mem = make_system(store_path, clock, embedder)
    ann, bob = MemoryContext(user_id="ann", session_id="a-1"), MemoryContext(user_id="bob", session_id="b-1")
    idle = MemoryContext(user_id="cid", session_id="c-1")
    await mem.capture(ann, say("I work as a nurse in Porto."))
    await mem.capture(bob, say("I adopted a dog named Biscuit."))
    await mem.capture(idle, say("I play the violin."))
    await mem.end_session(ann)
    await mem.end_session(bob)  # cid's session is still open: no episode yet

    report = await run_consolidation(mem, clock.advance(days=3))  # the default batch wait has passed

    assert (report["users"], report["episodes"], report["deferred"]) == (2, 2, 0)
    assert {e.status for e in mem.tiers.episodes(ann) + mem.tiers.episodes(bob)} == {"consolidated"}
    assert (len(await mem.facts(ann)) > 0, len(await mem.facts(bob)) > 0, await mem.facts(idle)) == (True, True, [])


async def _ended_sessions(mem: MemorySystem, user: str, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        ctx = MemoryContext(user_id=user, session_id=f"s-{n}")
        await mem.capture(ctx, say(f"I planted {n + 2} apple trees in the orchard."))
        await mem.end_session(ctx)


async def test_with_batch_wait_consolidation_waits_for_a_full_batch_then_makes_one_call(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder
) -> None:
    stages = FlakyStages()
    mem = make_system(
        store_path,
        clock,
        embedder,
        model=stages,
        episodic={"encode": "consolidation", "batch_wait": timedelta(hours=1)},
    )
    await _ended_sessions(mem, "ann", 3)

    waited = await run_consolidation(mem, clock.advance(minutes=15))

    assert (waited["waiting"], waited["episodes"]) == (1, 0)
    assert {e.status for e in mem.tiers.episodes(MemoryContext(user_id="ann"))} == {"pending"}
    await _ended_sessions(mem, "ann", 1, start=3)  # the fourth session fills the batch
    stages.calls.clear()

    full = await run_consolidation(mem, clock.advance(minutes=15))

    assert (full["waiting"], full["episodes"]) == (0, 4)
    assert stages.calls == ["encode_consolidate"]  # four sessions summarised and consolidated in one call


async def test_with_batch_wait_a_partial_batch_is_consolidated_once_its_oldest_has_waited(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder
) -> None:
    mem = make_system(store_path, clock, embedder, episodic={"batch_wait": timedelta(hours=1)})
    await _ended_sessions(mem, "ann", 2)
    assert (await run_consolidation(mem, clock.advance(minutes=59)))["waiting"] == 1

    report = await run_consolidation(mem, clock.advance(minutes=2))

    assert (report["waiting"], report["episodes"]) == (0, 2)
    assert {e.status for e in mem.tiers.episodes(MemoryContext(user_id="ann"))} == {"consolidated"}


async def test_run_consolidation_twice_does_no_more_work(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    mem = make_system(store_path, clock, embedder)
    await mem.capture(ctx, say("I work as a nurse in Porto."))
    await mem.end_session(ctx)
    await run_consolidation(mem, clock.now())
    facts = sorted(f.model_dump_json() for f in await mem.facts(ctx, include_inactive=True))

    again = await run_consolidation(mem, clock.advance(minutes=15))

    assert (again["users"], again["episodes"]) == (0, 0)
    assert sorted(f.model_dump_json() for f in await mem.facts(ctx, include_inactive=True)) == facts


async def test_run_consolidation_defers_when_the_model_fails(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    stages = FlakyStages()
    mem = make_system(store_path, clock, embedder, model=stages)
    await mem.capture(ctx, say("I work as a nurse in Porto."))
    await mem.end_session(ctx)
    stages.failing = {"encode_consolidate"}  # the default's consolidation call

    report = await run_consolidation(mem, clock.advance(days=3))  # the default batch wait has passed

    (episode,) = mem.tiers.episodes(ctx)
    assert (report["users"], report["episodes"], report["deferred"]) == (1, 0, 1)
    assert (episode.status, episode.error is not None) == ("pending", True)


# -- digests ----------------------------------------------------------------------------------


async def test_run_digests_writes_only_for_users_whose_facts_changed(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder
) -> None:
    mem = make_system(store_path, clock, embedder)
    ann, bob = MemoryContext(user_id="ann"), MemoryContext(user_id="bob")
    await mem.add_semantic_fact(ann, "The user works as a nurse.")
    await mem.add_semantic_fact(bob, "The user plays tennis.")

    first = await run_digests(mem, clock.now())
    second = await run_digests(mem, clock.advance(hours=1))
    clock.advance(minutes=5)
    await mem.add_semantic_fact(ann, "The user moved to Porto.")
    third = await run_digests(mem, clock.advance(hours=1))

    assert (first["written"], first["unchanged"]) == (2, 0)
    assert (second["written"], second["unchanged"]) == (0, 2)
    assert (third["written"], third["unchanged"]) == (1, 1)
    ann_digest, bob_digest = mem.tiers.latest_digest(ann), mem.tiers.latest_digest(bob)
    assert ann_digest is not None and bob_digest is not None
    assert (ann_digest.metadata["revision"], bob_digest.metadata["revision"]) == (2, 1)
    assert "Porto" in ann_digest.text


async def test_run_digests_rewrites_after_a_reinforcement(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    mem = make_system(store_path, clock, embedder)
    await mem.add_semantic_fact(ctx, "The user works as a nurse.")
    await run_digests(mem, clock.now())
    clock.advance(days=1)
    await mem.add_semantic_fact(ctx, "The user works as a nurse.")

    report = await run_digests(mem, clock.now())

    assert report["written"] == 1


async def test_run_digests_with_digest_off_does_nothing(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    mem = make_system(store_path, clock, embedder, digest=False)
    await mem.add_semantic_fact(ctx, "The user works as a nurse.")

    report = await run_digests(mem, clock.now())

    assert (report["users"], report["written"], mem.store.count("digests")) == (0, 0, 0)


# -- idle sessions ----------------------------------------------------------------------------


async def _sessions(mem: MemorySystem, clock: FrozenClock) -> dict[str, MemoryContext]:
    """idle: last turn 2 h ago; recent: 5 min ago; encoded: idle and already ended."""
    ctxs = {name: MemoryContext(user_id="u-1", session_id=name) for name in ("idle", "encoded", "recent")}
    await mem.capture(ctxs["idle"], say("I am planning a trip to Kyoto in April."))
    await mem.capture(ctxs["encoded"], say("I adopted a cat named Luna."))
    await mem.end_session(ctxs["encoded"])
    clock.advance(minutes=115)
    await mem.capture(ctxs["recent"], say("I started learning the cello."))
    clock.advance(minutes=5)
    return ctxs


@pytest.mark.parametrize(
    ("session", "has_episode"),
    [("idle", True), ("recent", False), ("encoded", True)],
    ids=["idle-session-closes", "recent-session-stays-open", "encoded-session-kept"],
)
async def test_close_idle_sessions_encodes_only_idle_unencoded_sessions(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, session: str, has_episode: bool
) -> None:
    mem = make_system(store_path, clock, embedder, episodic={"idle_after": timedelta(minutes=30)})
    ctxs = await _sessions(mem, clock)
    before = {e.session_id: e for e in mem.tiers.episodes(ctxs[session])}

    report = await close_idle_sessions(mem, clock.now())

    after = {e.session_id: e for e in mem.tiers.episodes(ctxs[session])}
    assert (report["closed"], report["deferred"]) == (1, 0)
    assert (session in after) is has_episode
    assert (after.get(session) == before.get(session)) is (session != "idle")  # the encoded one is not redone


async def test_close_idle_sessions_closes_working_memory_and_is_idempotent(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder
) -> None:
    mem = make_system(store_path, clock, embedder)
    ctxs = await _sessions(mem, clock)
    await close_idle_sessions(mem, clock.now())

    again = await close_idle_sessions(mem, clock.advance(minutes=1))

    assert again["closed"] == 0
    assert await mem.working_memory(ctxs["idle"]) == []
    assert len(await mem.working_memory(ctxs["recent"])) >= 1


@pytest.mark.parametrize(
    ("idle_after", "closed"),
    [(timedelta(minutes=1), 2), (timedelta(hours=3), 0)],
    ids=["short-threshold", "long-threshold"],
)
async def test_close_idle_sessions_threshold_argument_overrides_the_option(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, idle_after: timedelta, closed: int
) -> None:
    mem = make_system(store_path, clock, embedder, episodic={"idle_after": timedelta(minutes=30)})
    await _sessions(mem, clock)

    report = await close_idle_sessions(mem, clock.now(), idle_after=idle_after)

    assert report["closed"] == closed


async def test_a_session_resumed_after_encoding_is_encoded_again(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    mem = make_system(store_path, clock, embedder)
    await mem.capture(ctx, say("I adopted a cat named Luna."))
    await mem.end_session(ctx)
    clock.advance(minutes=10)
    await mem.capture(ctx, say("I also play the violin."))

    report = await close_idle_sessions(mem, clock.advance(hours=1))

    (episode,) = mem.tiers.episodes(ctx)
    assert report["closed"] == 1
    assert len(episode.provenance) == 2


# -- retries ----------------------------------------------------------------------------------


def observer(state: dict[str, bool]) -> FunctionModel:
    """Answers the observer prompt with one observation, or fails like a provider outage."""

    def reply(messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
        assert call.stage is observe.STAGE
        if state["down"]:
            raise ConnectionError("503 provider unavailable")  # a network error: transient, retried later
        obs = observe.Observation(subject="user", kind="fact", text="The user works as a nurse.", salience=0.9)
        return observe.Output(observations=[obs]).model_dump()

    return FunctionModel(reply)


async def test_retry_pending_processes_a_turn_whose_model_call_failed(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    state = {"down": True}
    fake = observer(state)
    mem = make_system(store_path, clock, embedder, model=fake.model, num_retries=0, validation_retries=0)
    captured = await mem.capture(ctx, say("I work as a nurse."))
    failed_retry = await retry_pending(mem, clock.advance(minutes=10))
    state["down"] = False

    report = await retry_pending(mem, clock.advance(minutes=10))

    (turn,) = mem.store.query("turns", Where(eq=mem.tiers.scope(ctx)))
    assert (captured.deferred, captured.turn.status, captured.turn.error is not None) == (True, "pending", True)
    assert (failed_retry["turns"], failed_retry["turns_ok"]) == (1, 0)
    assert (report["turns"], report["turns_ok"]) == (1, 1)
    assert (turn.status, turn.error, turn.attempts) == ("observed", None, 3)
    assert [e.text for e in await mem.working_memory(ctx)] == ["The user works as a nurse."]


async def test_retry_pending_with_nothing_pending_calls_no_model(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    fake = observer({"down": False})
    mem = make_system(store_path, clock, embedder, model=fake.model)
    await mem.capture(ctx, say("I work as a nurse."))
    calls = len(fake.calls)

    report = await retry_pending(mem, clock.now())

    assert (report["turns"], report["episodes"], report["consolidations"], len(fake.calls)) == (0, 0, 0, calls)


async def test_retry_pending_encodes_a_failed_episode_and_consolidates_it(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    stages = FlakyStages()
    # A failed encode_episode call at session end: the two-call path's.
    mem = make_system(store_path, clock, embedder, model=stages, episodic={"encode": "session"})
    await mem.capture(ctx, say("I work as a nurse in Porto."))
    stages.failing = {"encode_episode"}
    ended = await mem.end_session(ctx)
    stages.failing = set()

    report = await retry_pending(mem, clock.advance(minutes=10))

    (episode,) = mem.tiers.episodes(ctx)
    assert (ended.deferred, ended.episode) == (True, None)
    assert (report["episodes"], report["episodes_ok"], report["consolidations"]) == (1, 1, 1)
    assert (episode.status, episode.error) == ("consolidated", None)
    assert len(await mem.facts(ctx)) >= 1


async def test_idle_sessions_leave_a_failed_encoding_to_the_retries(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    stages = FlakyStages()
    # A failed encode_episode call at session end: the two-call path's.
    mem = make_system(store_path, clock, embedder, model=stages, episodic={"encode": "session"})
    await mem.capture(ctx, say("I work as a nurse in Porto."))
    stages.failing = {"encode_episode"}
    await mem.end_session(ctx)
    stages.calls.clear()

    report = await close_idle_sessions(mem, clock.advance(hours=2))

    assert (report["closed"], stages.calls) == (0, [])
