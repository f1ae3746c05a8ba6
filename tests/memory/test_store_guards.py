"""What a store refuses to open: empty paths, missing stores (create=False), tables without or against their meta."""

from __future__ import annotations

import json
import textwrap
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lancedb  # only to forge what an older or damaged store would hold
import numpy as np
import pyarrow as pa
import pytest

from tests.object_storage import store_at
from tests.subprocesses import run_together
from tiermem import ConfigurationError, Fact, Store, StoreMismatchError, StoreNotFoundError
from tiermem.memory._store._meta import STORE_ID, settled_meta, stamp, wanted_meta
from tiermem.memory._store._store import stored_meta
from tiermem.memory.testing import Where

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SCOPE = {"namespace": "default", "user_id": "u-1"}


def _fact(text: str, *, fact_id: str = "f-1") -> Fact:
    return Fact(
        id=fact_id,
        namespace="default",
        user_id="u-1",
        subject="user",
        text=text,
        created_at=NOW,
        updated_at=NOW,
        reinforced_at=NOW,
    )


def _store(path: Path | str, **options: object) -> Store:
    return Store(str(path), embedder_id="hashing-v1-8", dimensions=8, **options)  # type: ignore[arg-type]


def _with_a_fact(path: Path) -> Store:
    store = _store(path)
    store.upsert("facts", [_fact("The user lives in Porto.")], np.ones((1, 8), dtype=np.float32))
    return store


def _tables(path: Path) -> set[str]:
    return set(lancedb.connect(str(path)).list_tables().tables)


@pytest.mark.parametrize("uri", ["", "   ", "\t\n"], ids=["empty", "spaces", "whitespace"])
def test_an_empty_store_path_is_refused(uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="store path is empty"):
        _store(uri)
    assert list(tmp_path.iterdir()) == []


def test_create_false_refuses_a_missing_folder_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "store"
    with pytest.raises(StoreNotFoundError, match="no tiermem store"):
        _store(missing, create=False)
    assert not (tmp_path / "nowhere").exists()


