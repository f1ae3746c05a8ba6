"""Nothing is lost: turns are journaled before model work, failures defer with their error,
``retry_pending`` finishes the work later, and reruns after a crash duplicate nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.fakes import AnyCall, Sequenced, Switch, calls_for, default_reply, messages_of, session, stage_model
from tiermem import MemoryContext, MemorySystem, system
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, Where
from tiermem.prompts import observe

Builder = Callable[..., MemorySystem]

# litellm lazily imports a module whose pydantic TypedDict warns on every model call; pyproject's
# filterwarnings="error" would turn that into a failed (deferred) call.
pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

TEXT = "I bake rye bread every Sunday."
VALID = {"observations": [{"subject": "user", "kind": "fact", "text": "The user bakes rye bread.", "salience": 0.7}]}


@pytest.fixture
def build(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> Builder:
    def make(model: Any, **options: Any) -> MemorySystem:
        return system(model=model, store=store_path, embedder=embedder, clock=clock, **options)

    return make


def _turns(mem: MemorySystem, ctx: MemoryContext) -> list[Any]:
    where = Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})
    return sorted(mem.store.query("turns", where), key=lambda t: (t.session_id, t.seq))


def _flaky(switch: Switch, broken: Callable[[list[dict[str, Any]], AnyCall], Any]) -> FunctionModel:
    """A fake that answers every stage validly, except while ``switch.broken``."""

    def answer(messages: list[dict[str, Any]], call: AnyCall) -> Any:
        if switch.broken:
            return broken(messages, call)
        return default_reply(call)

    return FunctionModel(function=answer)


def _not_json(messages: list[dict[str, Any]], call: AnyCall) -> str:
    return "Sure! The user bakes bread."


def _provider_down(messages: list[dict[str, Any]], call: AnyCall) -> str:
    raise ConnectionError("provider down: 503 Service Unavailable")


# -- validation retries -------------------------------------------------------------------------


async def test_invalid_twice_then_valid_succeeds_with_two_retries(build: Builder, ctx: MemoryContext) -> None:
    fake = stage_model({observe.STAGE: Sequenced(["not json at all", {"observations": "wrong type"}, VALID])})
    mem = build(fake.model)

    result = await mem.capture(ctx, messages_of(TEXT))

    assert not result.deferred
    assert [e.text for e in result.entries] == ["The user bakes rye bread."]
    usage = mem.usage()["observe"]
    assert (usage["calls"], usage["retries"], usage["failures"]) == (3, 2, 0)


async def test_validation_error_is_fed_back_to_the_model(build: Builder, ctx: MemoryContext) -> None:
    fake = stage_model({observe.STAGE: Sequenced(["not json at all", VALID])})
    mem = build(fake.model)

    await mem.capture(ctx, messages_of(TEXT))

    retry = calls_for(fake, observe.STAGE)[1].messages
    assert retry[-2] == {"role": "assistant", "content": "not json at all"}
    assert "did not validate" in retry[-1]["content"]


async def test_always_invalid_defers_with_the_error(build: Builder, ctx: MemoryContext) -> None:
    mem = build(_flaky(Switch(), _not_json).model)

    result = await mem.capture(ctx, messages_of(TEXT))

    assert (result.deferred, result.entries) == (True, [])
    assert "did not validate after 3 attempts" in (result.error or "")
    usage = mem.usage()["observe"]
    assert (usage["calls"], usage["retries"], usage["failures"]) == (3, 2, 1)


async def test_always_invalid_keeps_the_turn_pending_with_its_error(build: Builder, ctx: MemoryContext) -> None:
    mem = build(_flaky(Switch(), _not_json).model)

    await mem.capture(ctx, messages_of(TEXT, "Lovely."))

    (turn,) = _turns(mem, ctx)
    assert (turn.status, turn.attempts) == ("pending", 1)
    assert [m.content for m in turn.messages] == [TEXT, "Lovely."]
    assert "did not validate" in (turn.error or "")
    assert await mem.working_memory(ctx, include_inactive=True) == []


@pytest.mark.parametrize("broken", [_not_json, _provider_down], ids=["invalid-output", "provider-error"])
async def test_retry_pending_finishes_the_turn_once_the_model_behaves(
    build: Builder, ctx: MemoryContext, broken: Callable[[list[dict[str, Any]], AnyCall], Any]
) -> None:
    switch = Switch()
    mem = build(_flaky(switch, broken).model)
    await mem.capture(ctx, messages_of(TEXT))
    switch.broken = False

    report = await mem.retry_pending()

    (turn,) = _turns(mem, ctx)
    assert (report.turns, report.turns_ok) == (1, 1)
    assert (turn.status, turn.error, turn.attempts) == ("observed", None, 2)
    assert [e.text for e in await mem.working_memory(ctx)] == [TEXT]


async def test_retry_pending_leaves_the_turn_pending_while_the_model_still_fails(
    build: Builder, ctx: MemoryContext
) -> None:
    mem = build(_flaky(Switch(), _not_json).model)
    await mem.capture(ctx, messages_of(TEXT))

    report = await mem.retry_pending()

    (turn,) = _turns(mem, ctx)
    assert (report.turns, report.turns_ok) == (1, 0)
    assert (turn.status, turn.attempts) == ("pending", 2)


# -- provider errors ----------------------------------------------------------------------------


async def test_provider_error_defers_and_loses_nothing(build: Builder, ctx: MemoryContext) -> None:
    mem = build(_flaky(Switch(), _provider_down).model, num_retries=0)

    result = await mem.capture(ctx, messages_of(TEXT))

    (turn,) = _turns(mem, ctx)
    assert result.deferred
    assert "provider down" in (result.error or "")
    assert (turn.status, turn.messages[0].content) == ("pending", TEXT)
    assert "provider down" in (turn.error or "")
    assert mem.usage()["observe"]["failures"] == 1


async def test_provider_error_at_session_end_defers_the_episode(build: Builder, ctx: MemoryContext) -> None:
    switch = Switch(broken=False)
    # A provider error in the episode encoder's call at session end: the two-call path's.
    mem = build(_flaky(switch, _provider_down).model, num_retries=0, episodic={"encode": "session"})
    await mem.capture(ctx, messages_of(TEXT))
    switch.broken = True

    ended = await mem.end_session(ctx)
    switch.broken = False
    report = await mem.retry_pending()

    (episode,) = await mem.recent_episodes(ctx)
    assert (ended.deferred, ended.episode) == (True, None)
    assert (report.episodes, report.episodes_ok) == (1, 1)
    assert TEXT in episode.summary
    assert mem.store.count("episodes") == 1


async def test_provider_error_in_consolidation_keeps_the_episode_pending(build: Builder, ctx: MemoryContext) -> None:
    switch = Switch(broken=False)
    mem = build(_flaky(switch, _provider_down).model, num_retries=0)
    await mem.capture(ctx, messages_of(TEXT))
    await mem.end_session(ctx)
    switch.broken = True

    failed = await mem.consolidate(ctx)
    switch.broken = False
    report = await mem.retry_pending()

    assert (failed.deferred, failed.episodes) == (True, 0)
    assert "provider down" in (failed.error or "")
    assert report.consolidations == 1
    assert [f.text for f in await mem.facts(ctx)] == [TEXT]
    assert [e.status for e in await mem.recent_episodes(ctx)] == ["consolidated"]


async def test_pending_turn_gets_a_last_chance_at_session_end(build: Builder, ctx: MemoryContext) -> None:
    switch = Switch()
    mem = build(_flaky(switch, _not_json).model)
    await mem.capture(ctx, messages_of(TEXT))
    switch.broken = False

    ended = await mem.end_session(ctx)

    (turn,) = _turns(mem, ctx)
    assert turn.status == "observed"
    assert ended.episode is not None and TEXT in ended.episode.summary


# -- crash and rerun ----------------------------------------------------------------------------


def _counts(mem: MemorySystem) -> dict[str, int]:
    return {table: mem.store.count(table) for table in ("turns", "working", "episodes", "facts", "edges")}


@pytest.mark.parametrize("kind", ["rules", "fake"], ids=["rules", "fake"])
async def test_rerunning_every_stage_duplicates_nothing(build: Builder, ctx: MemoryContext, kind: str) -> None:
    mem = build("rules" if kind == "rules" else stage_model().model, semantic={"relations": True})
    await mem.capture(ctx, messages_of("My wife Moni is allergic to shellfish.", "Noted."))
    await mem.capture(ctx, messages_of(TEXT))
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    await mem.digest(ctx)
    once = _counts(mem)

    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    await mem.digest(ctx)
    await mem.retry_pending()

    assert _counts(mem) == once
    assert mem.store.count("digests") == 1


async def test_crash_after_observing_before_marking_the_turn(build: Builder, ctx: MemoryContext) -> None:
    """The observer wrote working entries, then the process died before the turn was marked observed."""
    fake = stage_model()
    mem = build(fake.model)
    done = await mem.capture(ctx, messages_of(TEXT))
    mem.tiers.put_turns([done.turn.model_copy(update={"status": "pending"})])  # the state the crash left
    before = _counts(mem)

    report = await mem.retry_pending()

    assert report.turns_ok == 1
    assert _counts(mem) == before
    assert [t.status for t in _turns(mem, ctx)] == ["observed"]
    assert len(calls_for(fake, observe.STAGE)) == 2


@pytest.mark.parametrize("kind", ["rules", "fake"], ids=["rules", "fake"])
async def test_crash_after_writing_facts_before_marking_the_episode(
    build: Builder, ctx: MemoryContext, kind: str
) -> None:
    """Consolidation wrote its facts, then the process died before the episode was marked consolidated."""
    mem = build("rules" if kind == "rules" else stage_model().model)
    await mem.capture(ctx, messages_of(TEXT))
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    (episode,) = await mem.recent_episodes(ctx)
    await mem.add_episode(episode.model_copy(update={"status": "pending"}))  # the state the crash left
    before = _counts(mem)

    rerun = await mem.consolidate(ctx)

    assert rerun.episodes == 1
    assert _counts(mem) == before
    assert [f.status for f in await mem.facts(ctx, include_inactive=True)] == ["active"]


async def test_end_session_twice_keeps_one_episode(build: Builder, ctx: MemoryContext) -> None:
    mem = build(stage_model().model)
    await mem.capture(ctx, messages_of(TEXT))

    first = await mem.end_session(ctx)
    second = await mem.end_session(ctx)

    assert first.episode is not None and second.episode is not None
    assert first.episode.id == second.episode.id
    assert mem.store.count("episodes") == 1


async def test_capture_in_two_sessions_numbers_turns_per_session(build: Builder, ctx: MemoryContext) -> None:
    mem = build("rules")

    a = await mem.capture(ctx, messages_of(TEXT))
    b = await mem.capture(session(ctx, "s-2"), messages_of(TEXT))
    c = await mem.capture(ctx, messages_of("I also grow tomatoes."))

    assert [(r.turn.session_id, r.turn.seq) for r in (a, b, c)] == [("s-1", 0), ("s-2", 0), ("s-1", 1)]
    assert len({r.turn.id for r in (a, b, c)}) == 3


@pytest.mark.parametrize("kind", ["rules", "fake"], ids=["rules", "fake"])
async def test_end_session_after_consolidation_does_not_requeue_the_episode(
    build: Builder, ctx: MemoryContext, kind: str
) -> None:
    mem = build("rules" if kind == "rules" else stage_model().model)
    await mem.capture(ctx, messages_of(TEXT))
    await mem.end_session(ctx)
    await mem.consolidate(ctx)

    await mem.end_session(ctx)  # e.g. the idle-session job and the application both close it
    await mem.consolidate(ctx)

    assert [e.status for e in await mem.recent_episodes(ctx)] == ["consolidated"]
    assert [f.reinforcements for f in await mem.facts(ctx)] == [0]
