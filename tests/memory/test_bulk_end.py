"""Ending sessions by groups (``end_sessions``, what an import does) leaves what ``end_session`` per session
leaves; the vector memo of the tiers never serves a vector of another text or another embedder."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from tests.fakes import AnyCall, Switch, default_reply, messages_of
from tiermem import MemoryContext, MemorySystem, SessionResult, WorkingEntry, system
from tiermem.memory._identity import lease_key, working_entry_id
from tiermem.memory._tiers._tiers import _CACHE_SIZE
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, Where
from tiermem.prompts import observe

pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

START = datetime(2024, 5, 6, 9, 0, tzinfo=UTC)
CTX = MemoryContext(user_id="u-bulk-end")
SESSIONS = {
    "s-fresh": ["I live in Porto.", "I work at Acme Corp as a nurse."],
    "s-ended": ["My sister Ana plays the cello."],  # ended before: encoded, nothing new
    "s-extended": ["I adopted a cat named Miso.", "I started learning Japanese."],  # ended, then a turn more
    "s-pending": ["I run every morning before work."],  # its only turn's observation failed
}


class _Crash(Exception):
    """Stands in for the process dying between two writes."""


def _model(switch: Switch) -> Any:
    """The default replies, except the observer while ``switch.broken`` (one per test: its name is in the
    records it writes, so the stores compared share it)."""

    def answer(messages: list[dict[str, Any]], call: AnyCall) -> Any:
        if switch.broken and call.stage is observe.STAGE:
            raise ConnectionError("provider down: 503 Service Unavailable")
        return default_reply(call)

    return FunctionModel(function=answer).model


async def _prepared(
    path: str, model: Any, switch: Switch, embedder: HashingEmbedder, clock: FrozenClock, encode: str
) -> MemorySystem:
    """The same sessions in every store: fresh, ended, ended and extended since, pending only."""
    mem = system(model=model, store=path, embedder=embedder, clock=clock, episodic={"encode": encode})
    at = START
    for sid, lines in SESSIONS.items():
        switch.broken = sid == "s-pending"
        for line in lines[:1] if sid == "s-extended" else lines:
            at += timedelta(minutes=1)
            await mem.capture(CTX.model_copy(update={"session_id": sid}), messages_of(line), at=at)
    switch.broken = False
    await mem.end_session(CTX, "s-ended")
    await mem.end_session(CTX, "s-extended")
    await mem.consolidate(CTX)
    at += timedelta(minutes=1)
    await mem.capture(
        CTX.model_copy(update={"session_id": "s-extended"}), messages_of(SESSIONS["s-extended"][1]), at=at
    )
    switch.broken = True  # the pending turn's one more chance at the end fails too: the session is deferred
    return mem


def _state(mem: MemorySystem) -> dict[str, Any]:
    """Everything the ends write, field by field (vectors aside: they follow the texts)."""
    where = Where(eq={"namespace": CTX.namespace, "user_id": CTX.user_id})
    out: dict[str, Any] = {}
    for table in ("turns", "working", "episodes"):
        rows = mem.store.query(table, where)  # type: ignore[arg-type]
        out[table] = sorted(r.model_dump_json(exclude={"error"}) for r in rows)
    return out


def _results(results: Sequence[SessionResult]) -> list[tuple[Any, ...]]:
    return [(r.episode and r.episode.model_dump_json(), r.busy, r.deferred, r.error) for r in results]


@pytest.mark.parametrize("encode", ["session", "consolidation"], ids=["encode-at-end", "encode-at-consolidation"])
async def test_ending_sessions_together_leaves_what_ending_them_one_by_one_leaves(
    tmp_path: Any, embedder: HashingEmbedder, clock: FrozenClock, encode: str
) -> None:
    sids = [*SESSIONS, "s-unknown"]
    switch = Switch()
    model = _model(switch)
    one_by_one = await _prepared(str(tmp_path / "one"), model, switch, embedder, clock, encode)
    together = await _prepared(str(tmp_path / "together"), model, switch, embedder, clock, encode)
    assert _state(one_by_one) == _state(together)

    singly = [await one_by_one.end_session(CTX, sid) for sid in sids]
    grouped = await together.end_sessions(CTX, sids)

    assert _results(grouped) == _results(singly)
    assert _state(together) == _state(one_by_one)
    # Not vacuous: the group covered a new episode, an extension, a deferral, a no-op and an unknown session.
    assert [r.episode is not None for r in grouped] == [True, True, True, False, False]
    assert [r.deferred for r in grouped] == [False, False, False, True, False]
    working = together.store.query("working", Where(eq={"user_id": CTX.user_id}))
    assert working and {e.status for e in working} == {"closed"}


async def test_a_session_another_holder_is_ending_is_busy_and_the_others_end(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    switch = Switch()
    mem = await _prepared(store_path, _model(switch), switch, embedder, clock, "consolidation")
    held = mem.leases.acquire(lease_key("session", CTX, session_id="s-fresh"), holder="other", ttl=timedelta(minutes=5))
    assert held is not None

    results = await mem.end_sessions(CTX, ["s-fresh", "s-extended"])

    assert [(r.busy, r.episode is not None) for r in results] == [(True, False), (False, True)]
    entries = mem.store.query("working", Where(eq={"user_id": CTX.user_id}))
    assert {e.session_id for e in entries if e.status != "closed"} == {"s-fresh"}


async def test_a_crash_between_the_episodes_and_the_closes_is_finished_by_ending_again(
    tmp_path: Any, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    sids = [sid for sid in SESSIONS if sid != "s-pending"]  # its retries would count the rerun's attempt too
    switch = Switch()
    model = _model(switch)
    clean = await _prepared(str(tmp_path / "clean"), model, switch, embedder, clock, "session")
    await clean.end_sessions(CTX, sids)
    crashed = await _prepared(str(tmp_path / "crashed"), model, switch, embedder, clock, "session")

    def dies(entries: Any) -> None:
        raise _Crash("the process died before closing the entries")

    crashed.tiers.put_working = dies  # type: ignore[method-assign]
    with pytest.raises(_Crash):
        await crashed.end_sessions(CTX, sids)
    assert any(e.status != "closed" for e in crashed.store.query("working", Where(eq={"user_id": CTX.user_id})))
    restarted = system(model=model, store=str(tmp_path / "crashed"), embedder=embedder, clock=clock)

    await restarted.end_sessions(CTX, sids)

    assert _state(restarted) == _state(clean)


# -- working entries of several sessions in one write ---------------------------------------------


def _entries(clock: FrozenClock, sid: str, saliences: Sequence[float], start: int) -> list[WorkingEntry]:
    now = clock.now()
    return [
        WorkingEntry(
            id=working_entry_id(CTX, session_id=sid, subject="user", text=f"{sid} note {start + i}"),
            namespace=CTX.namespace,
            user_id=CTX.user_id,
            session_id=sid,
            subject="user",
            text=f"{sid} note {start + i}",
            salience=salience,
            seq=start + i,
            created_at=now,
            updated_at=now,
        )
        for i, salience in enumerate(saliences)
    ]


async def test_entries_of_several_sessions_written_at_once_are_ranked_each_in_its_session(
    tmp_path: Any, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    apart, together = (
        system(model="rules", store=str(tmp_path / name), embedder=embedder, clock=clock, working={"capacity": 2})
        for name in ("apart", "together")
    )
    earlier = {sid: _entries(clock, sid, [0.9, 0.2], 0) for sid in ("s-a", "s-b")}
    later = {"s-a": _entries(clock, "s-a", [0.5, 0.95], 2), "s-b": _entries(clock, "s-b", [0.1], 2)}
    for mem in (apart, together):
        for entries in earlier.values():
            mem.tiers.add_working_entries(CTX, entries)

    for entries in later.values():
        apart.tiers.add_working_entries(CTX, entries)
    together.tiers.add_working_entries(CTX, [*later["s-a"], *later["s-b"]])

    def rows(mem: MemorySystem) -> list[tuple[str, str, str]]:
        found = mem.store.query("working", Where(eq={"user_id": CTX.user_id}))
        return sorted((e.session_id, e.text, e.status) for e in found)

    assert rows(together) == rows(apart)
    assert [r for r in rows(together) if r[2] == "active"] == [  # each session keeps its own two
        ("s-a", "s-a note 0", "active"), ("s-a", "s-a note 3", "active"),
        ("s-b", "s-b note 0", "active"), ("s-b", "s-b note 1", "active"),
    ]  # fmt: skip


# -- the vector memo ----------------------------------------------------------------------------


class _Counting:
    """A hashing embedder that records the texts it is asked for (``salt`` makes another embedder's vectors)."""

    def __init__(self, id: str = "counting", salt: str = "") -> None:
        self._id, self._salt, self._inner = id, salt, HashingEmbedder(64)
        self.seen: list[str] = []

    @property
    def id(self) -> str:
        return self._id

    @property
    def dimensions(self) -> int:
        return 64

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen += texts
        return self._inner.embed([f"{self._salt}{t}" for t in texts])


def _tiers(path: str, embedder: _Counting, clock: FrozenClock) -> Any:
    return system(model="rules", store=path, embedder=embedder, clock=clock).tiers


async def test_the_memo_gives_each_text_its_own_vector_and_embeds_it_once(store_path: str, clock: FrozenClock) -> None:
    embedder = _Counting()
    tiers = _tiers(store_path, embedder, clock)
    texts = ["I live in Porto.", "i live in porto.", "I live in  Porto.", "I live in Porto."]

    first = tiers.embed(texts)
    again = tiers.embed(texts[::-1])

    own = HashingEmbedder(64).embed(texts)
    assert np.array_equal(first, own) and np.array_equal(again, own[::-1])
    assert embedder.seen == texts[:3]  # the exact text is the key: case and spacing count, a repeat does not


async def test_the_memo_never_serves_another_embedders_vector(store_path: str, clock: FrozenClock) -> None:
    tiers = _tiers(store_path, _Counting(), clock)
    before = tiers.embed(["I live in Porto."])
    other = _Counting(id="other", salt="x ")
    tiers.embedder = other

    after = tiers.embed(["I live in Porto."])

    assert other.seen == ["I live in Porto."]
    assert np.array_equal(after, HashingEmbedder(64).embed(["x I live in Porto."]))
    assert not np.array_equal(after, before)


async def test_the_memo_is_bounded(store_path: str, clock: FrozenClock) -> None:
    embedder = _Counting()
    tiers = _tiers(store_path, embedder, clock)
    texts = [f"note number {i}" for i in range(_CACHE_SIZE + 10)]

    tiers.embed(texts)
    tiers.embed(texts[-5:])  # still remembered
    tiers.embed(texts[:1])  # the oldest, forgotten: embedded again

    assert len(tiers._vectors) == _CACHE_SIZE
    assert len(embedder.seen) == len(texts) + 1


# -- leases of a group ------------------------------------------------------------------------------


async def test_leases_of_a_group_are_taken_together_but_one_held_elsewhere_stays_busy(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    leases = system(model="rules", store=store_path, embedder=embedder, clock=clock).leases
    ttl = timedelta(minutes=5)
    theirs = leases.acquire("k-2", holder="other", ttl=ttl)
    assert theirs is not None

    won = leases.acquire_many(["k-1", "k-2", "k-3"], holder="me", ttl=ttl)

    assert sorted(won) == ["k-1", "k-3"]
    assert leases.acquire("k-1", holder="third", ttl=ttl) is None  # held by the group now
    leases.release_many(list(won.values()))
    held = {k: leases.holder(k) for k in ("k-1", "k-2", "k-3")}
    assert {k: lease.holder if lease else None for k, lease in held.items()} == {
        "k-1": None,
        "k-2": "other",
        "k-3": None,
    }
