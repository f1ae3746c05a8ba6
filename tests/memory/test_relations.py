"""Relations (opt-in): edges from the consolidator, graph helpers, the connect tool, the janitor, the cache.

Everything goes through the public API: ``system(model=...)`` with a scripted fake model reached
through litellm (a ``FunctionModel`` that answers each pipeline stage, told apart by the stage call
it receives) or with the offline rules model, and a real LanceDB store in a temporary folder.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tiermem import (
    MEMORY_CAPABILITY_PRESETS,
    ConsolidationResult,
    Edge,
    InvalidArgumentError,
    MemoryCapability,
    MemoryContext,
    MemorySystem,
    create_memory_capability,
    system,
)
from tiermem.jobs import run_janitor
from tiermem.memory._identity import edge_id
from tiermem.memory._stage import Stage
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, RecordedCall, StageCall, Where
from tiermem.prompts import consolidate, encode_consolidate, encode_episode, observe

# litellm builds a pydantic adapter for a TypedDict with ReadOnly items on its first completion;
# pyproject's filterwarnings=error turns that third-party UserWarning into a failed model call.
LITELLM_READONLY_NOISE = "ignore:Item.*using the `ReadOnly` qualifier:UserWarning"
pytestmark = pytest.mark.filterwarnings(LITELLM_READONLY_NOISE)

Relations = bool | dict[str, Any] | None
Triple = tuple[str, str, str]


# -- a fake model for every stage -------------------------------------------------------------------


def add(subject: str, text: str, confidence: float = 0.8) -> dict[str, Any]:
    """A consolidator "add" operation, as the model would send it."""
    return consolidate.Operation(op="add", subject=subject, text=text, confidence=confidence).model_dump()


def link(source: str, relation: str, target: str, confidence: float = 0.8) -> dict[str, Any]:
    """A consolidator edge, as the model would send it."""
    return consolidate.EdgeOut(source=source, relation=relation, target=target, confidence=confidence).model_dump()


@dataclass
class FakeModel:
    """Scripted answers per stage; set ``operations``/``edges``/``subjects`` before each session."""

    operations: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    subjects: list[str] = field(default_factory=lambda: ["user"])
    summary: str = "The user caught up on family news."
    fn: FunctionModel = field(init=False)

    def __post_init__(self) -> None:
        self.fn = FunctionModel(self.reply)

    @property
    def model(self) -> str:
        return self.fn.model

    def reply(self, messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
        stage = call.stage
        if stage is observe.STAGE:
            obs = observe.Observation(subject="user", kind="fact", text="The user shared some news.", salience=0.5)
            return observe.Output(observations=[obs]).model_dump()
        if stage is encode_episode.STAGE:
            return encode_episode.Output(summary=self.summary, subjects=self.subjects, salience=0.6).model_dump()
        if stage is consolidate.STAGE:
            return {"operations": self.operations, "edges": self.edges}
        if stage is encode_consolidate.STAGE:  # the default: the summaries, then what the consolidator says
            written = [
                {"id": i, "summary": self.summary, "subjects": self.subjects, "salience": 0.6}
                for i in call.inputs.encode
            ]
            return {"episodes": written, "operations": self.operations, "edges": self.edges}
        raise AssertionError(f"unexpected stage {stage}")

    def calls(self, stage: Stage[Any, Any]) -> list[RecordedCall]:
        return [c for c in self.fn.calls if c.call is not None and c.call.stage is stage]


MakeSystem = Callable[..., tuple[MemorySystem, FakeModel]]


@pytest.fixture
def make(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> MakeSystem:
    """``make(relations)`` -> a system over the test store with a fresh fake model."""

    def build(
        relations: Relations = True, *, semantic: Any = None, preset: str = "default", episodic: Any = True
    ) -> tuple[MemorySystem, FakeModel]:
        fake = FakeModel()
        sem = semantic if semantic is not None else {"relations": relations}
        mem = system(
            model=fake.model, store=store_path, embedder=embedder, clock=clock, semantic=sem, preset=preset,
            episodic=episodic,
        )  # fmt: skip
        return mem, fake

    return build


def reader(store_path: str, embedder: HashingEmbedder, clock: FrozenClock, relations: Relations) -> MemoryCapability:
    return create_memory_capability(store=store_path, embedder=embedder, clock=clock, semantic={"relations": relations})


_sessions = iter(range(10**6))


async def session(
    mem: MemorySystem,
    fake: FakeModel,
    ctx: MemoryContext,
    *,
    facts: Sequence[dict[str, Any]] = (),
    edges: Sequence[dict[str, Any]] = (),
    subjects: Sequence[str] = ("user",),
) -> ConsolidationResult:
    """One session through the public pipeline: capture, end_session, consolidate."""
    fake.operations, fake.edges, fake.subjects = list(facts), list(edges), list(subjects)
    sctx = ctx.model_copy(update={"session_id": f"s-{next(_sessions)}"})
    captured = await mem.capture(sctx, [{"role": "user", "content": "Some news about the family."}])
    ended = await mem.end_session(sctx)
    assert not captured.deferred and not ended.deferred, (captured.error, ended.error)
    return await mem.consolidate(sctx)


def triples(edges: Sequence[Edge]) -> set[Triple]:
    return {(e.source, e.relation, e.target) for e in edges}


FAMILY_FACTS = [
    add("moni", "Moni started a pottery class."),
    add("tom", "Tom collects vintage stamps."),
]
FAMILY_EDGES = [link("user", "married to", "moni"), link("tom", "brother of", "moni")]
FAMILY = {"user", "moni", "tom"}


async def family(mem: MemorySystem, fake: FakeModel, ctx: MemoryContext) -> None:
    """user --married to--> moni, tom --brother of--> moni; facts for moni and tom."""
    await session(mem, fake, ctx, facts=FAMILY_FACTS, edges=FAMILY_EDGES, subjects=sorted(FAMILY))


# -- relations off (the default) --------------------------------------------------------------------

OFF = [True, {}, {"relations": False}, {"relations": {"enabled": False}}]
OFF_IDS = ["semantic-true", "empty-dict", "relations-false", "enabled-false"]


@pytest.mark.parametrize("semantic", OFF, ids=OFF_IDS)
async def test_off_by_default_no_edges_written(make: MakeSystem, ctx: MemoryContext, semantic: Any) -> None:
    mem, fake = make(semantic=semantic)
    result = await session(mem, fake, ctx, facts=FAMILY_FACTS, edges=FAMILY_EDGES, subjects=sorted(FAMILY))
    assert mem.relations.options is None
    assert result.counts.get("add") == 2
    assert not any(key.startswith("edges") for key in result.counts)
    assert mem.store.count("edges") == 0
    assert await mem.facts(ctx, subject="tom") != []


@pytest.mark.parametrize("semantic", OFF, ids=OFF_IDS)
async def test_off_consolidate_system_prompt_has_no_relation_text(
    make: MakeSystem, ctx: MemoryContext, semantic: Any
) -> None:
    # The consolidate stage's own prompt (the two-call path); the combined prompt's encoder part says "their
    # relation to the user" of people, so the word check holds for this stage only.
    mem, fake = make(semantic=semantic, episodic={"encode": "session"})
    await session(mem, fake, ctx, facts=FAMILY_FACTS, edges=FAMILY_EDGES, subjects=sorted(FAMILY))
    (call,) = fake.calls(consolidate.STAGE)
    instructions = str(call.messages[0]["content"]).lower()
    assert "relation" not in instructions
    assert "edge" not in instructions


ENCODINGS: dict[str, Stage[Any, Any]] = {"consolidation": encode_consolidate.STAGE, "session": consolidate.STAGE}
"""The stage that consolidates with each ``episodic.encode``: the combined one by default, else the consolidator."""


@pytest.mark.parametrize("encode", list(ENCODINGS), ids=list(ENCODINGS))
async def test_on_consolidate_system_prompt_asks_for_edges(make: MakeSystem, ctx: MemoryContext, encode: str) -> None:
    mem, fake = make({"vocabulary": ["married to", "works at"]}, episodic={"encode": encode})
    await session(mem, fake, ctx, facts=FAMILY_FACTS, subjects=sorted(FAMILY))
    (call,) = fake.calls(ENCODINGS[encode])
    instructions = str(call.messages[0]["content"])
    assert "extract typed relations" in instructions
    assert "Use only these relation types: married to, works at." in instructions


async def test_off_consolidate_request_mentions_no_edges(make: MakeSystem, ctx: MemoryContext) -> None:
    # The consolidate stage's request (two-call path): the combined one says "their relation to the user".
    mem, fake = make(semantic=True, episodic={"encode": "session"})
    await session(mem, fake, ctx, facts=FAMILY_FACTS, subjects=sorted(FAMILY))
    (call,) = fake.calls(consolidate.STAGE)
    assert "relation" not in call.prompt.lower()


async def test_off_helpers_are_empty_even_over_a_store_with_edges(
    make: MakeSystem, ctx: MemoryContext, store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    on, fake = make(True)
    await family(on, fake, ctx)
    assert on.store.count("edges") == 2
    off = reader(store_path, embedder, clock, False)
    assert await off.connections(ctx, "user") == []
    assert await off.relate(ctx, "user", "tom") is None
    assert await off.ego_graph(ctx, "user", radius=2) == {"nodes": [], "edges": []}
    assert off.relations.edges(ctx) == []
    assert off.relations.remove_dangling_edges(ctx) == 0
    assert off.store.count("edges") == 2


@pytest.mark.parametrize(
    "preset", ["default", "connect", "tools", "recall"], ids=["default", "connect", "tools", "recall"]
)
async def test_off_tools_have_no_connect(make: MakeSystem, ctx: MemoryContext, preset: str) -> None:
    mem, _ = make(False, preset=preset)
    names = [t.name for t in mem.tools(ctx)]
    assert "memory_connect" not in names
    assert names == (["memory_recall"] if "memory_recall" in MEMORY_CAPABILITY_PRESETS[preset].tools else [])


@pytest.mark.parametrize(
    "arguments",
    [{"from": "user"}, {"from": "user", "to": "moni"}, '{"from": "moni", "max_hops": 2}'],
    ids=["from", "from-to", "json-string"],
)
async def test_off_connect_tool_returns_recoverable_error(
    make: MakeSystem, ctx: MemoryContext, arguments: dict[str, Any] | str
) -> None:
    mem, _ = make(False)
    envelope = await mem.relations.connect_tool(ctx).call(arguments)
    assert envelope["ok"] is False
    assert envelope["results"] == []
    assert isinstance(envelope["error"], str) and "relations are off" in envelope["error"]


# -- relations on: what the consolidator's edges become ---------------------------------------------


async def test_on_edges_stored_with_canonical_endpoints(make: MakeSystem, ctx: MemoryContext) -> None:
    mem, fake = make(True)
    result = await session(
        mem,
        fake,
        ctx,
        facts=[add("moni", "Moni started a pottery class."), add("acme-corp", "Acme Corp makes robots.")],
        edges=[link("I", "Married  To", "Moni"), link("The User", "works at", "Acme Corp")],
        subjects=["user", "moni", "acme-corp"],
    )
    assert triples(mem.relations.edges(ctx)) == {
        ("user", "married to", "moni"),
        ("user", "works at", "acme-corp"),
    }
    assert not any(key.startswith("edges_") for key in result.counts)
    stored = mem.relations.edges(ctx)
    assert {(e.namespace, e.user_id) for e in stored} == {(ctx.namespace, ctx.user_id)}
    assert all(e.reinforcements == 0 and e.confidence == 0.8 for e in stored)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (link("user", "knows", "user"), "edges_invalid"),
        (link("user", "knows", "I"), "edges_invalid"),
        (link("user", "knows", "<script>"), "edges_invalid"),
        (link("user", "knows", "globex"), "edges_unknown_endpoint"),
        (link("Globex Ltd", "employs", "user"), "edges_unknown_endpoint"),
    ],
    ids=["self-loop", "self-loop-via-I", "non-canonical", "unknown-target", "unknown-source"],
)
async def test_on_bad_edges_are_dropped_and_counted(
    make: MakeSystem, ctx: MemoryContext, raw: dict[str, Any], reason: str
) -> None:
    mem, fake = make(True)
    result = await session(
        mem, fake, ctx, facts=FAMILY_FACTS, edges=[raw, link("user", "married to", "moni")], subjects=sorted(FAMILY)
    )
    assert result.counts.get(reason) == 1
    assert triples(mem.relations.edges(ctx)) == {("user", "married to", "moni")}


@pytest.mark.parametrize(
    ("implicit", "expected"),
    [
        (False, {("user", "married to", "moni")}),
        (True, {("user", "married to", "moni"), ("user", "works at", "globex")}),
    ],
    ids=["unknown-endpoint-dropped", "implicit-entity-minted"],
)
async def test_on_unknown_endpoint_dropped_or_minted(
    make: MakeSystem, ctx: MemoryContext, implicit: bool, expected: set[Triple]
) -> None:
    mem, fake = make({"create_implicit_entities": implicit})
    edges = [link("user", "married to", "moni"), link("user", "works at", "Globex")]
    result = await session(mem, fake, ctx, facts=FAMILY_FACTS, edges=edges, subjects=sorted(FAMILY))
    assert triples(mem.relations.edges(ctx)) == expected
    assert result.counts.get("edges_unknown_endpoint", 0) == (0 if implicit else 1)
    assert result.counts.get("edges_implicit_endpoint", 0) == (1 if implicit else 0)
    assert {e.target for e in await mem.connections(ctx, "globex")} == ({"globex"} if implicit else set())
    if implicit:
        assert result.refusals == []
    else:  # reported with its reason, not only counted
        (refusal,) = result.refusals
        assert refusal.startswith("edge user --works at--> globex: unknown endpoint 'globex'")
        assert "create_implicit_entities" in refusal


async def test_on_endpoint_known_from_existing_facts(make: MakeSystem, ctx: MemoryContext) -> None:
    """A subject with a stored fact is a known endpoint in a later session that does not mention it."""
    mem, fake = make(True)
    await session(mem, fake, ctx, facts=[add("acme-corp", "Acme Corp makes robots.")], subjects=["acme-corp"])
    result = await session(mem, fake, ctx, edges=[link("user", "works at", "acme-corp")], subjects=["user"])
    assert result.counts.get("edges_unknown_endpoint", 0) == 0
    assert triples(mem.relations.edges(ctx)) == {("user", "works at", "acme-corp")}


@pytest.mark.parametrize(
    ("vocabulary", "expected", "dropped"),
    [
        (None, {("user", "married to", "moni"), ("user", "works at", "acme-corp")}, 0),
        (["married to"], {("user", "married to", "moni")}, 1),
        (["Works  AT", "owns"], {("user", "works at", "acme-corp")}, 1),
        (["owns"], set(), 2),
    ],
    ids=["free-text", "married-only", "works-at-normalised", "nothing-allowed"],
)
async def test_on_vocabulary_filters_relation_types(
    make: MakeSystem, ctx: MemoryContext, vocabulary: list[str] | None, expected: set[Triple], dropped: int
) -> None:
    mem, fake = make({"vocabulary": vocabulary})
    result = await session(
        mem,
        fake,
        ctx,
        facts=[add("moni", "Moni started a pottery class."), add("acme-corp", "Acme Corp makes robots.")],
        edges=[link("user", "Married to", "moni"), link("user", "works at", "acme-corp")],
        subjects=["user", "moni", "acme-corp"],
    )
    assert triples(mem.relations.edges(ctx)) == expected
    assert result.counts.get("edges_out_of_vocabulary", 0) == dropped


async def test_on_max_edges_keeps_the_strongest(make: MakeSystem, ctx: MemoryContext) -> None:
    mem, fake = make({"max_edges": 2})
    edges = [
        link("user", "married to", "moni", 0.9),
        link("tom", "brother of", "moni", 0.5),
        link("tom", "friend of", "user", 0.7),
    ]
    await session(mem, fake, ctx, facts=FAMILY_FACTS, edges=edges, subjects=sorted(FAMILY))
    assert triples(mem.relations.edges(ctx)) == {("user", "married to", "moni"), ("tom", "friend of", "user")}


async def test_on_max_edges_keeps_the_newest_at_equal_confidence(
    make: MakeSystem, ctx: MemoryContext, clock: FrozenClock
) -> None:
    mem, fake = make({"max_edges": 2})
    await session(
        mem, fake, ctx, facts=FAMILY_FACTS, edges=[link("tom", "brother of", "moni")], subjects=sorted(FAMILY)
    )
    clock.advance(days=1)
    newer = [link("user", "married to", "moni"), link("tom", "friend of", "user")]
    await session(mem, fake, ctx, edges=newer, subjects=sorted(FAMILY))
    assert triples(mem.relations.edges(ctx)) == {("user", "married to", "moni"), ("tom", "friend of", "user")}
    assert mem.store.count("edges") == 2


def stored_edge(
    ctx: MemoryContext,
    target: str,
    *,
    when: datetime,
    confidence: float = 0.8,
    closed: bool = False,
    support: tuple[str, ...] = (),
) -> Edge:
    """An edge user --knows--> ``target`` as stored, last changed ``when`` (closed then, if ``closed``)."""
    return Edge(
        id=edge_id(ctx, source="user", relation="knows", target=target), namespace=ctx.namespace,
        user_id=ctx.user_id, source="user", relation="knows", target=target, confidence=confidence,
        created_at=T0, updated_at=when, valid_from=T0, valid_to=when if closed else None, support=support,
    )  # fmt: skip


T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
# (target, days after T0 it last changed, confidence, closed) per edge; max_edges=2 drops one.
CAP_CASES: list[Any] = [
    pytest.param([("ann", 3, 0.9, True), ("bea", 1, 0.5, False), ("cid", 2, 0.5, False)], "ann", id="history-first"),
    pytest.param([("ann", 1, 0.8, False), ("bea", 2, 0.8, False), ("cid", 3, 0.8, False)], "ann", id="least-recent"),
    pytest.param(
        [("ann", 1, 0.9, False), ("bea", 2, 0.5, False), ("cid", 3, 0.5, False)], "ann", id="recency-before-confidence"
    ),
    pytest.param(
        [("ann", 2, 0.9, False), ("bea", 2, 0.5, False), ("cid", 2, 0.7, False)], "bea", id="then-least-confident"
    ),
    pytest.param([("ann", 2, 0.8, False), ("bea", 2, 0.8, False), ("cid", 2, 0.8, False)], None, id="then-by-id"),
]


@pytest.mark.parametrize("reverse", [False, True], ids=["in-order", "reversed"])
@pytest.mark.parametrize(("spec", "dropped"), CAP_CASES)
async def test_on_max_edges_breaks_ties_by_recency_then_confidence_then_id(
    make: MakeSystem, ctx: MemoryContext, spec: list[tuple[str, int, float, bool]], dropped: str | None, reverse: bool
) -> None:
    mem, _ = make({"max_edges": 2})
    edges = [stored_edge(ctx, t, when=T0 + d * DAY, confidence=c, closed=x) for t, d, c, x in spec]
    mem.relations.put_edges(ctx, edges[::-1] if reverse else edges)
    gone = dropped or min(edges, key=lambda e: e.id).target  # a full tie: the smallest id goes, whatever the order
    assert sorted(e.target for e in mem.relations.edges(ctx)) == sorted(t for t, *_ in spec if t != gone)


# -- the janitor's edge rule: the same support set as supersession ---------------------------------


@pytest.mark.parametrize(
    ("ends", "closed", "support_left"),
    [
        (("superseded", "archived"), True, 2),
        (("forgotten", "archived"), True, 1),
        (("forgotten", "forgotten"), False, 0),
    ],
    ids=["superseded-and-archived-closes", "one-row-left-closes", "no-row-left-deletes"],
)
async def test_janitor_closes_unsupported_edges_and_deletes_only_those_with_no_support_row(
    make: MakeSystem, ctx: MemoryContext, ends: tuple[str, str], closed: bool, support_left: int
) -> None:
    mem, _ = make(True)
    facts = [
        await mem.add_semantic_fact(ctx, text, subject="moni")
        for text in ("Moni, the user's wife, loves jazz.", "Moni, the user's wife, is a nurse.")
    ]
    edge = stored_edge(ctx, "moni", when=T0, support=tuple(sorted(f.id for f in facts)))
    mem.relations.put_edges(ctx, [edge])
    for fact, end in zip(facts, ends, strict=True):
        if end == "forgotten":  # the row is gone (as after an erasure that did not reach the edge)
            mem.store.delete("facts", Where(eq={**_scope(ctx).eq, "id": fact.id}))
        else:
            mem.tiers.put_facts([fact.model_copy(update={"status": end})])

    report = await run_janitor(mem)

    stored = {e.id: e for e in mem.relations.edges(ctx)}
    assert (report.edges_removed, report.edges_deleted) == (1, 0 if closed else 1)
    assert (edge.id in stored) is closed
    if closed:
        assert stored[edge.id].valid_to is not None and not stored[edge.id].current  # kept as history
        assert len(stored[edge.id].support) == support_left  # only facts still stored
    assert await mem.connections(ctx, "moni") == []
    assert (await run_janitor(mem)).edges_removed == 0


async def test_janitor_deletes_a_closed_edge_once_its_support_rows_are_gone(
    make: MakeSystem, ctx: MemoryContext
) -> None:
    mem, _ = make(True)
    fact = await mem.add_semantic_fact(ctx, "Moni, the user's wife, loves jazz.", subject="moni")
    edge = stored_edge(ctx, "moni", when=T0, closed=True, support=(fact.id,))
    mem.relations.put_edges(ctx, [edge])
    mem.store.delete("facts", Where(eq={**_scope(ctx).eq, "id": fact.id}))

    report = await run_janitor(mem)

    assert (report.edges_removed, report.edges_deleted) == (1, 1)
    assert mem.relations.edges(ctx) == []


async def test_on_repeated_edge_reinforces_one_row(make: MakeSystem, ctx: MemoryContext, clock: FrozenClock) -> None:
    mem, fake = make(True)
    await session(
        mem, fake, ctx, facts=FAMILY_FACTS, edges=[link("user", "married to", "moni", 0.6)], subjects=sorted(FAMILY)
    )
    (first,) = mem.relations.edges(ctx)
    clock.advance(hours=5)
    await session(mem, fake, ctx, edges=[link("User", "MARRIED TO", "Moni", 0.9)], subjects=sorted(FAMILY))
    (again,) = mem.relations.edges(ctx)
    assert again.id == first.id
    assert again.reinforcements == first.reinforcements + 1 == 1
    assert again.confidence == 0.9
    assert again.created_at == first.created_at
    assert again.updated_at == clock.now()
    assert mem.store.count("edges") == 1


async def test_on_consolidated_edge_has_provenance(make: MakeSystem, ctx: MemoryContext) -> None:
    mem, fake = make(True)
    await family(mem, fake, ctx)
    (fact,) = await mem.facts(ctx, subject="moni")
    assert fact.provenance != ()
    assert all(e.provenance == fact.provenance for e in mem.relations.edges(ctx))


async def test_on_edges_are_scoped_to_their_user(make: MakeSystem, ctx: MemoryContext) -> None:
    mem, fake = make(True)
    await family(mem, fake, ctx)
    other = MemoryContext(user_id="u-2", session_id="s-x")
    assert await mem.connections(other, "user") == []
    assert await mem.relate(other, "user", "moni") is None
    assert (await mem.relations.connect_tool(other).call({"from": "user"}))["results"] == []


# -- the rules model --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "relations", "edge"),
    [
        ("My wife Moni loves hiking.", True, ("user", "married to", "moni")),
        ("My brother Tom lives in Berlin.", True, ("tom", "brother of", "user")),
        ("My girlfriend Ana plays chess.", True, ("user", "partner of", "ana")),
        ("I work at Acme Corp.", {"create_implicit_entities": True}, ("user", "works at", "acme-corp")),
    ],
    ids=["wife", "brother", "girlfriend", "works-at-implicit"],
)
async def test_rules_model_extracts_edges(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    text: str,
    relations: Relations,
    edge: Triple,
) -> None:
    mem = system(model="rules", store=store_path, embedder=embedder, clock=clock, semantic={"relations": relations})
    await mem.capture(ctx, [{"role": "user", "content": text}])
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    assert triples(mem.relations.edges(ctx)) == {edge}


@pytest.mark.parametrize(
    ("relations", "expected", "counted"),
    [
        (True, {("user", "married to", "moni")}, 1),
        ({"create_implicit_entities": True}, {("user", "married to", "moni"), ("user", "works at", "acme-corp")}, 0),
        ({"vocabulary": ["works at"], "create_implicit_entities": True}, {("user", "works at", "acme-corp")}, 0),
        (False, set(), 0),
    ],
    ids=["org-unknown-dropped", "org-minted", "vocabulary", "off"],
)
async def test_rules_model_endpoint_and_vocabulary_rules(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    relations: Relations,
    expected: set[Triple],
    counted: int,
) -> None:
    mem = system(model="rules", store=store_path, embedder=embedder, clock=clock, semantic={"relations": relations})
    await mem.capture(ctx, [{"role": "user", "content": "My wife Moni loves hiking. I work at Acme Corp."}])
    await mem.end_session(ctx)
    result = await mem.consolidate(ctx)
    assert triples(mem.store.query("edges", _scope(ctx))) == expected
    assert result.counts.get("edges_unknown_endpoint", 0) == counted


def _scope(ctx: MemoryContext) -> Where:
    return Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})


# -- graph reads ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def family_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per module: the family graph plus an island, ann --friend of--> bea (user u-1)."""
    path = tmp_path_factory.mktemp("family") / "store"
    fake = FakeModel()
    clock = FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    mem = system(
        model=fake.model, store=str(path), embedder=HashingEmbedder(256), clock=clock, semantic={"relations": True}
    )
    facts = [*FAMILY_FACTS, add("ann", "Ann runs marathons."), add("bea", "Bea paints.")]
    edges = [*FAMILY_EDGES, link("ann", "friend of", "bea")]
    ctx = MemoryContext(user_id="u-1", session_id="s-1")
    asyncio.run(session(mem, fake, ctx, facts=facts, edges=edges, subjects=[*sorted(FAMILY), "ann", "bea"]))
    return path


