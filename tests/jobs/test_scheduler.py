"""APScheduler wiring: real BackgroundScheduler / AsyncIOScheduler, a real SQLAlchemy job store.

Jobs run through the scheduler with ``now=None``, so they read the system's FrozenClock. Waiting
is always bounded and event driven (an EVENT_JOB_EXECUTED listener), never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, JobExecutionEvent
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.interval import IntervalTrigger

from tiermem import ConfigurationError, MemoryContext, MemorySystem, system
from tiermem.jobs import DEFAULT_INTERVALS, JOBS, run_job_async, schedule_jobs, wait_for_jobs
from tiermem.memory.testing import FrozenClock, HashingEmbedder

WAIT = 60.0  # seconds: an upper bound for a job to finish, not an expected duration


@pytest.fixture
def mem(store_path: str, clock: FrozenClock, embedder: HashingEmbedder) -> MemorySystem:
    return system(
        model="rules", store=store_path, embedder=embedder, clock=clock, semantic={"half_life": timedelta(days=10)}
    )


@pytest.fixture
def background() -> Iterator[BackgroundScheduler]:
    scheduler = BackgroundScheduler()
    yield scheduler
    if scheduler.running:
        scheduler.shutdown(wait=True)


def job_ids(mem: MemorySystem, names: list[str] | None = None) -> set[str]:
    return {f"tiermem:{name}:{mem.store.uri}" for name in (names or list(JOBS))}


def summary(scheduler: BaseScheduler) -> dict[str, tuple[int, bool, float]]:
    out: dict[str, tuple[int, bool, float]] = {}
    for job in scheduler.get_jobs():
        assert isinstance(job.trigger, IntervalTrigger)
        out[job.id] = (job.max_instances, job.coalesce, job.trigger.interval.total_seconds())
    return out


# -- what gets scheduled ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["background", "asyncio"], ids=["BackgroundScheduler", "AsyncIOScheduler"])
async def test_schedule_jobs_adds_every_job_once_with_stable_ids(mem: MemorySystem, kind: str) -> None:
    scheduler: BaseScheduler = BackgroundScheduler() if kind == "background" else AsyncIOScheduler()

    returned = schedule_jobs(mem, scheduler)

    expected = {f"tiermem:{name}:{mem.store.uri}": (1, True, DEFAULT_INTERVALS[name].total_seconds()) for name in JOBS}
    assert returned is scheduler
    assert summary(scheduler) == expected
    assert {job.id for job in schedule_jobs(mem, type(scheduler)()).get_jobs()} == set(expected)  # stable ids


async def test_schedule_jobs_without_a_scheduler_in_a_loop_makes_an_asyncio_one(mem: MemorySystem) -> None:
    assert isinstance(schedule_jobs(mem), AsyncIOScheduler)


def test_schedule_jobs_without_a_scheduler_outside_a_loop_makes_a_background_one(mem: MemorySystem) -> None:
    assert isinstance(schedule_jobs(mem), BackgroundScheduler)


def test_intervals_override_the_defaults_and_none_leaves_a_job_out(
    mem: MemorySystem, background: BackgroundScheduler
) -> None:
    schedule_jobs(mem, background, janitor=timedelta(minutes=1), digests=None)

    got = {job_id.split(":")[1]: interval for job_id, (_, _, interval) in summary(background).items()}
    assert got == {"janitor": 60.0, "consolidation": 900.0, "idle_sessions": 300.0, "retries": 600.0}


def test_an_unknown_job_name_is_a_configuration_error(mem: MemorySystem, background: BackgroundScheduler) -> None:
    with pytest.raises(ConfigurationError, match="sweeper"):
        schedule_jobs(mem, background, sweeper=timedelta(minutes=1))


@pytest.mark.parametrize("started", [False, True], ids=["before-start", "after-start"])
def test_scheduling_twice_keeps_one_job_per_name(
    mem: MemorySystem, background: BackgroundScheduler, started: bool
) -> None:
    if started:
        background.start(paused=True)
    schedule_jobs(mem, background)
    schedule_jobs(mem, background, janitor=timedelta(hours=1))
    if not started:
        background.start(paused=True)

    jobs = summary(background)
    assert set(jobs) == job_ids(mem)
    assert jobs[f"tiermem:janitor:{mem.store.uri}"][2] == 3600.0


# -- running a job ----------------------------------------------------------------------------


def test_a_job_runs_at_once_on_a_background_scheduler(
    mem: MemorySystem, clock: FrozenClock, background: BackgroundScheduler
) -> None:
    ctx = MemoryContext(user_id="u-1")
    fact = mem.tiers.add_semantic_fact(ctx, "The user visited Lisbon in May.")
    clock.advance(days=30)  # below the archive floor by the system's clock
    done = threading.Event()
    events: list[JobExecutionEvent] = []

    def listener(event: JobExecutionEvent) -> None:
        events.append(event)
        done.set()

    background.add_listener(listener, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
    background.start(paused=True)
    schedule_jobs(mem, background, consolidation=None, digests=None, idle_sessions=None, retries=None)
    janitor_id = f"tiermem:janitor:{mem.store.uri}"
    background.modify_job(janitor_id, next_run_time=datetime.now().astimezone())
    background.resume()

    assert done.wait(WAIT)
    (event,) = events
    assert (event.job_id, event.code, event.exception) == (janitor_id, EVENT_JOB_EXECUTED, None)
    assert event.retval["facts_archived"] == 1
    assert [f.status for f in mem.tiers.facts(ctx, include_inactive=True) if f.id == fact.id] == ["archived"]


async def test_start_now_runs_every_job_on_an_asyncio_scheduler(mem: MemorySystem) -> None:
    ctx = MemoryContext(user_id="u-1", session_id="s-1")
    await mem.capture(ctx, [{"role": "user", "content": "I work as a nurse in Porto."}])
    loop = asyncio.get_running_loop()
    finished: dict[str, Any] = {}
    all_done = asyncio.Event()

    def listener(event: JobExecutionEvent) -> None:
        finished[event.job_id.split(":")[1]] = event.retval
        if len(finished) == len(JOBS):
            loop.call_soon_threadsafe(all_done.set)

    scheduler = AsyncIOScheduler()
    scheduler.add_listener(listener, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
    schedule_jobs(mem, scheduler, start_now=True)
    scheduler.start()
    try:
        await asyncio.wait_for(all_done.wait(), WAIT)
    finally:
        scheduler.shutdown(wait=False)

    assert set(finished) == set(JOBS)
    assert all(isinstance(report, dict) for report in finished.values())  # None would mean the job raised
    assert await wait_for_jobs(1.0) == 0


async def test_a_failing_job_is_logged_and_does_not_raise(
    mem: MemorySystem, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(mem: MemorySystem, now: datetime | None) -> Any:
        raise RuntimeError("disk full")

    monkeypatch.setitem(JOBS, "janitor", broken)
    schedule_jobs(mem, AsyncIOScheduler())  # registers the system under its key

    result = await run_job_async("janitor", mem.store.uri)

    assert result is None
    assert "job janitor failed" in caplog.text


async def test_a_job_for_a_system_not_registered_here_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    assert await run_job_async("janitor", "/nowhere/store") is None
    assert "no system registered" in caplog.text


async def test_wait_for_jobs_with_nothing_in_flight_returns_at_once() -> None:
    assert await wait_for_jobs(0.1) == 0


# -- persistent job store ---------------------------------------------------------------------


def test_a_sqlalchemy_job_store_persists_the_jobs(mem: MemorySystem, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    first = schedule_jobs(mem, BackgroundScheduler(), jobstore_url=url)
    first.start(paused=True)
    first.shutdown(wait=True)

    stored = SQLAlchemyJobStore(url=url)
    stored.start(BackgroundScheduler(), "tiermem")  # type: ignore[no-untyped-call]
    try:
        persisted = {job.id: (job.max_instances, job.coalesce) for job in stored.get_all_jobs()}
    finally:
        stored.shutdown()

    assert (tmp_path / "jobs.sqlite").is_file()
    assert persisted == dict.fromkeys(job_ids(mem), (1, True))


def test_a_second_worker_on_the_same_job_store_keeps_one_job_per_name(mem: MemorySystem, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    first = schedule_jobs(mem, BackgroundScheduler(), jobstore_url=url)
    first.start(paused=True)
    second = schedule_jobs(mem, BackgroundScheduler(), jobstore_url=url)
    second.start(paused=True)
    try:
        ids = [job.id for job in second.get_jobs(jobstore="tiermem")]
    finally:
        second.shutdown(wait=True)
        first.shutdown(wait=True)

    assert sorted(ids) == sorted(job_ids(mem))


def test_scheduling_twice_with_a_job_store_keeps_one_job_per_name(
    mem: MemorySystem, background: BackgroundScheduler, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    schedule_jobs(mem, background, jobstore_url=url)
    schedule_jobs(mem, background, jobstore_url=url)
    background.start(paused=True)

    assert {job.id for job in background.get_jobs()} == job_ids(mem)


async def test_workers_of_both_kinds_can_share_a_job_store(
    mem: MemorySystem, clock: FrozenClock, background: BackgroundScheduler, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    ctx = MemoryContext(user_id="u-1")
    mem.tiers.add_semantic_fact(ctx, "The user visited Lisbon in May.")
    clock.advance(days=30)
    done = threading.Event()
    events: list[JobExecutionEvent] = []

    def listener(event: JobExecutionEvent) -> None:
        if asyncio.iscoroutine(event.retval):
            event.retval.close()  # what the background worker got instead of a report; close it quietly
        events.append(event)
        done.set()

    background.add_listener(listener, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
    schedule_jobs(mem, background, jobstore_url=url)
    background.start()  # worker 1: a sync app's mem.start_jobs(jobstore_url=...)
    other = schedule_jobs(  # worker 2: `tiermem worker` (asyncio) on the same job store, scheduled last
        mem, AsyncIOScheduler(), jobstore_url=url, start_now=True,
        consolidation=None, digests=None, idle_sessions=None, retries=None,
    )  # fmt: skip
    other.start(paused=True)
    try:
        background.wakeup()  # worker 1 picks up the due janitor from the shared store
        # Wait off the loop: the job runs on this loop, beside the captures it must not race.
        assert await asyncio.to_thread(done.wait, WAIT)
    finally:
        other.shutdown(wait=False)

    assert isinstance(events[0].retval, dict)
    assert mem.tiers.facts(ctx) == []
