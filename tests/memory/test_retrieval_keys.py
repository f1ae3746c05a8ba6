"""Retrieval keys: broader terms the observer and consolidator attach to a memory ("peanuts" -> "nut",
"food"), searched by full text, ranked on, never embedded, never shown."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import AnyCall, default_reply, messages_of, stage_model
from tiermem import LLM, Episode, Fact, MemoryContext, MemoryItem, MemorySystem, RecallOptions, WorkingEntry, system
from tiermem.memory._index._rows import row
from tiermem.memory._recall._ranking import Candidate, rank
from tiermem.memory._retrieval_keys import MAX_KEYS, retrieval_keys
from tiermem.memory._tiers._tiers import embedded_text
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, Lexicon, Where
from tiermem.pipelines import LLMStages, compact_subject
from tiermem.prompts import compact, consolidate, observe

# litellm lazily imports a module whose pydantic TypedDict warns on every model call.
pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

LEXICON = Lexicon.load(Path(__file__).parents[1] / "data" / "lexicon.json")
SAID = "I am allergic to peanuts."
NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _keyed_model() -> FunctionModel:
    """The default fake of every stage, with keys from the shipped test lexicon."""
    return FunctionModel(LEXICON.attach(lambda messages, call: default_reply(call)))


@pytest.fixture
def mem(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> MemorySystem:
    return system(model=_keyed_model().model, store=store_path, embedder=embedder, clock=clock)


async def _observed(mem: MemorySystem, ctx: MemoryContext, clock: FrozenClock) -> tuple[WorkingEntry, Fact]:
    await mem.capture(ctx, messages_of(SAID))
    await mem.end_session(ctx)
    clock.advance(days=1)
    await mem.consolidate(ctx)
    entries = mem.tiers.session_entries(ctx, [ctx.session_id or ""])
    facts = [f for f in await mem.facts(ctx) if f.text == SAID]
    assert len(entries) == 1 and len(facts) == 1
    return entries[0], facts[0]


# -- the lexicon fake -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("I am allergic to peanuts.", {"nut", "allergy", "food", "health"}),
        ("Moni does kickboxing twice a week.", {"martial arts", "sport"}),
        ("My sister lives in Lisbon.", {"family", "city", "europe"}),
    ],
    ids=["plural", "multi-word-key", "two-words"],
)
def test_lexicon_gives_broader_terms(text: str, wanted: set[str]) -> None:
    keys = LEXICON.keys(text)
    assert wanted <= set(keys)
    assert len(keys) <= MAX_KEYS
    assert not {k for k in keys if k in text.lower().split()}, "a key repeats a word of the text"


def test_lexicon_gives_nothing_for_unknown_words() -> None:
    assert LEXICON.keys("Quantum chromodynamics is hard.") == []


# -- through the pipeline -----------------------------------------------------------------------


async def test_keys_reach_entry_fact_and_text_search(mem: MemorySystem, ctx: MemoryContext, clock: FrozenClock) -> None:
    entry, fact = await _observed(mem, ctx, clock)

    assert "nut" in entry.keys and "food" in entry.keys
    assert fact.keys == entry.keys  # the fake consolidator's add inherits its source observation's keys
    assert {"nut", "food"} <= set(row(fact, None)["context"].split())
    assert row(fact, None)["text"] == SAID
    # Not embedded (measured: see embedded_text): the stored vector is the text's.
    assert embedded_text(fact) == SAID
    hits = mem.tiers.store.vector_search(
        "facts", mem.tiers.embed([SAID])[0], Where(eq={"user_id": ctx.user_id}), limit=1
    )
    assert [h.record.id for h in hits] == [fact.id]
    assert hits[0].vector.tolist() == pytest.approx(mem.tiers.embed([SAID])[0].tolist())
    found = mem.tiers.store.text_search("facts", "nuts", Where(eq={"user_id": ctx.user_id}), limit=5)
    assert [h.record.id for h in found] == [fact.id]


async def test_consolidator_keys_win_over_inherited(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    def reply(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
        if isinstance(call.inputs, consolidate.Input):
            return {"operations": [{"op": "add", "subject": "user", "text": SAID, "keys": ["Legumes", " legumes "]}]}
        return default_reply(call)

    mem = system(model=FunctionModel(LEXICON.attach(reply)).model, store=store_path, embedder=embedder, clock=clock)
    _, fact = await _observed(mem, ctx, clock)
    assert fact.keys == ("legumes",)


# No word of the cue is a word of SAID, nor shares a character trigram with it (the hashing embedder's features).
CUE = "what food must I avoid"
FILLER = json.loads((Path(__file__).parents[1] / "data" / "filler.json").read_text())["memories"][:20]


@pytest.mark.parametrize("keyed", [True, False], ids=["with-keys", "without-keys"])
async def test_a_cue_sharing_only_a_key_ranks_the_memory_first(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext, keyed: bool
) -> None:
    """Among memories all related by meaning (the gate opened), the one whose key the cue names comes
    first; without keys (the control) the hashing embedder's noise decides."""

    def reply(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
        return default_reply(call)

    model = FunctionModel(LEXICON.attach(reply) if keyed else reply)
    mem = system(model=model.model, store=store_path, embedder=embedder, clock=clock, recall={"min_similarity": -1.0})
    for text in FILLER:
        await mem.add_semantic_fact(ctx, text)
    _, fact = await _observed(mem, ctx, clock)
    ctx2 = MemoryContext(user_id=ctx.user_id, session_id="s-2")

    found = await mem.recall(ctx2, CUE, tiers=["semantic"])

    assert (found[0].id == fact.id) is keyed
    if keyed:
        assert found[0].text == fact.text  # shown without its keys


def _candidate(*, text: str, similarity: float, keys: tuple[str, ...] = ()) -> Candidate:
    item = MemoryItem(
        id=text, tier="semantic", subject="user", text=text, confidence=0.8, created_at=NOW, updated_at=NOW
    )
    return Candidate(item=item, similarity=similarity, lexical=1.0, keys=keys)


@pytest.mark.parametrize(
    ("similarity", "keys", "text", "admitted"),
    [
        (0.05, ("nut",), SAID, False),
        (0.45, ("nut",), SAID, True),
        (0.05, (), "The user avoids nuts.", True),
    ],
    ids=["key-far-in-meaning", "key-near-in-meaning", "shared-word"],
)
def test_keys_rank_but_never_admit(similarity: float, keys: tuple[str, ...], text: str, admitted: bool) -> None:
    """A key is a model's guess: a memory it alone ties to the cue must pass the meaning gate (0.3
    here), so keys add no false positive; a word of the memory's own text admits it as before."""
    found = rank(
        [_candidate(text=text, similarity=similarity, keys=keys)],
        now=NOW,
        options=RecallOptions(),
        cue="which nuts must I avoid",
        related_similarity=0.3,
        limit=5,
    )
    assert bool(found) is admitted


async def test_keys_never_show_in_the_context_block(mem: MemorySystem, ctx: MemoryContext, clock: FrozenClock) -> None:
    _, fact = await _observed(mem, ctx, clock)
    ctx2 = MemoryContext(user_id=ctx.user_id, session_id="s-2")

    block = await mem.format_context(ctx2, "am I allergic to any food")

    assert fact.text in block
    assert "keys" not in block and "nut " not in block and "food" not in block


# -- validation and old rows ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        (["Nuts", " nuts ", "FOOD  allergy", ""], ["nuts", "food allergy"]),
        (["ok", 3, None, {"a": 1}, "x" * 41, "bad\x00key"], ["ok"]),
        ([f"k{i}" for i in range(12)], [f"k{i}" for i in range(MAX_KEYS)]),
        ("nuts", []),
        (None, []),
    ],
    ids=["normalised", "bad-items-dropped", "capped", "not-a-list", "null"],
)
def test_model_keys_are_normalised_and_bad_ones_dropped(raw: object, kept: list[str]) -> None:
    obs = observe.Observation.model_validate(
        {"subject": "user", "kind": "fact", "text": SAID, "salience": 0.9, "keys": raw}
    )
    op = consolidate.Operation.model_validate({"op": "add", "subject": "user", "text": SAID, "keys": raw})
    assert obs.keys == kept and op.keys == kept
    assert retrieval_keys(raw) == tuple(kept)


