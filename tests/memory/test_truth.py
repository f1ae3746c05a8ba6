"""Knowledge that stays true (issue 12): supersession reaches the edges and the digest.

The demo's employer change with the offline rules model, a real LanceDB in a temporary folder and a
frozen clock: "I work at Acme Corp" in one session, "I work at Globex now" a fortnight later.
Edges are bi-temporal: current by default, history with ``include_history=True`` or ``as_of=``.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.prebuilt import prebuilt
from tiermem import Edge, MemoryContext, MemorySystem, system
from tiermem.jobs import run_digests, run_janitor
from tiermem.memory.testing import FrozenClock, HashingEmbedder

BASE = MemoryContext(namespace="truth", user_id="sam")
FIRST = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
SECOND = datetime(2026, 3, 16, 18, 0, tzinfo=UTC)
BETWEEN = datetime(2026, 3, 9, 12, 0, tzinfo=UTC)
BEFORE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _system(tmp_path: Path, clock: FrozenClock) -> MemorySystem:
    return _open(tmp_path / "store", clock)


def _open(store: Path, clock: FrozenClock) -> MemorySystem:
    return system(
        model="rules",
        store=str(store),
        embedder=HashingEmbedder(256),
        clock=clock,
        semantic={"relations": {"create_implicit_entities": True}},
    )


async def _session(mem: MemorySystem, clock: FrozenClock, sid: str, when: datetime, *texts: str) -> None:
    clock.set(when)
    ctx = BASE.model_copy(update={"session_id": sid})
    for text in texts:
        await mem.capture(ctx, [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
        clock.advance(timedelta(minutes=2))
    await mem.end_session(ctx)
    await mem.consolidate(BASE)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(FIRST)


ACME_THEN_GLOBEX = SECOND + timedelta(minutes=2)  # the clock after the second session's one turn


def _write_acme_then_globex(folder: Path) -> None:
    async def write() -> None:
        clock = FrozenClock(FIRST)
        mem = _open(folder, clock)
        await mem.add_alias(BASE, "Sam")
        await _session(mem, clock, "s-1", FIRST, "Hi, I'm Sam. I work at Acme Corp as a data engineer.")
        await _session(mem, clock, "s-2", SECOND, "I work at Globex now.")
        assert clock.now() == ACME_THEN_GLOBEX

    asyncio.run(write())


@pytest.fixture
def mem(tmp_path_factory: pytest.TempPathFactory, clock: FrozenClock) -> MemorySystem:
    """Acme in the first session, then Globex; consolidated after each.

    Written once per test session (tests/prebuilt.py); each test opens its own copy, with the clock
    where the writing left it."""
    clock.set(ACME_THEN_GLOBEX)
    return _open(prebuilt(tmp_path_factory, "truth-acme-then-globex", _write_acme_then_globex), clock)


def _employers(edges: list[Edge]) -> set[str]:
    return {e.target for e in edges if e.source == "user" and e.relation == "works at"}


VIEWS: list[Any] = [
    pytest.param({}, {"globex"}, id="current"),
    pytest.param({"include_history": True}, {"acme-corp", "globex"}, id="history"),
    pytest.param({"as_of": BETWEEN}, {"acme-corp"}, id="as-of-between-sessions"),
    pytest.param({"as_of": SECOND + timedelta(days=1)}, {"globex"}, id="as-of-after"),
    pytest.param({"as_of": BEFORE}, set(), id="as-of-before-anything"),
]


@pytest.mark.parametrize(("view", "expected"), VIEWS)
async def test_connections_see_current_edges_unless_history_is_asked(
    mem: MemorySystem, view: dict[str, Any], expected: set[str]
) -> None:
    assert _employers(await mem.connections(BASE, "user", **view)) == expected
    assert _employers(await mem.connections(BASE, "Sam", **view)) == expected


async def test_superseded_fact_closes_its_edge_as_history(mem: MemorySystem) -> None:
    edges = {e.target: e for e in await mem.connections(BASE, "user", include_history=True)}
    acme, globex = edges["acme-corp"], edges["globex"]
    old = next(f for f in await mem.facts(BASE, include_inactive=True) if "Acme" in f.text)
    assert old.status == "superseded" and old.valid_to is not None
    assert acme.support == (old.id,)
    assert acme.valid_to == old.valid_to  # closed when its only fact was superseded
    assert acme.valid_from is not None and acme.valid_from < acme.valid_to
    assert not acme.current and not acme.valid_at(SECOND + timedelta(hours=1)) and acme.valid_at(BETWEEN)
    assert globex.current and globex.support and globex.valid_from == acme.valid_to


@pytest.mark.parametrize(
    ("target", "view", "found"),
    [
        pytest.param("Globex", {}, True, id="globex-current"),
        pytest.param("Acme Corp", {}, False, id="acme-hidden-by-default"),
        pytest.param("Acme Corp", {"include_history": True}, True, id="acme-with-history"),
        pytest.param("Acme Corp", {"as_of": BETWEEN}, True, id="acme-as-of-between"),
        pytest.param("Globex", {"as_of": BETWEEN}, False, id="globex-not-yet"),
    ],
)
async def test_relate_and_ego_graph_follow_the_same_view(
    mem: MemorySystem, target: str, view: dict[str, Any], found: bool
) -> None:
    slug = "globex" if target == "Globex" else "acme-corp"
    path = await mem.relate(BASE, "Sam", slug, **view)
    assert (path is not None) is found
    if path is not None:
        assert [e.target for e in path] == [slug]
    ego = await mem.ego_graph(BASE, "user", **view)
    assert (slug in ego["nodes"]) is found
    assert (slug in {e.target for e in ego["edges"]}) is found


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param({"from": "Sam"}, {"globex"}, id="current"),
        pytest.param({"from": "Sam", "include_history": True}, {"acme-corp", "globex"}, id="history"),
        pytest.param({"from": "Sam", "as_of": BETWEEN.isoformat()}, {"acme-corp"}, id="as-of"),
        pytest.param({"from": "Sam", "to": "acme-corp"}, set(), id="path-to-the-past"),
        pytest.param({"from": "Sam", "to": "acme-corp", "include_history": True}, {"acme-corp"}, id="path-history"),
    ],
)
async def test_connect_tool_shows_the_past_only_when_asked(
    mem: MemorySystem, args: dict[str, Any], expected: set[str]
) -> None:
    envelope = await mem.relations.connect_tool(BASE).call(args)
    assert envelope["ok"] is True, envelope
    texts = [item.text if hasattr(item, "text") else item["text"] for item in envelope["results"]]
    assert {t.split("--> ")[1] for t in texts if "--works at-->" in t} == expected


async def test_connect_tool_marks_history_as_past(mem: MemorySystem) -> None:
    envelope = await mem.relations.connect_tool(BASE).call({"from": "Sam", "include_history": True})
    items = [item if isinstance(item, dict) else item.model_dump(mode="json") for item in envelope["results"]]
    state = {i["metadata"]["target"]: (i["metadata"]["current"], i["metadata"]["valid_to"]) for i in items}
    assert state["globex"] == (True, None)
    assert state["acme-corp"][0] is False and state["acme-corp"][1] is not None


async def test_graph_expanded_recall_sees_current_edges(mem: MemorySystem) -> None:
    items = await mem.recall(BASE, "Where does Sam work?", limit=10)
    relations = [i.text for i in items if i.tier == "relation"]
    assert not any("acme" in t for t in relations), relations


def _states_acme_as_current(text: str) -> bool:
    """Acme appears only after "previously" (or not at all) in a digest that states the present."""
    return any("previously" not in s.lower() for s in re.split(r"(?<=[.!?])\s+", text) if "acme" in s.lower())


async def test_digest_states_only_what_is_current(mem: MemorySystem) -> None:
    written = (await mem.digest(BASE)).digest
    assert written is not None
    assert "Globex" in written.text
    assert not _states_acme_as_current(written.text), written.text
    active = {f.id for f in await mem.facts(BASE)}
    assert set(written.provenance) <= active


async def test_digest_is_rewritten_when_a_fact_it_used_is_superseded(tmp_path: Path, clock: FrozenClock) -> None:
    mem = _system(tmp_path, clock)
    await mem.add_alias(BASE, "Sam")
    await _session(mem, clock, "s-1", FIRST, "Hi, I'm Sam. I work at Acme Corp as a data engineer.")
    assert (await run_digests(mem))["written"] == 1
    before = await mem.latest_digest(BASE)
    assert before is not None and "Acme" in before.text
    assert (await run_digests(mem))["unchanged"] == 1  # nothing moved: no rewrite
    await _session(mem, clock, "s-2", SECOND, "I work at Globex now.")
    assert (await run_digests(mem))["written"] == 1
    after = await mem.latest_digest(BASE)
    assert after is not None and "Globex" in after.text
    assert not _states_acme_as_current(after.text), after.text


async def test_rules_digest_narrates_only_active_facts_and_current_edges(mem: MemorySystem) -> None:
    from tiermem.pipelines._rules import digest as rules_digest
    from tiermem.prompts import digest as digest_prompt

    facts = await mem.facts(BASE, include_inactive=True)
    edges = await mem.connections(BASE, "user", include_history=True)
    inputs = digest_prompt.Input(facts=facts, edges=edges, user_names=["Sam"], previous="Sam works at Acme Corp.")
    text = rules_digest(inputs).text
    assert "Globex" in text and "Acme" not in text, text


# -- an edge supported by two facts ----------------------------------------------------------------


TWO_FACT_EDGE = FIRST + timedelta(minutes=4)  # the clock after the session's two turns


def _write_two_fact_edge(folder: Path) -> None:
    async def write() -> None:
        clock = FrozenClock(FIRST)
        mem = _open(folder, clock)
        await _session(mem, clock, "s-1", FIRST, "My wife Moni is allergic to shellfish.", "My wife Moni loves jazz.")
        assert clock.now() == TWO_FACT_EDGE

    asyncio.run(write())


@pytest.fixture
def two_fact_edge_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One session whose two facts both support the user's edge to Moni: a copy of the store written once."""
    return prebuilt(tmp_path_factory, "truth-two-fact-edge", _write_two_fact_edge)


