"""Memory policy in the rollups (issue 35 item 1): the digest and compaction are told the policy, are never shown
what it keeps out, and the scheduled digest and janitor run under the system's policy; through the real store."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes import AnyCall, Messages, calls_for, messages_of, stage_model
from tiermem import Fact, MemoryContext, MemoryPolicy, MemorySystem, system
from tiermem.jobs import run_digests, run_janitor
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder
from tiermem.pipelines import _rules as rules
from tiermem.prompts import compact, digest

# litellm imports some modules lazily on the first fake-model call; one of them trips a pydantic
# UserWarning that pyproject's filterwarnings="error" would turn into a failed model call.
pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

LABELS = ["work", "health", "family"]
INSTRUCTIONS = "Never store health details."
SAID = "I am allergic to peanuts. I work at Acme Corp as an engineer. My wife Moni loves painting."
TIERS: dict[str, Any] = {"working": True, "episodic": True, "semantic": {"relations": True}, "digest": True}


def _system(
    store: str, embedder: HashingEmbedder, clock: FrozenClock, model: Any = "rules", **options: Any
) -> MemorySystem:
    return system(model=model, store=store, embedder=embedder, clock=clock, **{**TIERS, **options})


async def _remembered(
    store: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext, **options: Any
) -> str:
    """Facts (and the edge to Moni) written and digested before any exclusion, by the rules model; the digest text."""
    before = _system(store, embedder, clock, **options)
    await before.capture(ctx, messages_of(SAID, "Noted."))
    await before.end_session(ctx)
    await before.consolidate(ctx)
    written = (await before.digest(ctx)).digest
    assert written is not None and all(w in written.text for w in ("peanuts", "Acme", "painting"))
    return written.text


def _digest_calls(fake: FunctionModel) -> list[digest.Input]:
    return [c.call.inputs for c in calls_for(fake, digest.STAGE) if c.call is not None]


# -- the digest ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "kept", "left_out", "kept_out"),
    [
        ({"exclude_categories": ["health"]}, ["acme", "painting"], ["peanuts"], 1),
        ({"exclude_subjects": ["moni"]}, ["acme", "peanuts"], ["painting", "moni"], 1),
        ({"include_categories": ["work"]}, ["acme"], ["peanuts", "painting"], 2),
    ],
    ids=["exclude-health", "exclude-a-subject", "only-work"],
)
async def test_the_digest_is_told_the_policy_and_shown_nothing_it_keeps_out(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    policy: dict[str, Any],
    kept: list[str],
    left_out: list[str],
    kept_out: int,
) -> None:
    await _remembered(store_path, embedder, clock, ctx, categories=LABELS)
    fake = stage_model()  # its digest says every fact it is shown
    mem = _system(store_path, embedder, clock, fake.model, instructions=INSTRUCTIONS, categories=LABELS, policy=policy)

    result = await mem.digest(ctx)
    again = await mem.digest(ctx)

    (shown,) = _digest_calls(fake)
    assert shown.policy == mem.policy and shown.previous is None  # the old digest said what is now kept out
    seen = " ".join([*(f.text for f in shown.facts), *(e.text for e in shown.edges)]).lower()
    assert not any(word in seen for word in left_out), seen
    (recorded,) = calls_for(fake, digest.STAGE)
    assert f"Instructions: {INSTRUCTIONS}" in recorded.messages[0]["content"]
    assert result.digest is not None and not result.unchanged
    text = result.digest.text.lower()
    assert all(word in text for word in kept) and not any(word in text for word in left_out), text
    assert result.digest.metadata["facts_kept_out"] == kept_out
    assert again.unchanged and len(calls_for(fake, digest.STAGE)) == 1  # same facts, same policy: no call


@pytest.mark.parametrize(
    ("policy", "kept", "left_out"),
    [
        ({"exclude_categories": ["health"]}, ["acme", "painting"], ["peanuts"]),
        ({"exclude_categories": ["family"]}, ["acme", "peanuts"], ["painting", "moni"]),
        ({"include_categories": ["work"]}, [], ["acme", "peanuts", "painting", "moni"]),
    ],
    ids=["exclude-health", "exclude-family", "only-work"],
)
async def test_unlabelled_facts_in_the_digest_under_a_policy(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    policy: dict[str, Any],
    kept: list[str],
    left_out: list[str],
) -> None:
    """The rules model keeps out the excluded facts whose words it recognises; under ``include_categories`` the
    code keeps out every fact without a label (none says it is included), the relation to Moni with them,
    and the digest that said them is replaced."""
    await _remembered(store_path, embedder, clock, ctx)  # no vocabulary then: the facts carry no labels
    mem = _system(store_path, embedder, clock, policy=policy)

    result = await mem.digest(ctx)

    assert result.digest is not None and result.digest == await mem.latest_digest(ctx)
    text = result.digest.text.lower()
    assert all(word in text for word in kept) and not any(word in text for word in left_out), text


async def test_a_digest_override_holds_for_its_call_and_the_scheduled_digest_uses_the_systems_policy(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    await _remembered(store_path, embedder, clock, ctx, categories=LABELS)
    fake = stage_model()
    mem = _system(store_path, embedder, clock, fake.model, categories=LABELS, policy={"exclude_categories": ["health"]})

    overridden = await mem.digest(ctx, policy={"exclude_subjects": ["moni"]})
    report = await run_digests(mem)
    scheduled = await mem.latest_digest(ctx)

    first, second = _digest_calls(fake)
    assert first.policy == MemoryPolicy(categories=LABELS, exclude_categories=["health"], exclude_subjects=["moni"])
    assert second.policy == mem.policy  # the job passes no override
    assert overridden.digest is not None and "painting" not in overridden.digest.text
    assert report["written"] == 1  # written under another policy: rewritten, though no fact changed
    assert scheduled is not None and "painting" in scheduled.text and "peanuts" not in scheduled.text


# -- compaction ---------------------------------------------------------------------------------


def _merging_everything(health: list[str]) -> FunctionModel:
    """A compactor that merges the Acme facts it is shown, and also proposes merging the ``health`` facts."""

    def reply(messages: Messages, call: AnyCall) -> dict[str, Any]:
        shown = [f.id for f in call.inputs.facts if "Acme" in f.text]
        work = {"source_ids": shown, "text": "The user works at Acme Corp as a senior engineer."}
        return {"merges": [work, {"source_ids": health, "text": "The user is allergic to peanuts and has asthma."}]}

    return FunctionModel(reply)


HEALTH_FACTS = ("The user is allergic to peanuts.", "The user has asthma.")
WORK_FACTS = ("The user works at Acme Corp.", "The user is a senior engineer at Acme Corp.")


async def test_compaction_is_told_the_policy_and_never_merges_what_it_keeps_out(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    labelled = [("health", t) for t in HEALTH_FACTS] + [("work", t) for t in WORK_FACTS]
    labelled += [("", f"The user visited city number {n}.") for n in range(8)]  # past max_facts: compaction runs
    facts = [Fact.new(ctx, subject="user", text=t, now=clock.now(), categories=[c] if c else []) for c, t in labelled]
    fake = _merging_everything([f.id for f in facts[:2]])
    mem = _system(store_path, embedder, clock, fake.model, instructions=INSTRUCTIONS, categories=LABELS,
                  policy={"exclude_categories": ["health"]}, semantic={"max_facts": 10})  # fmt: skip
    mem.tiers.put_facts(facts)

    report = await run_janitor(mem, clock.advance(hours=1))

    (recorded,) = calls_for(fake, compact.STAGE)
    assert recorded.call is not None and recorded.call.inputs.policy == mem.policy
    shown = {f.text for f in recorded.call.inputs.facts}
    assert set(WORK_FACTS) <= shown and not shown & set(HEALTH_FACTS) and len(shown) == 10
    assert "Never write down anything that falls under: health." in recorded.messages[0]["content"]
    assert (report.facts_merged, report.compaction_refused) == (2, 1)  # the health merge: facts it was not shown
    active = {f.text: f.categories for f in await mem.facts(ctx) if "city" not in f.text}
    assert active == {
        "The user works at Acme Corp as a senior engineer.": ("work",),
        **dict.fromkeys(HEALTH_FACTS, ("health",)),
    }


@pytest.mark.parametrize(
    ("policy", "merged"),
    [(None, True), (MemoryPolicy(exclude_categories=["health"]), False)],
    ids=["no-policy", "exclude-health"],
)
def test_the_rules_compactor_leaves_alone_what_it_recognises_as_kept_out(
    clock: FrozenClock, ctx: MemoryContext, policy: MemoryPolicy | None, merged: bool
) -> None:
    texts = ("The user is allergic to peanuts.", "The user is allergic to peanuts and cashews.")
    facts = [Fact.new(ctx, subject="user", text=t, now=clock.now()) for t in texts]  # unlabelled

    output = rules.compact(compact.Input(subject="user", facts=facts, policy=policy))

    assert bool(output.merges) is merged