def test_schema_lets_a_model_leave_keys_out() -> None:
    obs = observe.Observation.model_validate({"subject": "user", "kind": "fact", "text": SAID, "salience": 0.9})
    assert obs.keys == []
    assert "keys" not in observe.Observation.model_json_schema().get("required", [])


def test_records_stored_before_keys_still_load(ctx: MemoryContext, clock: FrozenClock) -> None:
    fact = Fact.new(ctx, subject="user", text=SAID, now=clock.now())
    old = json.loads(fact.model_dump_json())
    del old["keys"]
    loaded = Fact.model_validate_json(json.dumps(old))
    assert loaded.keys == () and loaded == fact
    assert embedded_text(loaded) == SAID
    assert row(loaded, None)["context"] == SAID


async def test_stored_fact_without_keys_loads_from_a_real_store(
    mem: MemorySystem, ctx: MemoryContext, clock: FrozenClock
) -> None:
    """A row written by a version without keys (its JSON has no "keys") reads back as a fact with none."""
    fact = Fact.new(ctx, subject="user", text="The user likes jazz.", now=clock.now())
    record = json.loads(fact.model_dump_json())
    del record["keys"]
    mem.tiers.store.upsert("facts", [fact], mem.tiers.embed([fact.text]))
    table = mem.tiers.store.table("facts")  # rewrite the stored JSON as a version without keys wrote it
    table.update(where=f"id = '{fact.id}'", values={"record": json.dumps(record)})
    assert [f.keys for f in await mem.facts(ctx)] == [()]


