"""In-process jobs (``start_jobs`` / ``stop_jobs``) and the ``tiermem worker`` process."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.background import BackgroundScheduler

from tiermem import ConfigurationError, MemoryContext, MemorySystem, system
from tiermem.jobs import JOBS
from tiermem.memory.testing import FrozenClock, HashingEmbedder

pytestmark = pytest.mark.slow

STARTUP = 120.0  # seconds: bounds for a slow CI machine, not expected durations
SHUTDOWN = 60.0


@pytest.fixture
def mem(store_path: str, clock: FrozenClock, embedder: HashingEmbedder) -> MemorySystem:
    return system(model="rules", store=store_path, embedder=embedder, clock=clock)


# -- in process -------------------------------------------------------------------------------


def test_start_jobs_outside_a_loop_runs_a_background_scheduler(mem: MemorySystem) -> None:
    scheduler = mem.start_jobs()
    try:
        running = (type(scheduler), scheduler.running, len(scheduler.get_jobs()))
        with pytest.raises(ConfigurationError, match="already running"):
            mem.start_jobs()
    finally:
        mem.stop_jobs()

    assert running == (BackgroundScheduler, True, len(JOBS))
    assert scheduler.running is False


async def test_start_jobs_in_a_loop_runs_an_asyncio_scheduler(mem: MemorySystem) -> None:
    scheduler = mem.start_jobs(digests=None, janitor=timedelta(hours=1))
    try:
        jobs = {job.id.split(":")[1] for job in scheduler.get_jobs()}
        running = (type(scheduler), scheduler.running)
    finally:
        mem.stop_jobs(wait=False)
    await asyncio.sleep(0)  # AsyncIOScheduler.shutdown runs on the next turn of the loop

    assert running == (AsyncIOScheduler, True)
    assert jobs == set(JOBS) - {"digests"}
    assert scheduler.running is False


def test_jobs_can_start_again_after_stop(mem: MemorySystem) -> None:
    mem.start_jobs()
    mem.stop_jobs()

    again = mem.start_jobs(retries=None)
    try:
        count = len(again.get_jobs())
    finally:
        mem.stop_jobs()

    assert count == len(JOBS) - 1


def test_stop_jobs_without_start_is_a_no_op(mem: MemorySystem) -> None:
    mem.stop_jobs()
    mem.stop_jobs(wait=False)


def test_start_jobs_takes_a_given_scheduler(mem: MemorySystem) -> None:
    given = BackgroundScheduler()
    try:
        assert mem.start_jobs(given) is given
        assert given.running
    finally:
        mem.stop_jobs()


async def test_a_job_in_flight_at_stop_finishes_within_the_grace_period(
    mem: MemorySystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiermem.jobs as jobs

    started, release = asyncio.Event(), asyncio.Event()
    finished: list[str] = []
    real_wait = jobs.wait_for_jobs

    async def slow(mem: MemorySystem, now: Any) -> dict[str, int]:
        started.set()
        await release.wait()
        finished.append("janitor")
        return {}

    async def wait_then_release(timeout: float) -> int:
        release.set()  # the job may finish as soon as the worker starts its grace period
        return await real_wait(timeout)

    monkeypatch.setitem(JOBS, "janitor", slow)
    monkeypatch.setattr(jobs, "wait_for_jobs", wait_then_release)
    stop = asyncio.Event()
    only_janitor: dict[str, Any] = dict.fromkeys(set(JOBS) - {"janitor"})
    worker = asyncio.create_task(mem.run_worker(stop, run_now=True, grace=60.0, **only_janitor))
    await asyncio.wait_for(started.wait(), 60)

    stop.set()  # what SIGTERM does in `tiermem worker`
    abandoned = await asyncio.wait_for(worker, 60)

    assert (abandoned, finished) == (0, ["janitor"])


# -- the worker process -----------------------------------------------------------------------


def _lines(stream: IO[str], sink: queue.Queue[str]) -> None:
    for line in stream:
        sink.put(line)


def _tiermem() -> list[str]:
    script = Path(sys.executable).with_name("tiermem")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tiermem.memory._cli._main"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("TIERMEM_MODEL", None)
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


def _wait_for(lines: queue.Queue[str], text: str, proc: subprocess.Popen[str], timeout: float) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"worker never printed {text!r}; rc={proc.poll()} stdout={seen!r}")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_worker_process_runs_and_stops_cleanly_on_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    store = str(tmp_path / "store")
    writer = system(model="rules", store=store, embedder="hashing")  # the id `--embedder hashing` opens
    ctx = MemoryContext(user_id="u-1", session_id="s-1")
    writer.tiers.add_semantic_fact(ctx, "The user works as a nurse in Porto.")
    stderr = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen(
        [*_tiermem(), "worker", "--store", store, "--model", "rules", "--embedder", "hashing", "--run-now"],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=_env(),
        cwd=tmp_path,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True)
    reader.start()
    try:
        started = _wait_for(lines, "running", proc, STARTUP)
        proc.send_signal(sig)
        code = proc.wait(timeout=SHUTDOWN)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr.close()
    reader.join(timeout=5)
    rest = [lines.get() for _ in range(lines.qsize())]

    assert code == 0, (tmp_path / "worker.log").read_text()[-3000:]
    assert store in started[-1]
    assert any("stopped" in line for line in rest)


def test_worker_refuses_a_store_written_with_another_embedder(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    system(model="rules", store=store, embedder=HashingEmbedder(64))
    result = subprocess.run(
        [*_tiermem(), "worker", "--store", store, "--model", "rules", "--embedder", "hashing"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=STARTUP,
    )

    assert result.returncode != 0
    assert "hashing-v1-64" in result.stderr
    assert "running" not in result.stdout