def test_create_false_refuses_a_folder_without_a_meta_table(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a store")
    with pytest.raises(StoreNotFoundError, match="no meta table"):
        _store(tmp_path, create=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_create_false_opens_an_existing_store_read_only(tmp_path: Path) -> None:
    _with_a_fact(tmp_path)
    before = _tables(tmp_path)
    reader = _store(tmp_path, create=False)
    assert [f.text for f in reader.query("facts", Where(eq=SCOPE))] == ["The user lives in Porto."]
    assert reader.query("episodes", Where(eq=SCOPE)) == []  # never written: reads as empty
    assert reader.text_search("episodes", "Porto", Where(eq=SCOPE), limit=5) == []
    assert _tables(tmp_path) == before  # and is not created


def test_tables_without_a_meta_table_are_refused_not_restamped(tmp_path: Path) -> None:
    _with_a_fact(tmp_path)
    lancedb.connect(str(tmp_path)).drop_table("meta")
    with pytest.raises(StoreMismatchError, match="no meta table"):
        Store(str(tmp_path), embedder_id="another-embedder", dimensions=8)
    assert "meta" not in _tables(tmp_path)


def test_a_meta_table_naming_two_embedders_is_refused(tmp_path: Path) -> None:
    _with_a_fact(tmp_path)
    meta = lancedb.connect(str(tmp_path)).open_table("meta")
    meta.add([{"key": "embedder_id", "value": "another-embedder"}])  # as two racing openers could have left it
    with pytest.raises(StoreMismatchError, match="inconsistent meta table"):
        _store(tmp_path)


def test_a_table_of_another_vector_width_is_refused(tmp_path: Path) -> None:
    _store(tmp_path)  # meta says 8 dimensions
    schema = Store(str(tmp_path / "other"), embedder_id="x", dimensions=4)._schema("facts")
    lancedb.connect(str(tmp_path)).create_table("facts", schema=schema)  # a 4-wide table copied in
    with pytest.raises(StoreMismatchError, match="4 dimensions"):
        _store(tmp_path).query("facts", Where(eq=SCOPE))


def test_a_store_written_before_keys_were_declared_gets_its_key_and_loses_duplicates(tmp_path: Path) -> None:
    """Old stores have no primary key on ``id`` and may hold an id twice; the first merge fixes both."""
    store = _store(tmp_path)
    old = pa.schema([f.remove_metadata() for f in store._schema("facts")])
    lancedb.connect(str(tmp_path)).create_table("facts", schema=old)
    vector = np.ones((1, 8), dtype=np.float32)
    newer = _fact("Newer copy.").model_copy(update={"updated_at": NOW.replace(hour=10)})
    for record in (newer, _fact("Older copy.")):  # two writers of one id, before the key existed
        store.insert("facts", [record], vector)
    assert store.count("facts") == 2
    reopened = _store(tmp_path)
    reopened.upsert("facts", [_fact("Another.", fact_id="f-2")], vector)
    assert sorted(f.text for f in reopened.query("facts", Where(eq=SCOPE))) == ["Another.", "Newer copy."]
    assert lancedb.connect(str(tmp_path)).open_table("facts").schema.field("id").metadata


def test_upsert_over_an_id_stored_twice_leaves_one_row(tmp_path: Path) -> None:
    store = _store(tmp_path)
    vector = np.ones((1, 8), dtype=np.float32)
    for text in ("First copy.", "Second copy."):  # insert() trusts ids to be new: forge a duplicate with it
        store.insert("facts", [_fact(text)], vector)
    assert store.count("facts") == 2
    store.upsert("facts", [_fact("Corrected.")], vector)
    assert [f.text for f in store.query("facts", Where(eq=SCOPE))] == ["Corrected."]


CREATE = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from tiermem import Store, StoreMismatchError

    store_path, embedder_id, me, go = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
    (go.parent / f"ready-{me}").touch()
    while not go.exists():
        time.sleep(0.005)
    try:
        Store(store_path, embedder_id=embedder_id, dimensions=8)
        print(json.dumps({"opened": embedder_id}))
    except StoreMismatchError:
        print(json.dumps({"refused": embedder_id}))
    """
)


def test_processes_creating_one_store_with_different_embedders_leave_it_one_embedder(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    results = _together(CREATE, [[path, f"embedder-{i}"] for i in range(3)], tmp_path)
    opened = [r["opened"] for r in results if "opened" in r]
    assert len(opened) == 1, results
    assert stored_meta(path)["embedder_id"] == opened[0]


def test_threads_creating_one_store_with_different_embedders_leave_it_one_embedder(tmp_path: Path) -> None:
    """Six at once, again and again: their creates overwrite each other's meta table often (lance#4451)."""
    for attempt in range(12):
        path = str(tmp_path / f"store-{attempt}")
        outcomes = _open_at_once(path, [f"embedder-{i}" for i in range(6)])
        opened = [e for e, outcome in outcomes.items() if outcome == "opened"]
        assert len(opened) == 1 and set(outcomes.values()) == {"opened", "refused"}, (attempt, outcomes)
        assert stored_meta(path)["embedder_id"] == opened[0]
        assert Store(path, embedder_id=opened[0], dimensions=8).meta()["embedder_id"] == opened[0]


def _open_at_once(path: str, embedder_ids: list[str]) -> dict[str, str]:
    """Each embedder's outcome of opening ``path`` in its own thread, all released at one moment."""
    outcomes: dict[str, str] = {}
    start = threading.Barrier(len(embedder_ids))

    def open_store(embedder_id: str) -> None:
        start.wait()
        try:
            Store(path, embedder_id=embedder_id, dimensions=8)
            outcomes[embedder_id] = "opened"
        except StoreMismatchError:
            outcomes[embedder_id] = "refused"
        except Exception as exc:  # an engine error that escaped: a failure too, reported with the rest
            outcomes[embedder_id] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=open_store, args=(embedder_id,)) for embedder_id in embedder_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


@pytest.mark.parametrize("late", ["empty", "stamped"], ids=["older-tiermem", "this-tiermem"])
@pytest.mark.parametrize("where", ["local", "s3"], ids=["local", "s3"])
def test_a_meta_table_a_racing_create_overwrote_keeps_the_first_creators_embedder(
    late: str, where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """What a process that found no meta table commits when its create lands second: an Overwrite (lance#4451)."""
    uri, options = store_at(where, tmp_path, request)
    first = Store(uri, embedder_id="embedder-first", dimensions=8, storage_options=options)
    made = first.meta()
    db = lancedb.connect(uri, storage_options=options)
    rows = [] if late == "empty" else stamp(wanted_meta("embedder-late", 8))
    db.create_table("meta", pa.Table.from_pylist(rows, schema=db.open_table("meta").schema), mode="overwrite")

    assert stored_meta(uri, storage_options=options) == made  # readers see through it
    with pytest.raises(StoreMismatchError, match="embedder-first"):
        Store(uri, embedder_id="embedder-late", dimensions=8, storage_options=options)
    latest = {r["key"]: r["value"] for r in db.open_table("meta").to_arrow().to_pylist()}
    assert latest == made  # and the refused writer restored it
    assert Store(uri, embedder_id="embedder-first", dimensions=8, storage_options=options).meta() == made


FIRST = {"embedder_id": "first", STORE_ID: "id-first"}
LATE = {"embedder_id": "late", STORE_ID: "id-late"}
HISTORIES: list[tuple[str, dict[int, dict[str, str]], dict[str, str], bool]] = [
    ("one-version", {1: FIRST}, FIRST, False),
    ("later-writes", {1: FIRST, 2: {**FIRST, "options": "o"}}, {**FIRST, "options": "o"}, False),
    ("overwritten", {1: FIRST, 2: LATE}, FIRST, True),
    ("overwritten-empty", {1: FIRST, 2: {}}, FIRST, True),
    (
        "overwritten-after-writes",
        {1: FIRST, 2: {**FIRST, "options": "o"}, 3: LATE, 4: LATE},
        {**FIRST, "options": "o"},
        True,
    ),
    ("restored", {1: FIRST, 2: LATE, 3: FIRST}, FIRST, False),
    ("versions-cleaned-up-between", {1: FIRST, 3: LATE}, FIRST, True),
    ("first-version-cleaned-up", {5: LATE}, LATE, False),
    (
        "made-before-store-ids",
        {1: {}, 2: {"embedder_id": "first"}, 3: {"embedder_id": "late"}},
        {"embedder_id": "late"},
        False,
    ),
]


@pytest.mark.parametrize(("history", "values", "restore"), [h[1:] for h in HISTORIES], ids=[h[0] for h in HISTORIES])
def test_the_settled_meta_is_the_newest_version_of_the_creation_that_committed_version_1(
    history: dict[int, dict[str, str]], values: dict[str, str], restore: bool
) -> None:
    def read(version: int) -> list[dict[str, str]] | None:
        return [{"key": k, "value": v} for k, v in history[version].items()] if version in history else None

    assert settled_meta("s", max(history), read) == (values, restore)


def _together(
    script: str, args: list[list[str]], tmp_path: Path, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    return [json.loads(out.strip().splitlines()[-1]) for out in run_together(script, args, tmp_path, env=env)]
