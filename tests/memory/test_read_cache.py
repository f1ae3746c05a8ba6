"""Small reads held in process (``Store.query(..., cached=True)``): always what the engine would return.

A real LanceDB in a temporary folder. Held results follow this process's writes (rows join and
leave the filters they pass), and anything else that commits (another store handle, another
process, a delete, a compaction) makes the next read go to the engine again.
"""

from __future__ import annotations

import random
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.subprocesses import run_python
from tiermem import Message, Store, Turn
from tiermem.memory._index import _read_cache
from tiermem.memory._index._read_cache import ReadCache
from tiermem.memory.testing import Where

DIMS = 8
NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _turn(n: int, *, session: str = "s-1", user: str = "u-1", status: str = "pending") -> Turn:
    return Turn(
        id=f"turn-{user}-{session}-{n}",
        namespace="default",
        user_id=user,
        session_id=session,
        seq=n,
        messages=(Message(role="user", content=f"message number {n}"),),
        created_at=NOW + timedelta(minutes=n),
        status=status,  # type: ignore[arg-type]
    )


def _vectors(n: int) -> np.ndarray:
    return np.ones((n, DIMS), dtype=np.float32)


def _store(folder: Path, **options: Any) -> Store:
    return Store(str(folder), embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS, **options)


def _session(session: str = "s-1", user: str = "u-1", statuses: list[str] | None = None) -> Where:
    return Where(
        eq={"namespace": "default", "user_id": user, "session_id": session},
        isin={"status": statuses} if statuses else None,
    )


def _ids(records: list[Any]) -> list[str]:
    return sorted(r.id for r in records)


def _same(store: Store, where: Where) -> list[str]:
    """The held answer, checked against the engine's."""
    held = _ids(store.query("turns", where, cached=True))
    assert held == _ids(store.query("turns", where)), where
    return held


def _reads_engine(store: Store, where: Where) -> bool:
    """Whether a cached read of ``where`` went to the engine (the held result is gone after it)."""
    before = store._tables.held.get("turns", where, store.version("turns"))
    store.query("turns", where, cached=True)
    return before is None


