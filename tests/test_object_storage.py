"""The whole pipeline on object storage: the same results on a local folder and on an S3 server.

The S3 server is moto's, in its own process on 127.0.0.1 (tests/object_storage.py); LanceDB reaches it
over HTTP with ``storage_options`` in process and with ``AWS_*`` variables in ``tiermem worker``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.object_storage import S3Store, store_at
from tiermem import ConfigurationError, MemoryContext, MemorySystem, system
from tiermem.jobs import run_janitor
from tiermem.memory.testing import FrozenClock

# litellm imports some modules lazily on the first model call; one trips a pydantic UserWarning
# that pyproject's filterwarnings="error" would turn into a failed stage.
pytestmark = [pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning"), pytest.mark.slow]

WORKERS_DONE = 180.0  # seconds: a bound for a slow CI machine, not an expected duration

SESSIONS = {
    "s-1": [
        "I work as a nurse in Porto.",
        "My sister Maria lives in Lisbon.",
        "I adopted a dog named Biscuit.",
        "I am allergic to shellfish.",
        "I play the violin on weekends.",
    ],
    "s-2": [
        "I moved to Braga last month.",
        "My favourite food is bacalhau.",
        "I drive a blue Fiat.",
        "My dog Biscuit loves the beach.",
        "I am learning Japanese.",
    ],
}
CUES = ["Where does the user work?", "dog", "shellfish allergy", "Which language is the user learning?"]


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a pipeline run left in the store, in a form two stores can be compared by."""

    turns: int
    episodes: list[tuple[str, str, int]]
    facts: list[tuple[str, str, str, int, tuple[str, ...]]]
    digest: str | None
    recall: dict[str, list[str]]
    rows: dict[str, int]


async def outcome(mem: MemorySystem, ctx: MemoryContext) -> Outcome:
    facts = mem.tiers.facts(ctx, include_inactive=True)
    digest = await mem.latest_digest(ctx)
    rows = {name: stats["rows"] for name, stats in mem.store.stats().items()}
    return Outcome(
        turns=rows["turns"],
        episodes=sorted((e.session_id, e.status, len(e.provenance)) for e in mem.tiers.episodes(ctx)),
        facts=sorted((f.subject, f.text, f.status, f.reinforcements, tuple(sorted(f.provenance))) for f in facts),
        digest=digest.text if digest else None,
        recall={cue: [item.id for item in await mem.recall(ctx, cue, limit=5)] for cue in CUES},
        rows=rows,
    )


def duplicate_ids(mem: MemorySystem) -> dict[str, list[str]]:
    """Ids stored more than once, per table: none, whatever ran twice or at once."""
    found = {}
    for name in mem.store.stats():
        ids = mem.store.table(name).to_arrow().column("id").to_pylist()
        if twice := sorted(i for i, n in Counter(ids).items() if n > 1):
            found[name] = twice
    return found


async def capture_sessions(
    mem: MemorySystem, user: str, clock: FrozenClock | None = None, *, turns: int = 5
) -> MemoryContext:
    """``turns`` turns in each of two sessions, each session then ended (encoded as an episode)."""
    ctx = MemoryContext(user_id=user)
    for sid, lines in SESSIONS.items():
        sctx = ctx.model_copy(update={"session_id": sid})
        for line in lines[:turns]:
            await mem.capture(sctx, [{"role": "user", "content": line}, {"role": "assistant", "content": "Noted."}])
            if clock is not None:
                clock.advance(minutes=2)
        await mem.end_session(sctx)
    return ctx