@pytest.fixture
def fam(family_store: Path, store_path: str, make: MakeSystem) -> MemorySystem:
    """A private copy of the family store, opened with relations on."""
    shutil.copytree(family_store, store_path)
    mem, _ = make(True)
    return mem


MARRIED: Triple = ("user", "married to", "moni")
BROTHER: Triple = ("tom", "brother of", "moni")


@pytest.mark.parametrize(
    ("a", "b", "max_hops", "expected"),
    [
        ("user", "tom", None, [MARRIED, BROTHER]),
        ("tom", "user", None, [BROTHER, MARRIED]),
        ("Moni", "user", None, [MARRIED]),
        ("user", "tom", 2, [MARRIED, BROTHER]),
        ("user", "tom", 1, None),
        ("user", "user", None, []),
        ("user", "ann", None, None),
        ("user", "zed", None, None),
        ("zed", "user", None, None),
    ],
    ids=["two-hops", "reverse", "one-hop-display-case", "within-max-hops", "beyond-max-hops", "self",
         "unreachable", "unknown-target", "unknown-source"],
)  # fmt: skip
async def test_relate(
    fam: MemorySystem, ctx: MemoryContext, a: str, b: str, max_hops: int | None, expected: list[Triple] | None
) -> None:
    path = await fam.relate(ctx, a, b, max_hops=max_hops)
    assert (None if path is None else [(e.source, e.relation, e.target) for e in path]) == expected


