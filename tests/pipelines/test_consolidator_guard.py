"""The consolidator's guard, in code: no operation rewrites, reinforces or merges a fact across
subjects, touches a fact it was not shown, or writes a non-canonical subject. Refusals are counted."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes import AnyCall, StageReply, messages_of, stage_model
from tiermem import LLM, Episode, Fact, MemoryContext, MemorySystem, RelationsOptions, system
from tiermem.memory._decay import decay_start
from tiermem.memory._identity import fact_id
from tiermem.memory.testing import FrozenClock, HashingEmbedder
from tiermem.pipelines import LLMStages, compact_subject, consolidate_episodes
from tiermem.prompts import Stage, compact, consolidate, encode_consolidate, observe

# litellm lazily imports a module whose pydantic TypedDict warns on every model call; pyproject's
# filterwarnings="error" would turn that into a failed (deferred) call.
pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

Builder = Callable[..., MemorySystem]
USER_FACT = "The user is allergic to peanuts."
MONI_FACT = "Moni, the user's wife, is allergic to shellfish."
# A user observation too: the episode's subjects (from its observations until consolidation summarises it)
# then include "user", so the user's facts are shown to the consolidator, as the guard cases need.
MONI_OBSERVED = {
    "observations": [
        {"subject": "moni", "kind": "relationship", "text": MONI_FACT, "salience": 0.9},
        {"subject": "user", "kind": "relationship", "text": "The user is married to Moni.", "salience": 0.5},
    ]
}
NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def build(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> Builder:
    def make(model: Any, **options: Any) -> MemorySystem:
        return system(model=model, store=store_path, embedder=embedder, clock=clock, **options)

    return make


def _shown(inputs: consolidate.Input, subject: str) -> str:
    """The id of the first existing fact of ``subject`` the consolidator was shown."""
    found = next((f.id for f in inputs.existing if f.subject == subject), None)
    assert found is not None, f"no {subject} fact was shown"
    return found


# Each operation is built from the consolidator's input (it needs the shown fact ids).
OPS: dict[str, tuple[Callable[[consolidate.Input], dict[str, Any]], str]] = {
    "update-user-fact-as-moni": (
        lambda inputs: {"op": "update", "subject": "moni", "target_id": _shown(inputs, "user"), "text": MONI_FACT},
        "cross-subject update: 'user' fact by a 'moni' operation",
    ),
    "reinforce-user-fact-as-moni": (
        lambda inputs: {"op": "reinforce", "subject": "Moni", "target_id": _shown(inputs, "user")},
        "cross-subject reinforce: 'user' fact by a 'moni' operation",
    ),
    "update-moni-fact-as-user": (
        lambda inputs: {"op": "update", "subject": "user", "target_id": _shown(inputs, "moni"), "text": USER_FACT},
        "cross-subject update: 'moni' fact by a 'user' operation",
    ),
    "update-unknown-fact": (
        lambda inputs: {"op": "update", "subject": "user", "target_id": "fact_not_shown", "text": "The user is tall."},
        "unknown target 'fact_not_shown'",
    ),
    "non-canonical-subject": (
        lambda inputs: {"op": "add", "subject": "Moni <script>", "text": "Moni likes jazz."},
        "non-canonical subject",
    ),
    "empty-add": (lambda inputs: {"op": "add", "subject": "moni", "text": "   "}, "empty text"),
}


async def _seeded(
    build: Builder, ctx: MemoryContext, op: Callable[[consolidate.Input], dict[str, Any]]
) -> tuple[MemorySystem, Fact, Fact]:
    """A user fact and a Moni fact exist; a session about Moni is pending consolidation."""

    def consolidate_reply(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
        return {"operations": [op(call.inputs)], "edges": []}

    # The same operations whichever stage consolidates (encode_consolidate by default, its input extends the
    # consolidator's): the guard is the same code behind both.
    replies: dict[Stage[Any, Any], StageReply | dict[str, Any]] = {
        observe.STAGE: MONI_OBSERVED,
        consolidate.STAGE: consolidate_reply,
    }
    fake = stage_model({**replies, encode_consolidate.STAGE: consolidate_reply})
    mem = build(fake.model)
    user = await mem.add_semantic_fact(ctx, USER_FACT, subject="user")
    moni = await mem.add_semantic_fact(ctx, "Moni likes opera.", subject="moni")
    await mem.capture(ctx, messages_of("My wife Moni is allergic to shellfish."))
    await mem.end_session(ctx)
    return mem, user, moni


@pytest.mark.parametrize("name", list(OPS), ids=list(OPS))
async def test_guard_refuses_and_counts(build: Builder, ctx: MemoryContext, clock: FrozenClock, name: str) -> None:
    op, reason = OPS[name]
    mem, _, _ = await _seeded(build, ctx, op)
    clock.advance(days=1)

    result = await mem.consolidate(ctx)

    assert result.counts == {"refused": 1}
    assert len(result.refusals) == 1
    assert reason in result.refusals[0]
    assert result.episodes == 1  # the batch is done; the refused operation is not retried


@pytest.mark.parametrize("name", list(OPS), ids=list(OPS))
async def test_refused_operation_changes_no_fact(
    build: Builder, ctx: MemoryContext, clock: FrozenClock, name: str
) -> None:
    op, _ = OPS[name]
    mem, user, moni = await _seeded(build, ctx, op)
    before = await mem.facts(ctx, include_inactive=True)
    clock.advance(days=1)

    await mem.consolidate(ctx)

    assert await mem.facts(ctx, include_inactive=True) == before
    assert {f.id: f.subject for f in before} == {user.id: "user", moni.id: "moni"}


async def test_valid_operations_in_the_same_batch_still_apply(build: Builder, ctx: MemoryContext) -> None:
    def both(inputs: consolidate.Input) -> dict[str, Any]:
        return {"op": "update", "subject": "moni", "target_id": _shown(inputs, "user"), "text": MONI_FACT}

    def reply(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
        return {"operations": [both(call.inputs), {"op": "add", "subject": "moni", "text": MONI_FACT}], "edges": []}

    fake = stage_model({observe.STAGE: MONI_OBSERVED, consolidate.STAGE: reply, encode_consolidate.STAGE: reply})
    mem = build(fake.model)
    user = await mem.add_semantic_fact(ctx, USER_FACT, subject="user")
    await mem.capture(ctx, messages_of("My wife Moni is allergic to shellfish."))
    await mem.end_session(ctx)

    result = await mem.consolidate(ctx)

    assert result.counts == {"refused": 1, "add": 1}
    assert [f.text for f in await mem.facts(ctx, subject="moni")] == [MONI_FACT]
    assert [(f.id, f.text, f.status) for f in await mem.facts(ctx, subject="user")] == [(user.id, USER_FACT, "active")]


@pytest.mark.parametrize("relations", [False, True], ids=["relations-off", "relations-on"])
async def test_rules_model_never_trips_the_guard(build: Builder, ctx: MemoryContext, relations: bool) -> None:
    mem = build("rules", semantic={"relations": relations})
    await mem.add_semantic_fact(ctx, USER_FACT, subject="user")
    await mem.capture(ctx, messages_of("My wife Moni is allergic to shellfish.", "Noted."))
    await mem.capture(ctx, messages_of("I am allergic to peanuts."))
    await mem.end_session(ctx)

    result = await mem.consolidate(ctx)

    assert result.refusals == []
    assert {f.subject for f in await mem.facts(ctx) if "shellfish" in f.text} == {"moni"}


# -- the pipeline functions, with a model that answers through litellm -------------------------


CTX = MemoryContext(user_id="u-1")


def _fact(subject: str, text: str) -> Fact:
    return Fact.new(CTX, subject=subject, text=text, now=NOW)


def _episode(summary: str, subjects: tuple[str, ...]) -> Episode:
    return Episode(
        id="ep_1", namespace="default", user_id="u-1", session_id="s-1", summary=summary, subjects=subjects,
        started_at=NOW, ended_at=NOW, created_at=NOW, updated_at=NOW, provenance=("turn_1",),
    )  # fmt: skip


def _stages(replies: dict[Any, Any]) -> LLMStages:
    return LLMStages(LLM(stage_model(replies).model))


async def test_plan_refuses_cross_subject_update() -> None:
    user = _fact("user", USER_FACT)
    op = {"op": "update", "subject": "moni", "target_id": user.id, "text": MONI_FACT}
    stages = _stages({consolidate.STAGE: {"operations": [op]}})
    ctx = MemoryContext(user_id="u-1")

    plan = await consolidate_episodes(
        stages, ctx=ctx, episodes=[_episode(MONI_FACT, ("moni", "user"))], existing=[user], user_names=[],
        aliases={}, relations=None, now=NOW,
    )  # fmt: skip

    assert plan.facts == {}
    assert [(r.op, r.subject) for r in plan.refused] == [("update", "moni")]
    assert plan.counts == {"refused": 1}


async def test_plan_update_supersedes_with_validity() -> None:
    old = _fact("user", "The user works at Initech.")
    op = {"op": "update", "subject": "user", "target_id": old.id, "text": "The user works at Globex."}
    stages = _stages({consolidate.STAGE: {"operations": [op]}})

    plan = await consolidate_episodes(
        stages, ctx=MemoryContext(user_id="u-1"), episodes=[_episode("The user moved to Globex.", ("user",))],
        existing=[old], user_names=[], aliases={}, relations=None, now=NOW,
    )  # fmt: skip

    new_id = fact_id(CTX, subject="user", text="The user works at Globex.")
    kept = plan.facts[old.id]
    assert (kept.status, kept.valid_to, kept.superseded_by, kept.text) == ("superseded", NOW, new_id, old.text)
    assert (plan.facts[new_id].status, plan.facts[new_id].valid_from) == ("active", NOW)
    assert plan.counts == {"update": 1}


@pytest.mark.parametrize(
    ("edge", "counted"),
    [
        ({"source": "user", "relation": "married to", "target": "moni"}, None),
        ({"source": "user", "relation": "married to", "target": "zed"}, "edges_unknown_endpoint"),
        ({"source": "user", "relation": "married to", "target": "user"}, "edges_invalid"),
        ({"source": "user", "relation": "owes money to", "target": "moni"}, "edges_out_of_vocabulary"),
    ],
    ids=["kept", "unknown-endpoint", "self-loop", "out-of-vocabulary"],
)
async def test_plan_edges_are_checked(edge: dict[str, str], counted: str | None) -> None:
    stages = _stages({consolidate.STAGE: {"operations": [], "edges": [edge]}})
    rel = RelationsOptions(vocabulary=("married to", "works at"))

    plan = await consolidate_episodes(
        stages, ctx=MemoryContext(user_id="u-1"), episodes=[_episode(MONI_FACT, ("moni",))], existing=[],
        user_names=[], aliases={}, relations=rel, now=NOW,
    )  # fmt: skip

    assert [(e.source, e.relation, e.target) for e in plan.edges] == (
        [] if counted else [("user", "married to", "moni")]
    )
    assert plan.counts == ({counted: 1} if counted else {})


# -- compaction: merges stay inside one subject --------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "expected"),
    [((None, None), None), ((None, NOW), NOW), ((NOW - timedelta(days=9), NOW), NOW)],
    ids=["captured", "one-imported", "both-imported"],
)
async def test_a_merged_fact_keeps_its_sources_latest_import_time(
    stored: tuple[datetime | None, datetime | None], expected: datetime | None
) -> None:
    # Imported facts are dated by their history; their decay counts from the import (stored_at), and so
    # does the fact merging them, or compaction would hand the janitor a fact two years old.
    then = NOW - timedelta(days=700)
    a, b = (
        Fact.new(CTX, subject="user", text=text, now=then, stored_at=when)
        for text, when in zip(("The user likes tea.", "The user drinks green tea."), stored, strict=True)
    )
    merge = {"source_ids": [a.id, b.id], "text": "The user likes tea, green tea most."}
    stages = _stages({compact.STAGE: {"merges": [merge]}})

    plan = await compact_subject(stages, ctx=CTX, subject="user", facts=[a, b], now=NOW)

    (merged,) = [f for f in plan.facts if f.status == "active"]
    assert (merged.reinforced_at, merged.stored_at) == (then, expected)
    assert decay_start(merged) == (expected or then)


async def test_compaction_refuses_a_merge_across_subjects() -> None:
    a, b = _fact("user", "The user likes tea."), _fact("user", "The user drinks green tea.")
    moni = _fact("moni", "Moni likes tea.")
    merge = {"source_ids": [a.id, moni.id], "text": "The user and Moni like tea."}
    stages = _stages({compact.STAGE: {"merges": [merge]}})

    plan = await compact_subject(stages, ctx=MemoryContext(user_id="u-1"), subject="user", facts=[a, b, moni], now=NOW)

    assert (plan.refused, plan.merged_sources, plan.facts) == (1, 0, [])


async def test_compaction_merges_one_subject_and_supersedes_the_sources() -> None:
    a, b = _fact("user", "The user likes tea."), _fact("user", "The user drinks green tea.")
    merge = {"source_ids": [a.id, b.id], "text": "The user likes tea, green tea most."}
    stages = _stages({compact.STAGE: {"merges": [merge]}})

    plan = await compact_subject(stages, ctx=MemoryContext(user_id="u-1"), subject="user", facts=[a, b], now=NOW)

    by_id = {f.id: f for f in plan.facts}
    merged_id = fact_id(CTX, subject="user", text="The user likes tea, green tea most.")
    assert (plan.refused, plan.merged_sources) == (0, 2)
    assert by_id[merged_id].subject == "user"
    assert {(by_id[x.id].status, by_id[x.id].superseded_by) for x in (a, b)} == {("superseded", merged_id)}
