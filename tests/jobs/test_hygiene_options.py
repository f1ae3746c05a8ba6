"""Hygiene options mean what they say (issue 12): ``hygiene=False`` turns every janitor step off, and
each step has its own switch. A real store, a FrozenClock fast-forwarded ten years, a fake compactor."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tiermem import Edge, Episode, Fact, HygieneOptions, MemoryContext, MemorySystem, Message, Turn, system
from tiermem.jobs import run_janitor
from tiermem.jobs._janitor import STEPS
from tiermem.memory._identity import edge_id, episode_id
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, StageCall, TableName, Where
from tiermem.prompts import compact

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")
TABLES: tuple[TableName, ...] = ("working", "episodes", "facts", "digests", "edges", "turns", "aliases")
TEN_YEARS = timedelta(days=3653)


def merging_model() -> FunctionModel:
    """Answers the compaction prompt only: merges the first two facts it is shown."""

    def reply(messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
        assert call.stage is compact.STAGE, "only the compaction stage should reach this model"
        shown = [f.id for f in call.inputs.facts]
        merge = {"source_ids": shown[:2], "text": f"Merged: {call.inputs.facts[0].text}"}
        return compact.Output.model_validate({"merges": [merge]}).model_dump()

    return FunctionModel(reply)


def make(store_path: str, clock: FrozenClock, model: FunctionModel, hygiene: Any) -> MemorySystem:
    return system(
        model=model.model, store=store_path, embedder=HashingEmbedder(64), clock=clock, hygiene=hygiene,
        semantic={"half_life": timedelta(days=10), "max_facts": 10, "relations": True},
        episodic={"ttl": timedelta(days=30)}, num_retries=0, validation_retries=0,
    )  # fmt: skip


async def everything(mem: MemorySystem, clock: FrozenClock, ctx: MemoryContext) -> list[Fact]:
    """Something for every step: facts over the cap, a fading working entry, an episode with its turn
    past the TTL, a legacy edge to an entity without facts and a supported edge. Returns the facts that
    stay fresh if :func:`refresh` is called (the one about tea is left to decay)."""
    start = clock.now()
    races = (5, 10, 15, 21, 30, 42, 50)
    facts = [await mem.add_semantic_fact(ctx, f"The user ran a {k} km race.") for k in races]
    facts += [
        await mem.add_semantic_fact(ctx, text, subject="moni")
        for text in ("Moni is allergic to shellfish.", "Moni plays the violin.", "Moni grew up in Porto.")
    ]
    facts.append(await mem.add_semantic_fact(ctx, "The user is married to Moni."))
    await mem.add_semantic_fact(ctx, "The user likes tea.")
    await mem.add_working_memory(ctx, "The user mentioned the weather.", salience=0.3, seq=0)
    await mem.add_working_memory(ctx, "The user booked a flight to Rome.", salience=0.9, seq=40)
    old = start - timedelta(days=400)
    turn = Turn(
        id="turn-ancient", namespace=ctx.namespace, user_id=ctx.user_id, session_id="ancient", seq=0,
        messages=(Message(role="user", content="I watered the garden."),), created_at=old,
    )  # fmt: skip
    mem.tiers.put_turns([turn], new=True)
    await mem.add_episode(
        Episode(
            id=episode_id(ctx, session_id="ancient"), namespace=ctx.namespace, user_id=ctx.user_id,
            session_id="ancient", summary="The user watered the garden.", started_at=old, ended_at=old,
            created_at=old, updated_at=old, status="consolidated", provenance=(turn.id,),
        )
    )  # fmt: skip

    def link(relation: str, target: str, support: tuple[str, ...]) -> Edge:
        eid = edge_id(ctx, source="user", relation=relation, target=target)
        return Edge(
            id=eid, namespace=ctx.namespace, user_id=ctx.user_id, source="user", relation=relation, target=target,
            created_at=start, updated_at=start, valid_from=start, support=support,
        )  # fmt: skip

    married = next(f for f in facts if "married" in f.text)
    mem.relations.put_edges(ctx, [link("works at", "acme-corp", ()), link("married to", "moni", (married.id,))])
    return facts


async def refresh(mem: MemorySystem, ctx: MemoryContext, facts: list[Fact]) -> None:
    """Said again now: these facts do not decay, so the user stays over the cap after the archive."""
    for fact in facts:
        await mem.add_semantic_fact(ctx, fact.text, subject=fact.subject)


def dump(mem: MemorySystem) -> dict[str, Any]:
    """Every record of every table, and each table's version."""
    rows = {t: sorted(r.model_dump_json() for r in mem.store.query(t, Where(eq={}))) for t in TABLES}
    return {"rows": rows, "versions": {t: mem.store.version(t) for t in TABLES}}


def test_every_step_has_a_documented_switch() -> None:
    fields = HygieneOptions.model_fields
    assert set(STEPS) <= set(fields)
    assert all(fields[step].default is True and fields[step].description for step in STEPS)


async def test_hygiene_off_changes_nothing_ten_years_later(
    store_path: str, clock: FrozenClock, ctx: MemoryContext
) -> None:
    model = merging_model()
    mem = make(store_path, clock, model, hygiene=False)
    await everything(mem, clock, ctx)
    before = dump(mem)
    clock.advance(TEN_YEARS)

    report = await run_janitor(mem)

    assert dump(mem) == before  # rows, records and table versions alike
    assert report.steps == [] and report.users == 0
    assert model.calls == []


# What each switch guards: the report field its step counts.
COUNTED = {
    "decay": "working_faded",
    "archive": "facts_archived",
    "ttl": "episodes_expired",
    "dangling_edges": "edges_removed",
    "compaction": "facts_merged",
}


@pytest.mark.parametrize("off", list(COUNTED), ids=list(COUNTED))
async def test_one_switch_off_skips_that_step_only(
    store_path: str, clock: FrozenClock, ctx: MemoryContext, off: str
) -> None:
    model = merging_model()
    mem = make(store_path, clock, model, hygiene={off: False})
    fresh = await everything(mem, clock, ctx)
    clock.advance(TEN_YEARS)
    await refresh(mem, ctx, fresh)

    report = await run_janitor(mem)

    counts = {step: getattr(report, field) for step, field in COUNTED.items()}
    assert off not in report.steps
    assert counts[off] == 0
    assert all(n >= 1 for step, n in counts.items() if step != off), counts
    assert (len(model.calls) == 0) is (off == "compaction")


@pytest.mark.filterwarnings(r"ignore:optimize\(cleanup_older_than=0\):UserWarning")
@pytest.mark.parametrize("optimize", [True, False], ids=["optimize-on", "optimize-off"])
async def test_optimize_switch_guards_storage_compaction(
    store_path: str, clock: FrozenClock, ctx: MemoryContext, optimize: bool
) -> None:
    hygiene = {step: False for step in STEPS} | {"optimize": optimize, "cleanup_older_than": timedelta(0)}
    mem = make(store_path, clock, merging_model(), hygiene=hygiene)
    for i in range(5):
        await mem.add_semantic_fact(ctx, f"The user planted {i} tulips.")
    versions = mem.store.stats()["facts"]["versions"]

    report = await run_janitor(mem, clock.now() + timedelta(days=1))

    assert report.steps == (["optimize"] if optimize else [])
    assert (mem.store.stats()["facts"]["versions"] < versions) is optimize
