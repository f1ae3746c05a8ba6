"""Fault injection: nothing lost, nothing doubled, whatever fails in between.

Every turn says a unique token that the fake model (``tests/faults/model.py``) carries through every
stage; the census (``tests/faults/census.py``) reads every row of every table and follows each turn
through journal, working entries, episodes and facts. Four kinds of fault:

- a model behind real litellm failing 30% of requests (connection reset, 503, timeout) and answering
  invalid output for 10%, over users side by side; then ``retry_pending()`` with the model healthy;
- ``kill -9`` of processes capturing, at random points, then a rerun of every capture (its outcome was
  unknown) and ``retry_pending()``;
- two processes capturing into one session at once;
- two processes consolidating the same users at once: the consolidation job, and two workers sharing
  one APScheduler job store (the README's multi-worker setup).

Sized for CI (about a minute on two cores); ``python bench/faults.py --turns 1000`` runs it larger.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.faults.census import Spec, take_census, workload
from tests.faults.model import Faults, TokenModel, read_log
from tests.faults.pipeline import build, run_faulty
from tests.subprocesses import clean_env, run_together
from tiermem import MemoryContext
from tiermem.memory._store import Where

pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

CHILD = Path(__file__).parent / "faults" / "child.py"
FAULTY = {"failure_rate": 0.30, "invalid_rate": 0.10}
LAUNCH = f"import runpy; runpy.run_path({str(CHILD)!r}, run_name='__main__')"  # for run_together's `python -c`
STARTUP = 300.0  # seconds: a bound for a slow, shared CI machine, not an expected duration


def _child_config(store: str, tmp_path: Path, name: str, specs: list[Spec] | None = None, **extra: Any) -> str:
    config: dict[str, Any] = {"store": store, **extra}
    if specs is not None:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps([s.as_json() for s in specs]))
        config["specs"] = str(path)
    return json.dumps(config)


async def _heal_and_finish(store: str, fake: TokenModel, specs: list[Spec]) -> None:
    """End every session and consolidate every user through the faulty model, then heal it and retry."""
    mem = build(store, fake)
    for user, session in sorted({(s.user_id, s.session_id) for s in specs}):
        await mem.end_session(MemoryContext(user_id=user, session_id=session))
    for user in sorted({s.user_id for s in specs}):
        await mem.consolidate(MemoryContext(user_id=user))
    fake.faults.enabled = False
    await mem.retry_pending()
    await mem.retry_pending(include_parked=True)


# -- 1. a model that fails 30% of calls and answers invalid JSON for 10% -------------------------


async def test_a_failing_model_loses_and_doubles_nothing(tmp_path: Path) -> None:
    fake = TokenModel(Faults(**FAULTY, seed=11))
    mem = build(tmp_path / "store", fake)
    specs = workload(users=3, sessions=5, turns=10, seed=11)  # 150 turns, keys derived by the library

    run = await run_faulty(mem, fake, specs)
    census = take_census(mem.store, specs)

    assert run.deferred_captures > 0 and fake.calls(outcome="error") > 0 and fake.calls(outcome="invalid") > 0
    assert census.problems() == []
    assert census.reached == dict.fromkeys(census.reached, 150)


# -- 2. kill -9 of capturing processes at random points -------------------------------------------


def _kill_at_random(procs: list[tuple[subprocess.Popen[str], Path, int]], rng: random.Random) -> list[int]:
    """SIGKILL each process once its progress passes a random turn, after a random moment more.

    Returns how many captures each had finished when killed (the kill lands inside the next one).
    """
    targets = [rng.randrange(1, total - 1) for _, _, total in procs]
    killed: list[int | None] = [None] * len(procs)
    deadline = time.monotonic() + STARTUP
    while None in killed and time.monotonic() < deadline:
        for i, (proc, progress, _) in enumerate(procs):
            if killed[i] is not None:
                continue
            done = len(progress.read_text().split()) if progress.exists() else 0
            if proc.poll() is not None:
                raise AssertionError(f"capturing process exited before its kill: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            if done >= targets[i]:
                time.sleep(rng.uniform(0, 0.2))  # somewhere inside the next capture(s)
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
                killed[i] = len(progress.read_text().split())
        time.sleep(0.005)
    assert None not in killed, "the capturing processes never got far enough to be killed"
    return [k for k in killed if k is not None]


async def test_kill_9_while_capturing_loses_and_doubles_nothing(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    fake = TokenModel(Faults(**FAULTY, seed=21))
    build(store, fake)  # create the store before the processes race to
    everything = workload(users=2, sessions=2, turns=15, seed=21, naming="mixed")  # caller keys and at=
    groups = [[s for s in everything if s.user_id == f"u-{i}"] for i in range(2)]  # one user per process
    procs = []
    for i, specs in enumerate(groups):
        progress = tmp_path / f"progress-{i}"
        config = _child_config(
            store, tmp_path, f"specs-{i}", specs, faults={**FAULTY, "seed": 30 + i}, progress=str(progress)
        )
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), "capture", config],
            cwd=tmp_path,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append((proc, progress, len(specs)))
    finished = _kill_at_random(procs, random.Random(21))
    for proc, _, _ in procs:
        proc.communicate()

    specs = [s for group in groups for s in group]
    mem = build(store, fake)
    before = {t.id for t in mem.store.query("turns", Where(eq={}))}
    assert len(before) >= sum(finished)  # every capture that returned had journaled its turn
    rerun = [await mem.capture(s.ctx, s.messages, idempotency_key=s.key, at=s.at) for s in specs]
    assert before <= {r.turn.id for r in rerun}  # a rerun returns the turn journaled first, never a second
    await _heal_and_finish(store, fake, specs)
    census = take_census(mem.store, specs)

    assert census.problems() == []
    assert census.reached == dict.fromkeys(census.reached, len(specs))


# -- 3. two processes capturing into one session ---------------------------------------------------


async def test_two_processes_capturing_into_one_session_keep_every_turn(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    fake = TokenModel(Faults(**FAULTY, seed=41))
    build(store, fake)
    n = 100
    groups = [
        [
            Spec(user_id="u-0", session_id="shared", index=s.index, token=s.token)
            for s in workload(users=1, sessions=1, turns=n, seed=41, prefix=name)
        ]
        for name in ("alpha", "beta")
    ]
    configs = [
        [_child_config(store, tmp_path, f"specs-{i}", specs, faults={**FAULTY, "seed": 50 + i})]
        for i, specs in enumerate(groups)
    ]

    outputs = run_together(LAUNCH, [["capture", *c] for c in configs], tmp_path)
    specs = [s for group in groups for s in group]
    reports = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    assert [r["captured"] for r in reports] == [n, n] and sum(r["duplicates"] for r in reports) == 0
    await _heal_and_finish(store, fake, specs)
    census = take_census(build(store, fake).store, specs)

    assert census.problems() == []  # seqs unique too
    assert census.rows["turns"] == 2 * n and census.rows["episodes"] == 1


# -- 4. two workers consolidating at once ----------------------------------------------------------


@pytest.mark.parametrize(
    "mode", [pytest.param("consolidate", id="consolidation-job"), pytest.param("worker", id="workers-shared-jobstore")]
)
async def test_two_workers_consolidate_each_episode_once(tmp_path: Path, mode: str) -> None:
    store = str(tmp_path / "store")
    log = tmp_path / "calls.jsonl"
    mem = build(store, TokenModel())
    specs = workload(users=3, sessions=8, turns=2, seed=61)  # 24 sessions: 6 batches of 4 episodes
    for spec in specs:
        await mem.capture(spec.ctx, spec.messages)
    for user, session in sorted({(s.user_id, s.session_id) for s in specs}):
        await mem.end_session(MemoryContext(user_id=user, session_id=session))
    config = _child_config(store, tmp_path, "config", log=str(log), jobstore=f"sqlite:///{tmp_path / 'jobs.db'}")

    run_together(LAUNCH, [[mode, config], [mode, config]], tmp_path)
    calls = [c for c in read_log(log) if c["stage"] == "consolidate"]
    per_episode = Counter(e for c in calls for e in c["subjects"])
    census = take_census(mem.store, specs)

    assert census.problems() == []
    assert len(per_episode) == 24 and set(per_episode.values()) == {1}  # one model call per batch, none twice
    assert len(calls) == 6