@pytest.mark.parametrize(
    ("entity", "radius", "nodes", "edges"),
    [
        ("user", 0, ["user"], []),
        ("user", 1, ["moni", "user"], [MARRIED]),
        ("user", 2, ["moni", "tom", "user"], [MARRIED, BROTHER]),
        ("tom", 1, ["moni", "tom"], [BROTHER]),
        ("ann", 3, ["ann", "bea"], [("ann", "friend of", "bea")]),
        ("zed", 2, [], []),
    ],
    ids=["radius-0", "radius-1", "radius-2", "tom-radius-1", "island", "unknown"],
)
async def test_ego_graph(
    fam: MemorySystem, ctx: MemoryContext, entity: str, radius: int, nodes: list[str], edges: list[Triple]
) -> None:
    ego = await fam.ego_graph(ctx, entity, radius=radius)
    assert ego["nodes"] == nodes
    assert sorted((e.source, e.relation, e.target) for e in ego["edges"]) == sorted(edges)


async def test_ego_graph_negative_radius(fam: MemorySystem, ctx: MemoryContext) -> None:
    with pytest.raises(InvalidArgumentError):
        await fam.ego_graph(ctx, "user", radius=-1)


@pytest.mark.parametrize(
    ("entity", "expected"),
    [
        ("user", {MARRIED}),
        ("Sam", {MARRIED}),
        ("sam", {MARRIED}),
        ("I", {MARRIED}),
        ("Moni", {MARRIED, BROTHER}),
        ("zed", set()),
    ],
    ids=["user", "alias", "alias-lowercase", "first-person", "display-name", "unknown"],
)
async def test_connections(fam: MemorySystem, ctx: MemoryContext, entity: str, expected: set[Triple]) -> None:
    await fam.add_alias(ctx, "Sam", "user")
    assert triples(await fam.connections(ctx, entity)) == expected