def test_held_reads_follow_this_process_writes(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    store.insert_absent("turns", [_turn(0)], _vectors(1))
    pending = _session(statuses=["pending"])
    assert _same(store, _session()) == [_turn(0).id]
    assert _same(store, pending) == [_turn(0).id]
    store.insert_absent("turns", [_turn(1)], _vectors(1))  # joins both results, read again from memory
    assert not _reads_engine(store, _session())
    assert _same(store, _session()) == [_turn(0).id, _turn(1).id]
    store.upsert("turns", [_turn(0, status="observed")], _vectors(1))  # leaves the pending result
    assert not _reads_engine(store, pending)
    assert _same(store, pending) == [_turn(1).id]
    assert [t.status for t in store.query("turns", _session(), cached=True) if t.id == _turn(0).id] == ["observed"]
    store.insert_absent("turns", [_turn(0, session="s-2")], _vectors(1))  # another session: no change here
    assert _same(store, _session()) == [_turn(0).id, _turn(1).id]


def test_another_handle_or_process_writing_is_seen_on_the_next_read(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    store.insert_absent("turns", [_turn(0)], _vectors(1))
    assert _same(store, _session()) == [_turn(0).id]
    _store(tmp_path / "s").insert_absent("turns", [_turn(1)], _vectors(1))  # a handle with a cache of its own
    assert _same(store, _session()) == [_turn(0).id, _turn(1).id]
    code = textwrap.dedent(
        """
        import sys
        from datetime import UTC, datetime
        import numpy as np
        from tiermem import Message, Store, Turn
        turn = Turn(id="turn-u-1-s-1-2", namespace="default", user_id="u-1", session_id="s-1", seq=2,
                    messages=(Message(role="user", content="from elsewhere"),),
                    created_at=datetime(2026, 3, 1, 9, 2, tzinfo=UTC))
        Store(sys.argv[1], embedder_id="hashing-v1-8", dimensions=8).insert_absent(
            "turns", [turn], np.ones((1, 8), dtype=np.float32))
        """
    )
    done = run_python(code, str(tmp_path / "s"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _same(store, _session()) == [_turn(0).id, _turn(1).id, _turn(2).id]


def test_deletes_compactions_and_skipped_inserts_send_the_next_read_to_the_engine(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", compact_every=3)
    store.insert_absent("turns", [_turn(0), _turn(1)], _vectors(2))
    assert _same(store, _session()) == [_turn(0).id, _turn(1).id]
    store.delete("turns", Where(eq={"id": _turn(0).id}))
    assert _reads_engine(store, _session())
    assert _same(store, _session()) == [_turn(1).id]
    # An insert that found one of its ids present: which rows landed is not known here.
    assert store.insert_absent("turns", [_turn(1), _turn(2)], _vectors(2)) == 1
    assert _reads_engine(store, _session())
    assert _same(store, _session()) == [_turn(1).id, _turn(2).id]
    for n in range(3, 9):  # past compact_every: compactions commit versions of their own
        store.upsert("turns", [_turn(n)], _vectors(1))
        assert _same(store, _session()) == [f"turn-u-1-s-1-{k}" for k in range(1, n + 1)]


def test_results_over_the_row_limit_are_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_read_cache, "ROWS", 3)
    store = _store(tmp_path / "s")
    store.insert_absent("turns", [_turn(n) for n in range(3)], _vectors(3))
    assert _same(store, _session()) == [_turn(n).id for n in range(3)]
    assert not _reads_engine(store, _session())
    store.insert_absent("turns", [_turn(3)], _vectors(1))  # four rows now: no longer held
    assert _reads_engine(store, _session())
    assert _same(store, _session()) == [_turn(n).id for n in range(4)]
    assert _reads_engine(store, _session())


@pytest.mark.parametrize("seed", [1, 2, 3], ids=["seed-1", "seed-2", "seed-3"])
def test_random_writes_from_two_handles_never_leave_a_stale_answer(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    mine, other = _store(tmp_path / "s", compact_every=5), _store(tmp_path / "s", compact_every=5)
    scopes = [_session(s, u, st) for s in ("s-1", "s-2") for u in ("u-1", "u'2") for st in (None, ["pending"])]
    for _ in range(40):
        writer = mine if rng.random() < 0.75 else other
        turn = _turn(rng.randrange(6), session=rng.choice(["s-1", "s-2"]), user=rng.choice(["u-1", "u'2"]),
                     status=rng.choice(["pending", "observed"]))  # fmt: skip
        action = rng.random()
        if action < 0.45:
            writer.upsert("turns", [turn], _vectors(1))
        elif action < 0.8:
            writer.insert_absent("turns", [turn], _vectors(1))
        elif action < 0.9:
            writer.delete("turns", Where(eq={"id": turn.id}))
        else:
            writer.upsert("turns", [turn, _turn(7, session=turn.session_id, user=turn.user_id)], _vectors(2))
        for where in rng.sample(scopes, 3):
            _same(mine, where)
            _same(other, where)


@pytest.mark.parametrize(
    ("where", "row", "expected"),
    [
        (Where(eq={"status": "active"}), {"status": "active"}, True),
        (Where(eq={"status": "active"}), {"status": None}, False),
        (Where(eq={}, isin={"status": ["a", "b"]}), {"status": "b"}, True),
        (Where(eq={}, isin={"status": ["a", "b"]}), {"status": None}, False),
        (Where(eq={}, ne={"subject": "user"}), {"subject": None}, True),
        (Where(eq={}, ne={"subject": "user"}), {"subject": "user"}, False),
        (Where(eq={}, isin={"status": []}), {"status": "a"}, False),
    ],
    ids=["eq", "eq-null", "isin", "isin-null", "ne-null", "ne", "isin-empty"],
)
def test_a_row_passes_a_filter_as_the_engines_sql_says(where: Where, row: dict[str, Any], expected: bool) -> None:
    assert where.admits(row) is expected


def test_only_results_read_at_the_write_s_own_version_take_its_rows() -> None:
    cache = ReadCache()
    where = _session()
    cache.put("turns", where, 4, [_turn(0)])
    cache.put("turns", _session("s-2"), 3, [])
    row = {"namespace": "default", "user_id": "u-1", "session_id": "s-1", "status": "pending"}
    cache.wrote("turns", before=4, after=5, rows=[(row, _turn(1))])
    assert _ids(cache.get("turns", where, 5) or []) == [_turn(0).id, _turn(1).id]
    assert cache.get("turns", where, 4) is None
    assert cache.get("turns", _session("s-2"), 3) is None  # read before another commit: gone


def test_the_least_recently_used_results_go_beyond_the_record_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_read_cache, "RECORDS", 4)
    cache = ReadCache()
    first, second, third = _session("s-1"), _session("s-2"), _session("s-3")
    cache.put("turns", first, 1, [_turn(0, session="s-1"), _turn(1, session="s-1")])
    cache.put("turns", second, 1, [_turn(0, session="s-2"), _turn(1, session="s-2")])
    assert cache.get("turns", first, 1) is not None  # now the most recently used
    cache.put("turns", third, 1, [_turn(0, session="s-3")])  # five records: the least recent result goes
    assert cache.get("turns", second, 1) is None
    assert cache.get("turns", first, 1) is not None
    assert cache.get("turns", third, 1) is not None
    cache.put("turns", first, 2, [_turn(0, session="s-1")])  # read again: replaces, not adds
    cache.put("turns", second, 2, [_turn(0, session="s-2")])
    assert all(cache.get("turns", w, v) is not None for w, v in ((first, 2), (second, 2), (third, 1)))


def test_empty_results_are_bounded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_read_cache, "ENTRIES", 2)
    cache = ReadCache()
    for n in range(3):  # sessions with no turns yet: nothing held in records, still one result each
        cache.put("turns", _session(f"s-{n}"), 1, [])
    assert cache.get("turns", _session("s-0"), 1) is None
    assert cache.get("turns", _session("s-1"), 1) == [] and cache.get("turns", _session("s-2"), 1) == []


def test_a_write_reaches_the_results_of_its_users_and_of_the_ids_it_holds() -> None:
    cache = ReadCache()
    mine, theirs, anyone = _session(user="u-1"), _session(user="u-2"), Where(eq={"session_id": "s-1"})
    for where in (mine, theirs, anyone):
        cache.put("turns", where, 1, [])
    cache.put("turns", Where(eq={"namespace": "default", "user_id": "u-3"}), 1, [_turn(0, user="u-3")])
    row = {"namespace": "default", "user_id": "u-1", "session_id": "s-1", "status": "pending"}
    cache.wrote("turns", before=1, after=2, rows=[(row, _turn(5))])
    assert _ids(cache.get("turns", mine, 2) or []) == [_turn(5).id]
    assert cache.get("turns", theirs, 2) == []  # another user's result: moved on, untouched
    assert _ids(cache.get("turns", anyone, 2) or []) == [_turn(5).id]  # no user in the filter: every row
    # A record held for u-3 rewritten as u-1's (ids are per scope, so only a repair does this): it leaves.
    moved = {**row, "user_id": "u-1"}
    cache.wrote("turns", before=2, after=3, rows=[(moved, _turn(0, user="u-3"))])
    assert cache.get("turns", Where(eq={"namespace": "default", "user_id": "u-3"}), 3) == []
