"""Tier tables a racing create overwrote (lance#4451): every row written before it comes back, once.

Creating a table is not atomic in Lance: of processes that all found a table absent, one whose create
commits after another's create and rows commits it as an Overwrite, and the table reads as empty.
"""

from __future__ import annotations

import json
import textwrap
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lancedb  # only to commit what a racing process's late create commits
import numpy as np
import pytest

from tests.object_storage import store_at
from tests.subprocesses import run_together
from tiermem import Alias, Fact, Store
from tiermem.memory._store import _creation as creation
from tiermem.memory._store._creation import GONE, Stamp, clobbered, is_settled
from tiermem.memory._store._lease_table import LEASE_SCHEMA
from tiermem.memory.testing import Where

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SCOPE = {"namespace": "default", "user_id": "u-1"}
CREATED_BY, SETTLED = creation.CREATED_BY.encode(), creation.SETTLED.encode()


def _fact(fact_id: str, text: str = "A fact.") -> Fact:
    return Fact(
        id=fact_id, namespace="default", user_id="u-1", subject="user", text=text,
        created_at=NOW, updated_at=NOW, reinforced_at=NOW,
    )  # fmt: skip


def _write_facts(store: Store, ids: list[str]) -> None:
    store.upsert("facts", [_fact(i) for i in ids], np.ones((len(ids), 8), dtype=np.float32))


def _read_facts(store: Store) -> list[str]:
    return [f.id for f in store.query("facts", Where(eq=SCOPE))]


def _write_aliases(store: Store, ids: list[str]) -> None:
    store.upsert("aliases", [Alias(id=i, name=i, subject="user", created_at=NOW, **SCOPE) for i in ids])


def _read_aliases(store: Store) -> list[str]:
    return [a.id for a in store.query("aliases", Where(eq=SCOPE))]


def _write_leases(store: Store, ids: list[str]) -> None:
    for key in ids:
        assert store.claim(key, holder="h", token="t", expires_at=NOW + timedelta(days=1), now=NOW)


def _read_leases(store: Store) -> list[str]:
    return [k for k in ("r-1", "r-2", "r-3", "r-4") if store.lease_row(k) is not None]


TABLES: dict[str, tuple[Callable[[Store, list[str]], None], Callable[[Store], list[str]]]] = {
    "facts": (_write_facts, _read_facts),
    "aliases": (_write_aliases, _read_aliases),
    "leases": (_write_leases, _read_leases),
}


def _store(uri: str, options: dict[str, str] | None, **kwargs: Any) -> Store:
    return Store(uri, embedder_id="hashing-v1-8", dimensions=8, storage_options=options, **kwargs)


def _late_create(uri: str, options: dict[str, str] | None, name: str, *, stamped: bool) -> None:
    """What a process that found no ``name`` table commits when its create lands after others' rows.

    Its create, rebased by Lance onto the table that now exists, commits as an Overwrite with the
    late process's schema: the same columns, and (``stamped``) its own creation's stamp.
    """
    db = lancedb.connect(uri, storage_options=options)
    schema = db.open_table(name).schema
    key = schema.field("id")
    metadata = {k: v for k, v in (key.metadata or {}).items() if not k.startswith(b"tiermem:")}  # the key's
    if stamped:
        metadata[CREATED_BY] = uuid.uuid4().hex.encode()
    schema = schema.set(schema.get_field_index("id"), key.with_metadata(metadata))
    db.create_table(name, schema=schema, mode="overwrite")
    assert db.open_table(name).count_rows() == 0