async def test_connections_strongest_first(make: MakeSystem, ctx: MemoryContext) -> None:
    mem, fake = make(True)
    edges = [link("user", "married to", "moni", 0.6), link("tom", "friend of", "user", 0.95)]
    await session(mem, fake, ctx, facts=FAMILY_FACTS, edges=edges, subjects=sorted(FAMILY))
    assert [e.confidence for e in await mem.connections(ctx, "user")] == [0.95, 0.6]


# -- the memory_connect tool ------------------------------------------------------------------------


def _triples(envelope: dict[str, Any]) -> list[Triple]:
    meta = [r["metadata"] for r in envelope["results"]]
    return [(m["source"], m["relation"], m["target"]) for m in meta]


async def test_connect_from_lists_edges_as_relation_items(fam: MemorySystem, ctx: MemoryContext) -> None:
    envelope = await fam.tools(ctx).get("memory_connect").call({"from": "Moni"})  # type: ignore[union-attr]
    assert envelope["ok"] is True and envelope["error"] is None
    assert {r["tier"] for r in envelope["results"]} == {"relation"}
    assert sorted(_triples(envelope)) == sorted([MARRIED, BROTHER])
    assert {r["text"] for r in envelope["results"]} == {"user --married to--> moni", "tom --brother of--> moni"}
    assert {r["subject"] for r in envelope["results"]} == {"user", "tom"}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"from": "user", "to": "tom"}, [MARRIED, BROTHER]),
        ('{"from": "tom", "to": "user", "max_hops": 2}', [BROTHER, MARRIED]),
        ({"from": "user", "to": "tom", "max_hops": 1}, []),
        ({"from": "user", "to": "ann"}, []),
        ({"from": "user", "to": "zed"}, []),
        ({"from": "zed"}, []),
        ({"from": "ann"}, [("ann", "friend of", "bea")]),
    ],
    ids=["path", "path-json", "beyond-max-hops", "unreachable", "unknown-to", "unknown-from", "island"],
)
async def test_connect_tool_results(
    fam: MemorySystem, ctx: MemoryContext, arguments: dict[str, Any] | str, expected: list[Triple]
) -> None:
    envelope = await fam.relations.connect_tool(ctx).call(arguments)
    assert envelope["ok"] is True
    assert _triples(envelope) == expected


