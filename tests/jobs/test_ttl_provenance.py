"""The episodic TTL keeps provenance sound (issue 12): no fact or edge is left citing a deleted turn.

The offline rules model, relations on, a real LanceDB store and a FrozenClock: "I work at Acme Corp",
"My wife Moni loves jazz" and small talk in one session; "I work at Globex now" forty days later.
With a 30-day TTL the first session expires: the turn the live Moni fact cites stays (compacted),
the others go, and every citation left resolves to a stored record.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tiermem import Edge, MemoryContext, MemorySystem, Turn, system
from tiermem.jobs import close_idle_sessions, run_janitor
from tiermem.memory._identity import edge_id
from tiermem.memory.testing import FrozenClock, HashingEmbedder, TableName, Where

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")
BASE = MemoryContext(user_id="sam")
FIRST = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
TTL = timedelta(days=30)
TABLES: tuple[TableName, ...] = ("working", "episodes", "facts", "digests", "edges", "turns", "aliases")


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(FIRST)


async def _session(mem: MemorySystem, clock: FrozenClock, sid: str, *texts: str) -> list[Turn]:
    ctx = BASE.model_copy(update={"session_id": sid})
    turns = []
    for text in texts:
        result = await mem.capture(ctx, [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
        turns.append(result.turn)
        clock.advance(minutes=2)
    await mem.end_session(ctx)
    await mem.consolidate(BASE)
    return turns


@pytest.fixture
async def mem(tmp_path: Path, clock: FrozenClock) -> MemorySystem:
    mem = system(
        model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(64), clock=clock,
        semantic={"relations": {"create_implicit_entities": True}}, episodic={"ttl": TTL},
        hygiene={"optimize": False},  # table versions then move only with what the janitor writes
    )  # fmt: skip
    await _session(mem, clock, "s-1", "I work at Acme Corp as a data engineer.", "My wife Moni loves jazz.", "Hi!")
    clock.advance(days=40)
    await _session(mem, clock, "s-2", "I work at Globex now.")
    clock.advance(days=5)  # s-1 ended 45 days ago: past the TTL; s-2 5 days ago
    return mem


def _rows(mem: MemorySystem, table: TableName) -> list[Any]:
    return mem.store.query(table, Where(eq=mem.tiers.scope(BASE)))


def assert_nothing_dangles(mem: MemorySystem) -> None:
    """Every provenance id of every fact and edge (any status) names a stored turn, fact or episode,
    and every support id a stored fact."""
    stored = {r.id for table in ("turns", "facts", "episodes") for r in _rows(mem, table)}
    facts = {f.id for f in _rows(mem, "facts")}
    dangling = [
        (record.id, cited)
        for record in [*_rows(mem, "facts"), *_rows(mem, "edges")]
        for cited in record.provenance
        if cited not in stored
    ]
    dangling += [(e.id, s) for e in _rows(mem, "edges") for s in e.support if s not in facts]
    assert dangling == []


def _fact(mem: MemorySystem, word: str) -> Any:
    (fact,) = [f for f in _rows(mem, "facts") if word in f.text]
    return fact


def dump(mem: MemorySystem) -> dict[str, Any]:
    rows = {t: sorted(r.model_dump_json() for r in mem.store.query(t, Where(eq={}))) for t in TABLES}
    return {"rows": rows, "versions": {t: mem.store.version(t) for t in TABLES}}


async def test_expiry_keeps_only_the_turns_live_facts_cite(mem: MemorySystem) -> None:
    moni, acme = _fact(mem, "jazz"), _fact(mem, "Acme")
    turns_before = {t.id: t for t in _rows(mem, "turns")}
    (jazz_turn,) = moni.provenance
    assert (moni.status, acme.status) == ("active", "superseded")

    report = await run_janitor(mem)

    assert (report.episodes_expired, report.turns_kept, report.turns_removed) == (1, 1, 2)
    assert_nothing_dangles(mem)
    turns = {t.id: t for t in _rows(mem, "turns")}
    s1 = {t for t, turn in turns_before.items() if turn.session_id == "s-1"}
    assert s1 & set(turns) == {jazz_turn}  # Acme's (superseded) and the small talk went
    kept = turns[jazz_turn]
    assert kept.messages == turns_before[jazz_turn].messages  # compacted to its messages
    assert (kept.context, kept.metadata) == ("", {})
    assert _fact(mem, "jazz").provenance == (jazz_turn,)  # a live fact keeps citing its evidence
    assert _fact(mem, "Acme").provenance == ()  # history keeps its text; the TTL took the conversation
    (tombstone,) = [e for e in _rows(mem, "episodes") if e.session_id == "s-1"]
    assert (tombstone.status, tombstone.summary, tombstone.provenance) == ("expired", "", (jazz_turn,))


async def test_edges_cite_their_supporting_facts_once_their_turns_expire(mem: MemorySystem) -> None:
    await run_janitor(mem)

    edges = {(e.relation, e.target): e for e in _rows(mem, "edges")}
    for key in [("married to", "moni"), ("works at", "acme-corp")]:
        assert edges[key].provenance == edges[key].support, key  # s-1's turns no longer cited
    globex = edges[("works at", "globex")]
    assert globex.provenance and all(p.startswith("turn_") for p in globex.provenance)  # s-2 is young
    assert_nothing_dangles(mem)


async def test_a_second_run_changes_nothing_and_the_session_is_not_encoded_again(
    mem: MemorySystem, clock: FrozenClock
) -> None:
    await run_janitor(mem)
    before = dump(mem)

    again = await run_janitor(mem)
    idle = await close_idle_sessions(mem)

    assert (again.episodes_expired, again.turns_removed, again.citations_rewritten) == (0, 0, 0)
    assert idle["closed"] == 0
    assert dump(mem) == before  # rows and table versions: nothing rewritten


async def test_kept_turns_go_when_no_live_fact_cites_them(mem: MemorySystem, clock: FrozenClock) -> None:
    await run_janitor(mem)
    clock.advance(days=3650)  # every fact decays under the floor and every episode is past the TTL

    report = await run_janitor(mem)

    assert report.facts_archived == 2 and report.episodes_expired == 1
    assert _rows(mem, "turns") == [] and _rows(mem, "episodes") == []
    assert_nothing_dangles(mem)


async def test_dry_run_counts_what_the_run_does(mem: MemorySystem) -> None:
    before = dump(mem)

    dry = await run_janitor(mem, dry_run=True)

    assert dump(mem) == before
    real = await run_janitor(mem)
    fields = ("episodes_expired", "turns_kept", "turns_removed", "citations_rewritten")
    assert [getattr(dry, f) for f in fields] == [getattr(real, f) for f in fields]


async def test_a_current_edge_without_support_keeps_the_turns_it_cites(mem: MemorySystem) -> None:
    (small_talk,) = [t for t in _rows(mem, "turns") if "Hi!" in t.text]
    legacy = Edge(
        id=edge_id(BASE, source="user", relation="knows", target="moni"), namespace=BASE.namespace,
        user_id=BASE.user_id, source="user", relation="knows", target="moni", created_at=FIRST, updated_at=FIRST,
        provenance=(small_talk.id,),
    )  # fmt: skip  # stored before support sets: its turns are its only evidence
    mem.relations.put_edges(BASE, [legacy])

    report = await run_janitor(mem)

    assert report.turns_kept == 2
    assert small_talk.id in {t.id for t in _rows(mem, "turns")}
    assert [e.provenance for e in _rows(mem, "edges") if e.id == legacy.id] == [(small_talk.id,)]
    assert_nothing_dangles(mem)
