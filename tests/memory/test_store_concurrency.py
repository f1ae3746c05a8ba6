"""Several processes writing one store at once: nothing lost, nothing doubled.

Real processes on one store folder, started together (each waits for a go file): concurrent
upserts and deletes all land, and an id inserted by four processes at the same moment is one row.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.subprocesses import run_together
from tiermem import Fact, InvalidArgumentError, Store, StoreConflictError
from tiermem.memory._store._commits import CommitRetry, retry_conflicts
from tiermem.memory.testing import Where

PROCESSES = 4
SCOPE = {"namespace": "default", "user_id": "u-1"}

WORKER = textwrap.dedent(
    """
    import json, sys, time
    from datetime import UTC, datetime
    from pathlib import Path
    import numpy as np
    from tiermem import Fact, Store
    from tiermem.memory.testing import Where

    store_path, mode, me, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def fact(fact_id, text):
        return Fact(id=fact_id, namespace="default", user_id="u-1", subject="user", text=text,
                    created_at=NOW, updated_at=NOW, reinforced_at=NOW)

    def vectors(n):
        return np.ones((n, 8), dtype=np.float32)

    store = Store(store_path, embedder_id="hashing-v1-8", dimensions=8, compact_every=8)
    store.table("facts")
    (go.parent / f"ready-{me}").touch()
    while not go.exists():
        time.sleep(0.005)
    out = {"inserted": 0}
    if mode == "absent":
        records = [fact(f"shared-{i}", f"written by {me}") for i in range(50)]
        out["inserted"] = store.insert_absent("facts", records, vectors(50))
    else:
        for batch in range(6):
            own = [fact(f"p{me}-{batch}-{i}", f"process {me} batch {batch}") for i in range(5)]
            shared = [fact(f"shared-{batch}", f"process {me} shared")]
            store.upsert("facts", own + shared, vectors(6))
            doomed = fact(f"doomed-{me}-{batch}", "deleted again")
            store.upsert("facts", [doomed], vectors(1))
            store.delete("facts", Where(eq={"user_id": "u-1"}, isin={"id": [doomed.id]}))
    print(json.dumps(out))
    """
)


def _fact(fact_id: str) -> Fact:
    now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    return Fact(
        id=fact_id,
        subject="user",
        text=f"fact {fact_id}",
        created_at=now,
        updated_at=now,
        reinforced_at=now,
        namespace=SCOPE["namespace"],
        user_id=SCOPE["user_id"],
    )


def _together(args: list[list[str]], tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(out.strip().splitlines()[-1]) for out in run_together(WORKER, args, tmp_path)]


def _store(path: str) -> Store:
    return Store(path, embedder_id="hashing-v1-8", dimensions=8)


def test_concurrent_upserts_and_deletes_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    _store(path)  # created once, as an app would before starting workers
    _together([[path, "upsert"]] * PROCESSES, tmp_path)
    ids = [f.id for f in _store(path).query("facts", Where(eq=SCOPE))]
    own = {f"p{me}-{batch}-{i}" for me in range(PROCESSES) for batch in range(6) for i in range(5)}
    assert sorted(ids) == sorted(own | {f"shared-{batch}" for batch in range(6)})  # each once, none doomed


def test_four_processes_inserting_the_same_new_ids_make_one_row_each(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    _store(path)
    results = _together([[path, "absent"]] * PROCESSES, tmp_path)
    store = _store(path)
    ids = [f.id for f in store.query("facts", Where(eq=SCOPE))]
    assert sorted(ids) == sorted(f"shared-{i}" for i in range(50))
    assert sum(r["inserted"] for r in results) == 50
    texts = {f.text for f in store.query("facts", Where(eq=SCOPE))}
    assert len(texts) == 1  # one process's batch won whole (each id kept its first writer)
    first = store.query("facts", Where(eq=SCOPE, isin={"id": ["shared-0"]}))[0]
    store.upsert("facts", [first.model_copy(update={"text": "Updated after the race."})], np.ones((1, 8), np.float32))
    assert store.count("facts") == 50
    assert [f.text for f in store.get("facts", Where(eq=SCOPE), ["shared-0"])] == ["Updated after the race."]


# -- the retry policy -----------------------------------------------------------------------------


def _failing(times: int) -> Callable[[], str]:
    calls = {"n": 0}

    def write() -> str:
        calls["n"] += 1
        if calls["n"] <= times:
            raise StoreConflictError("store failed to write to facts: Retryable commit conflict for version 7")
        return f"written on attempt {calls['n']}"

    return write


def test_a_lost_commit_race_is_retried_with_growing_jittered_pauses(caplog: pytest.LogCaptureFixture) -> None:
    pauses: list[float] = []
    policy = CommitRetry(attempts=8, base_delay=0.02, max_delay=1.5)
    with caplog.at_level(logging.DEBUG, logger="tiermem.memory._store._commits"):
        assert retry_conflicts(_failing(5), action="write", policy=policy, sleep=pauses.append) == (
            "written on attempt 6"
        )
    assert len(pauses) == 5
    assert all(0 <= p <= min(1.5, 0.02 * 2**n) for n, p in enumerate(pauses))
    assert [r.levelno for r in caplog.records] == [logging.DEBUG] * 5


def test_retries_are_bounded_then_the_conflict_is_raised() -> None:
    pauses: list[float] = []
    with pytest.raises(StoreConflictError, match="gave up after 3 attempts"):
        retry_conflicts(_failing(99), action="write", policy=CommitRetry(attempts=3), sleep=pauses.append)
    assert len(pauses) == 2


def test_the_default_policy_gives_up_well_within_ten_seconds() -> None:
    policy = CommitRetry()
    worst = sum(policy.delay(n, rng=lambda: 1.0) for n in range(policy.attempts - 1))
    assert worst < 6.0


@pytest.mark.parametrize(
    "options",
    [{"attempts": 0}, {"base_delay": -1.0}, {"max_delay": -0.5}],
    ids=["no-attempts", "negative-base", "negative-max"],
)
def test_an_unusable_retry_policy_is_refused(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        CommitRetry(**options)


def test_a_compaction_that_keeps_losing_commit_races_never_fails_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's own compaction after a write is housekeeping: the write has committed (CI saw a
    capture fail when another process's updates preempted the compaction eight times in a row)."""
    retry = CommitRetry(attempts=2, base_delay=0.0, max_delay=0.0)
    store = Store(
        str(tmp_path / "store"), embedder_id="hashing-v1-8", dimensions=8, compact_every=1, commit_retry=retry
    )
    table = store.table("facts")
    tried: list[int] = []

    def preempted(self: Any, *args: Any, **kwargs: Any) -> None:  # the engine's own message for a lost race
        tried.append(1)
        raise OSError(
            "lance error: Retryable commit conflict for version 3: This Rewrite transaction was preempted by "
            "concurrent transaction Update at version 3. Please retry."
        )

    monkeypatch.setattr(type(table), "optimize", preempted)
    fact = _fact("kept")
    with caplog.at_level(logging.WARNING):
        store.upsert("facts", [fact], np.ones((1, 8), dtype=np.float32))

    assert len(tried) == retry.attempts  # it was retried as any commit race, then left
    assert [f.id for f in store.query("facts", Where(eq=SCOPE))] == ["kept"]
    assert "compaction of facts left for later" in caplog.text
    monkeypatch.undo()
    store.upsert("facts", [_fact("next")], np.ones((1, 8), dtype=np.float32))  # compacts again, for real
    assert sorted(f.id for f in store.query("facts", Where(eq=SCOPE))) == ["kept", "next"]