@pytest.mark.parametrize(
    "arguments",
    [
        {"to": "moni"},
        {"from": ""},
        {"from": "user", "max_hops": 0},
        {"from": "user", "max_hops": 7},
        {"from": "user", "user_id": "u-2"},
        {"from": "user", "namespace": "other"},
        {"from": "<script>"},
        "not json",
        '["user"]',
        None,
    ],
    ids=["from-missing", "from-empty", "max-hops-0", "max-hops-7", "extra-user-id", "extra-namespace",
         "invalid-entity", "not-json", "json-list", "none"],
)  # fmt: skip
async def test_connect_tool_invalid_arguments_give_error_envelope(
    fam: MemorySystem, ctx: MemoryContext, arguments: Any
) -> None:
    envelope = await fam.relations.connect_tool(ctx).call(arguments)
    assert envelope["ok"] is False
    assert envelope["results"] == []
    assert isinstance(envelope["error"], str) and envelope["error"]


@pytest.mark.parametrize(
    ("preset", "names"),
    [
        ("default", ["memory_recall", "memory_connect"]),
        ("connect", ["memory_recall", "memory_connect"]),
        ("tools", ["memory_recall", "memory_connect"]),
        ("recall", ["memory_recall"]),
        ("context", []),
    ],
    ids=["default", "connect", "tools", "recall", "context"],
)
async def test_connect_tool_installed_by_preset(
    make: MakeSystem, ctx: MemoryContext, preset: str, names: list[str]
) -> None:
    mem, _ = make(True, preset=preset)
    assert [t.name for t in mem.tools(ctx)] == names