async def pipeline(store: str, storage_options: dict[str, str] | None) -> Outcome:
    """capture, end_session, consolidate, digest, recall, janitor (with storage compaction), recall again."""
    clock = FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    mem = system(model="rules", store=store, storage_options=storage_options, embedder="hashing", clock=clock)
    ctx = await capture_sessions(mem, "ann", clock)
    consolidated = await mem.consolidate(ctx)
    assert (consolidated.episodes, consolidated.deferred) == (2, False)
    assert (await mem.digest(ctx)).digest is not None
    before = await outcome(mem, ctx)
    report = await run_janitor(mem)
    assert (report.compaction_failed, report.dry_run) == (0, False)
    after = await outcome(mem, ctx)
    assert duplicate_ids(mem) == {}
    # Compaction changes files, not memories; a rebuilt full-text index may reorder close scores.
    assert replace(after, recall={}) == replace(before, recall={})
    assert {cue: set(ids) for cue, ids in after.recall.items()} == {cue: set(ids) for cue, ids in before.recall.items()}
    return after


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The pipeline on a local folder: what every other store must give."""
    return asyncio.run(pipeline(str(tmp_path_factory.mktemp("reference") / "store"), None))


@pytest.mark.parametrize("where", ["local", "s3"], ids=["local", "s3"])
async def test_the_pipeline_gives_the_same_results_on_a_folder_and_on_s3(
    where: str, reference: Outcome, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, options = store_at(where, tmp_path, request)

    got = await pipeline(store, options)

    assert got == reference
    assert got.turns == 10
    assert [status for _, status, _ in got.episodes] == ["consolidated", "consolidated"]
    assert any("Porto" in text for _, text, *_ in got.facts)
    assert got.digest


def test_storage_options_reach_lancedb_without_aws_variables(
    s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in s3_store.env():  # so only the options can lead LanceDB to the server
        monkeypatch.delenv(name, raising=False)
    mem = system(model="rules", store=s3_store.uri, storage_options=s3_store.storage_options, embedder="hashing")
    ctx = MemoryContext(user_id="u-1", session_id="s-1")
    mem.blocking().capture(ctx, [{"role": "user", "content": "I work as a nurse in Porto."}])

    reopened = system(model="rules", store=s3_store.uri, storage_options=s3_store.storage_options)

    assert reopened.embedder.id == mem.embedder.id  # embedder=None reads the store's meta table over S3 too
    assert reopened.store.count("turns") == 1
    assert reopened.store.disk_bytes() is None


BAD_OPTIONS = [({"allow_http": True}, "mapping of str to str"), ("allow_http=true", "mapping of str to str")]


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS, ids=["non-string value", "not a mapping"])
def test_bad_storage_options_are_refused_before_anything_is_written(options: Any, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=message):
        system(model="rules", store=str(tmp_path / "store"), storage_options=options, embedder="hashing")
    assert not (tmp_path / "store").exists()


def test_storage_options_with_an_opened_store_are_refused(tmp_path: Path) -> None:
    opened = system(model="rules", store=str(tmp_path / "store"), embedder="hashing").store
    with pytest.raises(ConfigurationError, match="not to an already opened Store"):
        system(model="rules", store=opened, storage_options={"allow_http": "true"}, embedder="hashing")


# -- two workers --------------------------------------------------------------------------------


def _start_worker(s3: S3Store, log: Path) -> subprocess.Popen[str]:
    """``tiermem worker`` on the bucket, reaching it through ``AWS_*`` variables alone."""
    script = Path(sys.executable).with_name("tiermem")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "tiermem.memory._cli._main"]
    every = ["--every", "consolidation=1", "--every", "digests=1"]  # the janitor runs once, at start
    args = ["worker", "--store", s3.uri, "--model", "rules", "--embedder", "hashing", "--run-now", *every]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "TIERMEM_MODEL"}
    env.update(s3.env(), LITELLM_LOCAL_MODEL_COST_MAP="True")
    with log.open("w") as out:
        return subprocess.Popen(
            [*command, *args], stdout=out, stderr=subprocess.STDOUT, text=True, env=env, cwd=log.parent
        )


def _stop(procs: list[subprocess.Popen[str]]) -> list[int]:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=60))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(proc.wait())
    return codes


def _done(mem: MemorySystem, users: list[MemoryContext]) -> bool:
    """Every episode consolidated and every user's digest written from their final facts."""
    for ctx in users:
        if {e.status for e in mem.tiers.episodes(ctx)} != {"consolidated"}:
            return False
        digest = mem.tiers.latest_digest(ctx)
        if digest is None or digest.metadata.get("fingerprint") != mem.fact_fingerprint(mem.tiers.facts(ctx)):
            return False
    return True


def _facts(mem: MemorySystem, users: list[str]) -> dict[str, list[tuple[str, str, str, int]]]:
    return {
        user: sorted(
            (f.subject, f.text, f.status, f.reinforcements) for f in mem.tiers.facts(MemoryContext(user_id=user))
        )
        for user in users
    }


async def test_two_workers_on_s3_share_the_work_and_give_the_results_of_one_process(
    s3_store: S3Store, tmp_path: Path
) -> None:
    users = ["ann", "bob"]
    local = system(model="rules", store=str(tmp_path / "local"), embedder="hashing")
    for user in users:
        await local.consolidate(await capture_sessions(local, user, turns=3))
    mem = system(model="rules", store=s3_store.uri, storage_options=s3_store.storage_options, embedder="hashing")
    contexts = [await capture_sessions(mem, user, turns=3) for user in users]
    paths = [tmp_path / f"worker-{i}.log" for i in range(2)]

    procs = [_start_worker(s3_store, path) for path in paths]
    try:
        deadline = time.monotonic() + WORKERS_DONE
        while not _done(mem, contexts) and time.monotonic() < deadline and all(p.poll() is None for p in procs):
            await asyncio.sleep(1)
    finally:
        codes = _stop(procs)
    logs = [path.read_text() for path in paths]
    output = "\n".join(f"--- worker {i}\n{text[-4000:]}" for i, text in enumerate(logs))

    assert codes == [0, 0], output
    assert _done(mem, contexts), output
    assert [text.count("INFO janitor: ") for text in logs] == [1, 1], output  # compaction beside the others' work
    assert _facts(mem, users) == _facts(local, users)  # each episode consolidated once: no double reinforcement
    assert duplicate_ids(mem) == {}