async def _two_fact_edge(store: Path, clock: FrozenClock) -> tuple[MemorySystem, Edge]:
    clock.set(TWO_FACT_EDGE)
    mem = _open(store, clock)
    (edge,) = await mem.connections(BASE, "moni")
    assert (edge.source, edge.relation, edge.target) == ("user", "married to", "moni")
    assert len(edge.support) == 2
    return mem, edge


@pytest.mark.parametrize("first", [0, 1], ids=["allergy-first", "jazz-first"])
async def test_edge_closes_when_its_last_supporting_fact_does(
    two_fact_edge_store: Path, clock: FrozenClock, first: int
) -> None:
    mem, edge = await _two_fact_edge(two_fact_edge_store, clock)
    facts = await mem.facts(BASE)
    by_word = [next(f.id for f in facts if word in f.text) for word in ("allergic", "jazz")]
    order = [by_word[first], by_word[1 - first]]
    clock.set(SECOND)
    await mem.update(BASE, order[0], text="Moni loves the blues.")  # no longer names the user
    (still,) = await mem.connections(BASE, "moni")
    assert still.id == edge.id and still.current
    clock.set(SECOND + timedelta(days=1))
    await mem.update(BASE, order[1], text="Moni loves opera.")
    assert await mem.connections(BASE, "moni") == []
    (closed,) = await mem.connections(BASE, "moni", include_history=True)
    assert closed.id == edge.id and closed.valid_to == SECOND + timedelta(days=1)
    assert [e.id for e in await mem.connections(BASE, "moni", as_of=SECOND)] == [edge.id]