async def test_connect_tool_schema(make: MakeSystem, ctx: MemoryContext) -> None:
    mem, _ = make(True)
    schema = mem.relations.connect_tool(ctx).schema()
    params = schema["function"]["parameters"]
    assert schema["function"]["name"] == "memory_connect"
    assert set(params["properties"]) == {"from", "to", "max_hops", "as_of", "include_history"}
    assert params["required"] == ["from"]
    assert params["additionalProperties"] is False


async def test_connect_tool_is_bound_to_its_context(fam: MemorySystem, ctx: MemoryContext) -> None:
    other = MemoryContext(user_id="u-2", session_id="s-2")
    mine = await fam.relations.connect_tool(ctx).call({"from": "user"})
    theirs = await fam.relations.connect_tool(other).call({"from": "user"})
    assert _triples(mine) == [MARRIED]
    assert theirs == {"ok": True, "results": [], "error": None}


# -- the janitor ------------------------------------------------------------------------------------


async def test_remove_dangling_edges(fam: MemorySystem, ctx: MemoryContext) -> None:
    (tom,) = await fam.facts(ctx, subject="tom")
    fam.tiers.put_facts([tom.model_copy(update={"status": "archived"})])
    assert fam.relations.remove_dangling_edges(ctx) == 1
    assert triples(fam.relations.edges(ctx)) == {MARRIED, ("ann", "friend of", "bea")}  # "user" has no fact, stands
    assert triples(await fam.connections(ctx, "moni")) == {MARRIED}
    assert fam.relations.remove_dangling_edges(ctx) == 0