def test_an_index_build_that_fails_after_the_commit_never_fails_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process building the same index can fail this one's build with an I/O error (CI saw it on
    S3): the write has committed, so it stands; the next write builds the index."""
    store = Store(str(tmp_path / "store"), embedder_id="hashing-v1-8", dimensions=8)
    table = store.table("facts")
    real = type(table).create_index

    def racing(self: Any, *args: Any, **kwargs: Any) -> None:  # the engine's message for the failure CI saw
        raise OSError("lance error: LanceError(IO): Generic memory error: Invalid range for object of size 1688 bytes")

    monkeypatch.setattr(type(table), "create_index", racing)
    with caplog.at_level(logging.WARNING):
        store.upsert("facts", [_fact("kept")], np.ones((1, 8), dtype=np.float32))

    assert [f.id for f in store.query("facts", Where(eq=SCOPE))] == ["kept"]
    assert "indexing facts left for later" in caplog.text
    monkeypatch.setattr(type(table), "create_index", real)
    store.upsert("facts", [_fact("next")], np.ones((1, 8), dtype=np.float32))  # indexes, for real
    assert {tuple(ix.columns) for ix in store.table("facts").list_indices()} >= {("text",), ("user_id",)}
    assert [h.record.id for h in store.lance_text_search("facts", "kept", Where(eq=SCOPE), limit=5)] == ["kept"]