async def test_a_fact_stored_without_keys_takes_them_when_reinforced(
    mem: MemorySystem, ctx: MemoryContext, clock: FrozenClock
) -> None:
    before = await mem.add_semantic_fact(ctx, SAID)
    assert before.keys == ()

    _, fact = await _observed(mem, ctx, clock)

    assert fact.id == before.id and fact.reinforcements == 1
    assert "nut" in fact.keys


def test_consolidator_is_shown_the_observations_keys(ctx: MemoryContext, clock: FrozenClock) -> None:
    """The consolidator sees each observation's keys, to keep them when they still fit."""
    entry = WorkingEntry(
        id="wm_1",
        namespace=ctx.namespace,
        user_id=ctx.user_id,
        session_id="s-1",
        subject="user",
        text=SAID,
        keys=("nut", "food"),
        created_at=clock.now(),
        updated_at=clock.now(),
    )
    episode = Episode(
        id="ep_1",
        namespace=ctx.namespace,
        user_id=ctx.user_id,
        session_id="s-1",
        summary="The user talked about allergies.",
        started_at=clock.now(),
        ended_at=clock.now(),
        created_at=clock.now(),
        updated_at=clock.now(),
    )
    inputs = consolidate.Input(episodes=[episode], observations=[entry], existing=[], now=clock.now())
    prompt = "\n".join(m["content"] for m in consolidate.STAGE.render(inputs))
    assert f"[user] {SAID} (keys: nut, food)" in prompt
    assert '"keys"' in prompt


async def test_compaction_keeps_the_sources_keys(ctx: MemoryContext, clock: FrozenClock) -> None:
    a = Fact.new(ctx, subject="user", text="The user likes tea.", now=clock.now(), keys=["drink", "beverage"])
    b = Fact.new(ctx, subject="user", text="The user drinks green tea.", now=clock.now(), keys=["drink", "hot"])
    merge = {"source_ids": [a.id, b.id], "text": "The user likes tea, green tea most."}
    stages = LLMStages(LLM(stage_model({compact.STAGE: {"merges": [merge]}}).model))

    plan = await compact_subject(stages, ctx=ctx, subject="user", facts=[a, b], now=clock.now())

    merged = next(f for f in plan.facts if f.status == "active")
    assert merged.keys == ("drink", "beverage", "hot")