@pytest.mark.parametrize("late", ["unstamped", "stamped"], ids=["older-tiermem", "this-tiermem"])
@pytest.mark.parametrize("where", ["local", "s3"], ids=["local", "s3"])
@pytest.mark.parametrize("name", list(TABLES), ids=list(TABLES))
def test_rows_a_racing_create_overwrote_come_back(
    name: str, where: str, late: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    uri, options = store_at(where, tmp_path, request)
    write, read = TABLES[name]
    first = _store(uri, options)
    write(first, ["r-1", "r-2"])
    _late_create(uri, options, name, stamped=late == "stamped")
    write(first, ["r-3"])  # the first process goes on, onto the emptied table
    late_process = _store(uri, options)  # the late creator goes on too (or any writer opens the store)
    write(late_process, ["r-4"])

    reader = _store(uri, options, create=False)
    assert sorted(read(reader)) == ["r-1", "r-2", "r-3", "r-4"]
    assert lancedb.connect(uri, storage_options=options).open_table(name).count_rows() == 4  # none doubled


def test_what_happened_after_the_overwrite_stays_and_the_repair_is_done_once(tmp_path: Path) -> None:
    """Insert-if-absent on ``id``: a row written again since keeps its newer value, a deleted one stays deleted."""
    uri = str(tmp_path / "store")
    first = _store(uri, None)
    first.upsert("facts", [_fact("r-1", "before"), _fact("r-2", "before")], np.ones((2, 8), dtype=np.float32))
    _late_create(uri, None, "facts", stamped=True)
    first.upsert("facts", [_fact("r-1", "after"), _fact("r-3", "after")], np.ones((2, 8), dtype=np.float32))
    first.delete("facts", Where(eq={**SCOPE}, isin={"id": ["r-3"]}))
    _late_create(uri, None, "facts", stamped=True)  # a third process's create, later still
    _write_facts(first, ["r-4"])

    repaired = _store(uri, None)
    texts = {f.id: f.text for f in repaired.query("facts", Where(eq=SCOPE))}
    assert texts == {"r-1": "after", "r-2": "before", "r-4": "A fact."}
    repaired.delete("facts", Where(eq={**SCOPE}, isin={"id": ["r-2"]}))
    again = _store(uri, None)  # repaired once: the next writer to open it restores nothing
    assert sorted(_read_facts(again)) == ["r-1", "r-4"]
    assert [h.record.id for h in again.lance_text_search("facts", "fact", Where(eq=SCOPE), limit=5)] == [
        "r-4"
    ]  # indexed again


@pytest.mark.parametrize("where", ["local", "s3"], ids=["local", "s3"])
@pytest.mark.parametrize("rewrite", ["reembed", "purge", "optimize"], ids=["reembed", "purge", "optimize"])
def test_a_table_rewritten_on_purpose_is_not_taken_for_a_racing_create(
    rewrite: str, where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    uri, options = store_at(where, tmp_path, request)
    store = _store(uri, options)
    _write_facts(store, ["r-1", "r-2"])
    store.delete("facts", Where(eq={**SCOPE}, isin={"id": ["r-2"]}))
    if rewrite == "reembed":  # every row rewritten, 4 wide: version 1 (8 wide, stamped) is still there
        store.reembed("other-embedder-4", 4, lambda _, records: np.ones((len(records), 4), dtype=np.float32))
        reopened = Store(uri, embedder_id="other-embedder-4", dimensions=4, storage_options=options)
        expected = ["r-1"]
    else:  # old versions cleaned up, version 1 with them
        if rewrite == "purge":
            store.purge("facts")
        else:
            store.optimize(cleanup_older_than=timedelta(0))
        reopened = _store(uri, options)
        _write_facts(reopened, ["r-3"])
        expected = ["r-1", "r-3"]
    assert sorted(_read_facts(reopened)) == expected  # r-2 stays deleted, and no row of another width comes back
    assert lancedb.connect(uri, storage_options=options).open_table("facts").count_rows() == len(expected)


A, B, C = "made", "late", "later"
# (history: version -> stamp, what clobbered() returns: the stamp to put back and the versions to restore)
HISTORIES: list[tuple[str, dict[int, Stamp], tuple[str, tuple[int, ...]] | None]] = [
    ("one-version", {1: A}, None),
    ("later-writes", {1: A, 2: A, 3: A}, None),
    ("overwritten-empty", {1: A, 2: B}, (A, (1,))),
    ("overwritten-after-writes", {1: A, 2: A, 3: B, 4: B}, (A, (2,))),
    ("overwritten-twice", {1: A, 2: A, 3: B, 4: B, 5: C, 6: C}, (A, (4, 2))),
    ("by-an-older-tiermem", {1: A, 2: A, 3: None}, (A, (2,))),
    ("repaired", {1: A, 2: A, 3: B, 4: B, 5: A}, None),
    ("overwritten-after-a-repair", {1: A, 2: A, 3: B, 4: A, 5: A, 6: C}, (A, (5,))),
    ("versions-cleaned-up-between", {1: A, 4: B, 5: B}, (A, ())),
    ("first-version-cleaned-up", {5: B, 6: B}, None),
    ("made-before-stamps", {1: None, 2: None, 3: B}, None),
]


@pytest.mark.parametrize(("history", "repair"), [h[1:] for h in HISTORIES], ids=[h[0] for h in HISTORIES])
def test_what_a_racing_create_overwrote_is_read_from_the_stamps(
    history: dict[int, Stamp], repair: tuple[str, tuple[int, ...]] | None
) -> None:
    plan = clobbered(max(history), lambda version: history.get(version, GONE))
    assert (None if plan is None else (plan.made, plan.sources)) == repair


OPENER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from tests_race_writes import write_all

    store_path, me, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    (go.parent / f"ready-{me}").touch()
    while not go.exists():
        time.sleep(0.001)
    print(json.dumps(write_all(store_path, f"p{me}")))
    """
)
WRITES = textwrap.dedent(
    """
    from datetime import UTC, datetime, timedelta
    import numpy as np
    from tiermem import Alias, Fact, Store

    NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    SCOPE = {"namespace": "default", "user_id": "u-1"}

    def write_all(uri, me, options=None):
        # Open a brand-new store and write at once: each table is created by whoever gets there first.
        store = Store(uri, embedder_id="hashing-v1-8", dimensions=8, storage_options=options)
        ids = [f"{me}-{k}" for k in range(3)]
        for i in ids:
            fact = Fact(id=i, subject="user", text=i, created_at=NOW, updated_at=NOW, reinforced_at=NOW, **SCOPE)
            store.upsert("facts", [fact], np.ones((1, 8), dtype=np.float32))
            store.upsert("aliases", [Alias(id=i, name=i, subject="user", created_at=NOW, **SCOPE)])
            store.claim(i, holder=me, token=me, expires_at=NOW + timedelta(days=1), now=NOW)
        return ids
    """
)


def _every_row(uri: str, options: dict[str, str] | None, ids: list[str]) -> dict[str, list[str]]:
    """Per table, the ids written that it lacks, and (after a ``|``) how many rows it holds beyond them."""
    store = _store(uri, options, create=False)
    held = {"facts": _read_facts(store), "aliases": _read_aliases(store)}
    held["leases"] = [i for i in ids if store.lease_row(i) is not None]
    counts = {n: lancedb.connect(uri, storage_options=options).open_table(n).count_rows() for n in TABLES}
    return {n: [*sorted(set(ids) - set(rows)), f"|{counts[n] - len(ids)}"] for n, rows in held.items()}


def test_processes_opening_a_new_store_at_once_keep_every_row(tmp_path: Path) -> None:
    (tmp_path / "tests_race_writes.py").write_text(WRITES)  # the processes run in tmp_path: importable there
    uri = str(tmp_path / "store")
    written = run_together(OPENER, [[uri] for _ in range(3)], tmp_path, env={"PYTHONPATH": str(tmp_path)})
    ids = [i for out in written for i in json.loads(out.strip().splitlines()[-1])]
    assert _every_row(uri, None, ids) == {n: ["|0"] for n in TABLES}


@pytest.mark.parametrize("where", ["local", "s3"], ids=["local", "s3"])
def test_threads_opening_a_new_store_at_once_keep_every_row(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    namespace: dict[str, Any] = {}
    exec(WRITES, namespace)  # the same writes as the processes'
    for attempt in range(4 if where == "local" else 2):
        uri, options = store_at(where, tmp_path / str(attempt), request)
        failures = _write_at_once(namespace["write_all"], uri, options, [f"t{i}" for i in range(4)])
        assert failures == [], (attempt, failures)
        ids = [f"t{i}-{k}" for i in range(4) for k in range(3)]
        assert _every_row(uri, options, ids) == {n: ["|0"] for n in TABLES}, attempt


def _write_at_once(
    write_all: Callable[..., object], uri: str, options: dict[str, str] | None, writers: list[str]
) -> list[str]:
    """Each writer's ``write_all`` in its own thread, all released at one moment; what any raised."""
    start = threading.Barrier(len(writers))
    failures: list[str] = []

    def open_and_write(me: str) -> None:
        start.wait()
        try:
            write_all(uri, me, options)
        except Exception as exc:  # an engine error that escaped: a failure too, reported with the rest
            failures.append(f"{me}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=open_and_write, args=(me,)) for me in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


MARKS: list[tuple[str, dict[bytes, bytes] | None, bool]] = [
    ("unstamped", {b"lance-schema:unenforced-primary-key": b"true"}, False),
    ("no-metadata", None, False),
    ("stamped-not-checked", {CREATED_BY: b"a"}, False),
    ("checked", {CREATED_BY: b"a", SETTLED: b"a"}, True),
    ("checked-then-stamped-again", {CREATED_BY: b"b", SETTLED: b"a"}, False),
]


@pytest.mark.parametrize(("metadata", "settled"), [m[1:] for m in MARKS], ids=[m[0] for m in MARKS])
def test_only_a_table_checked_at_its_own_stamp_is_settled(metadata: dict[bytes, bytes] | None, settled: bool) -> None:
    assert is_settled(metadata) is settled


def test_a_leases_table_made_before_stamps_still_opens_as_an_older_tiermem_opens_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "store")
    _store(uri, None)
    db = lancedb.connect(uri)
    db.create_table("leases", schema=LEASE_SCHEMA)  # as an older tiermem made it, unstamped
    store = _store(uri, None)
    _write_leases(store, ["r-1"])
    assert _read_leases(_store(uri, None)) == ["r-1"]
    db.create_table("leases", schema=LEASE_SCHEMA, exist_ok=True)  # what an older tiermem calls on every open


@pytest.mark.parametrize("table", ["facts", "leases"], ids=["tier-table", "bookkeeping-table"])
def test_a_create_that_loses_its_commit_race_opens_the_table_the_winner_made(
    table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI (moto S3, four threads) saw the engine's raw conflict on a create escape the create's retry."""
    uri = str(tmp_path / "store")
    store = _store(uri, None)
    real = lancedb.db.LanceDBConnection.create_table
    lost: list[str] = []

    def losing(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if name == table and not lost:  # another writer's create of this table commits first
            lost.append(name)
            real(lancedb.db.LanceDBConnection(uri), name, *args, **kwargs)
            raise OSError(f"lance error: Retryable commit conflict for version 2: {name} was created meanwhile")
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(lancedb.db.LanceDBConnection, "create_table", losing)
    (_write_facts if table == "facts" else _write_leases)(store, ["r-1"])
    assert lost == [table]
    assert (_read_facts if table == "facts" else _read_leases)(_store(uri, None)) == ["r-1"]