async def test_janitor_run_removes_dangling_edges(fam: MemorySystem, ctx: MemoryContext) -> None:
    (ann,) = await fam.facts(ctx, subject="ann")
    fam.tiers.put_facts([ann.model_copy(update={"status": "superseded"})])
    report = await run_janitor(fam)
    assert report.edges_removed == 1
    assert triples(fam.relations.edges(ctx)) == {MARRIED, BROTHER}


async def test_janitor_keeps_edges_to_implicit_entities(make: MakeSystem, ctx: MemoryContext) -> None:
    mem, fake = make({"create_implicit_entities": True})
    await session(mem, fake, ctx, edges=[link("user", "works at", "globex")], subjects=["user"])
    assert triples(mem.relations.edges(ctx)) == {("user", "works at", "globex")}
    assert mem.relations.remove_dangling_edges(ctx) == 0


# -- the graph cache --------------------------------------------------------------------------------


async def test_cache_invalidated_on_write(fam: MemorySystem, ctx: MemoryContext, make: MakeSystem) -> None:
    assert triples(await fam.connections(ctx, "user")) == {MARRIED}  # warm
    writer, fake = make(True)
    await session(writer, fake, ctx, edges=[link("ann", "friend of", "user")], subjects=["user", "ann"])
    assert triples(await fam.connections(ctx, "user")) == {MARRIED, ("ann", "friend of", "user")}
    assert len(await fam.relate(ctx, "tom", "bea") or []) == 4


