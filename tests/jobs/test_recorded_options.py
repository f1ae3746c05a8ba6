"""Scheduled work uses the application's options: a store records the options it was created with."""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

import pytest

from tests.jobs.test_worker import _env, _tiermem
from tiermem import MemoryContext, StoreNotFoundError, create_memory_capability, system
from tiermem.memory.testing import Where

CTX = MemoryContext(user_id="u-1", session_id="s-1")


def _edges(store: str) -> int:
    reader = create_memory_capability(store=store, embedder="hashing", create=False)
    return len(reader.store.query("edges", Where(eq={"namespace": "default", "user_id": "u-1"})))


def test_unset_options_take_the_stores_record(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    system(model="rules", store=store, embedder="hashing", semantic={"relations": True}, digest=False)

    later = create_memory_capability(store=store, embedder="hashing")

    assert later.relations.options is not None and later.digest_options is None
    assert later.option_conflicts == []


def test_an_explicit_conflicting_option_is_used_and_reported_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = str(tmp_path / "store")
    system(model="rules", store=store, embedder="hashing", semantic={"relations": True})

    with caplog.at_level(logging.WARNING, logger="tiermem"):
        explicit = create_memory_capability(store=store, embedder="hashing", semantic=True)

    assert explicit.relations.options is None  # what the caller asked for ...
    assert [c.split(":")[0] for c in explicit.option_conflicts] == ["semantic"]  # ... reported
    assert any("differs from the store's record" in r.getMessage() for r in caplog.records)
    assert create_memory_capability(store=store, embedder="hashing").relations.options is not None  # record stands


def test_a_read_only_capability_on_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "memroy-data"
    with pytest.raises(StoreNotFoundError, match="no tiermem store"):
        create_memory_capability(store=str(missing), embedder="hashing", create=False)
    assert not missing.exists()


def test_a_store_created_with_relations_gets_edges_from_the_worker(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    app = system(model="rules", store=store, embedder="hashing", semantic={"relations": True})
    app.blocking().capture(CTX, [{"role": "user", "content": "My wife Moni loves hiking."}])
    app.blocking().end_session(CTX)
    assert _edges(store) == 0  # the app left consolidation to the worker

    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [*_tiermem(), "worker", "--store", store, "--model", "rules", "--embedder", "hashing", "--run-now"],
        stdout=log, stderr=log, text=True, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while _edges(store) == 0 and time.monotonic() < deadline and worker.poll() is None:
            time.sleep(1)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        log.close()
    assert _edges(store) > 0, (tmp_path / "worker.log").read_text()[-3000:]