async def test_a_correction_that_still_names_both_ends_keeps_the_edge(
    two_fact_edge_store: Path, clock: FrozenClock
) -> None:
    mem, edge = await _two_fact_edge(two_fact_edge_store, clock)
    for fact_id in edge.support:
        await mem.update(BASE, fact_id, text="Moni, the user's wife, loves the blues.")
    (still,) = await mem.connections(BASE, "moni")
    assert still.id == edge.id and still.current


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
async def test_janitor_closes_edges_by_the_same_support_set(
    two_fact_edge_store: Path, clock: FrozenClock, dry_run: bool
) -> None:
    mem, edge = await _two_fact_edge(two_fact_edge_store, clock)
    later = FIRST + timedelta(days=3650)
    clock.set(later)
    report = await run_janitor(mem, later, dry_run=dry_run)
    assert report.facts_archived == 2 and report.edges_removed == 1
    kept = await mem.connections(BASE, "moni", include_history=True)
    assert [e.id for e in kept] == [edge.id]  # closed as history, never deleted
    assert kept[0].current is dry_run
    if not dry_run:
        assert kept[0].valid_to == later


# -- options mean what they say: no semantic tier, no facts (issue 12, item 6) -----------------------------

SEMANTIC_WRITES: list[Any] = [
    pytest.param(lambda m: m.remember(BASE, "I am allergic to peanuts."), id="remember"),
    pytest.param(lambda m: m.add_semantic_fact(BASE, "I am allergic to peanuts."), id="add_semantic_fact"),
    pytest.param(lambda m: m.capability.remember(BASE, "I am allergic to peanuts."), id="capability-remember"),
]


@pytest.mark.parametrize("write", SEMANTIC_WRITES)
async def test_a_fact_written_with_the_semantic_tier_off_is_refused(
    tmp_path: Path, clock: FrozenClock, write: Any
) -> None:
    from tiermem import ConfigurationError

    store = str(tmp_path / "store")
    mem = system(model="rules", store=store, embedder=HashingEmbedder(256), clock=clock, semantic=False)
    with pytest.raises(ConfigurationError, match="semantic tier is off"):
        await write(mem)
    assert mem.store.count("facts") == 0