async def test_cache_sees_own_writes_immediately(make: MakeSystem, ctx: MemoryContext) -> None:
    mem, fake = make(True)
    await family(mem, fake, ctx)
    assert triples(await mem.connections(ctx, "tom")) == {BROTHER}
    await session(mem, fake, ctx, edges=[link("tom", "friend of", "user")], subjects=sorted(FAMILY))
    assert triples(await mem.connections(ctx, "tom")) == {BROTHER, ("tom", "friend of", "user")}


async def test_second_capability_sees_new_and_removed_edges(
    make: MakeSystem, ctx: MemoryContext, store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    writer, fake = make(True)
    await family(writer, fake, ctx)
    other = reader(store_path, embedder, clock, True)
    assert triples(await other.connections(ctx, "tom")) == {BROTHER}  # other's cache is warm now
    await session(writer, fake, ctx, edges=[link("tom", "friend of", "user")], subjects=sorted(FAMILY))
    assert triples(await other.connections(ctx, "tom")) == {BROTHER, ("tom", "friend of", "user")}
    (moni,) = await writer.facts(ctx, subject="moni")
    writer.tiers.put_facts([moni.model_copy(update={"status": "archived"})])
    assert writer.relations.remove_dangling_edges(ctx) == 2
    assert triples(await other.connections(ctx, "tom")) == {("tom", "friend of", "user")}
    assert await other.relate(ctx, "user", "moni") is None
