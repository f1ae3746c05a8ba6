"""APScheduler wiring: the only module that imports apscheduler.

Jobs are stored by reference (``tiermem.jobs._scheduler:run_job`` with the job name and a system key), so
a persistent SQLAlchemy job store works and several workers can share one; the system itself is
looked up in this process's registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler

from tiermem.memory._errors import ConfigurationError

from ._host import MaintainedSystem
from ._janitor import run_janitor
from ._pipeline_runs import close_idle_sessions, retry_pending, run_consolidation, run_digests

if TYPE_CHECKING:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

__all__ = ["DEFAULT_INTERVALS", "JOBS", "run_job", "run_job_async", "schedule_jobs", "wait_for_jobs"]

log = logging.getLogger("tiermem.jobs.scheduler")

Job = Callable[[MaintainedSystem, datetime | None], Awaitable[Mapping[str, object]]]


async def _janitor(mem: MaintainedSystem, now: datetime | None) -> Mapping[str, object]:
    return (await run_janitor(mem, now)).as_dict()


JOBS: dict[str, Job] = {
    "janitor": _janitor,
    "consolidation": run_consolidation,
    "digests": run_digests,
    "idle_sessions": close_idle_sessions,
    "retries": retry_pending,
}
DEFAULT_INTERVALS: dict[str, timedelta] = {
    "janitor": timedelta(hours=6),
    "consolidation": timedelta(minutes=15),
    "digests": timedelta(hours=1),
    "idle_sessions": timedelta(minutes=5),
    "retries": timedelta(minutes=10),
}

_systems: dict[str, MaintainedSystem] = {}
_loops: dict[str, asyncio.AbstractEventLoop] = {}
_in_flight: set[asyncio.Task[Mapping[str, object] | None]] = set()


def _key(mem: MaintainedSystem) -> str:
    return mem.store.uri


async def run_job_async(name: str, key: str) -> Mapping[str, object] | None:
    """The callable an asyncio scheduler runs: one job for one registered system."""
    mem = _systems.get(key)
    if mem is None:
        log.warning("job %s: no system registered for %s in this process", name, key)
        return None
    task = asyncio.current_task()
    if task is not None:
        _in_flight.add(task)
    try:
        return await JOBS[name](mem, None)
    except Exception:  # a failing job must not kill the scheduler; it logs and runs again next time
        log.exception("job %s failed", name)
        return None
    finally:
        if task is not None:
            _in_flight.discard(task)


def run_job(name: str, key: str) -> Mapping[str, object] | None:
    """The one callable every scheduler stores (so workers of either kind can share a job store).

    When the system lives on a running event loop (an asyncio scheduler or app), the job runs
    there, beside the captures it must not race; otherwise on a fresh loop in this thread.
    """
    loop = _loops.get(key)
    if loop is not None and loop.is_running():
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if current is not loop:
            return asyncio.run_coroutine_threadsafe(run_job_async(name, key), loop).result()
    return asyncio.run(run_job_async(name, key))


async def wait_for_jobs(timeout: float) -> int:
    """Let the jobs in flight finish (up to ``timeout`` seconds); returns how many were abandoned."""
    pending = [t for t in _in_flight if t is not asyncio.current_task()]
    if not pending:
        return 0
    _, still = await asyncio.wait(pending, timeout=timeout)
    return len(still)


def _create_jobs_table(store: SQLAlchemyJobStore) -> None:
    """Create the shared job table now, tolerating a worker that creates it at the same moment.

    APScheduler creates it at start with "create if missing", which two workers starting together
    both decide to do; the loser's CREATE TABLE fails ("table ... already exists") and so would its start.
    """
    from sqlalchemy.exc import OperationalError, ProgrammingError

    try:
        store.jobs_t.create(store.engine, checkfirst=True)
    except (OperationalError, ProgrammingError) as exc:
        if "already exists" not in str(exc):
            raise


def schedule_jobs(
    system: MaintainedSystem,
    scheduler: BaseScheduler | None = None,
    *,
    jobstore_url: str | None = None,
    start_now: bool = False,
    **intervals: timedelta | None,
) -> BaseScheduler:
    """Add every job (``max_instances=1``, coalescing, stable ids, ``replace_existing``).

    ``intervals`` override :data:`DEFAULT_INTERVALS` by job name; ``None`` leaves a job out.
    Without a scheduler, an AsyncIOScheduler is made when an event loop runs, else a background one.
    """
    unknown = set(intervals) - set(JOBS)
    if unknown:
        raise ConfigurationError(f"unknown jobs {sorted(unknown)}; choose from {sorted(JOBS)}")
    if scheduler is None:
        try:
            asyncio.get_running_loop()
            scheduler = AsyncIOScheduler()
        except RuntimeError:
            scheduler = BackgroundScheduler()
    if jobstore_url is not None:
        try:
            from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        except ImportError:  # APScheduler's own message is a bare ImportError
            raise ConfigurationError("--jobstore needs SQLAlchemy: pip install 'tiermem[worker]'") from None

        store = SQLAlchemyJobStore(url=jobstore_url)
        _create_jobs_table(store)
        with contextlib.suppress(ValueError):  # already added by an earlier schedule_jobs on this scheduler
            scheduler.add_jobstore(store, alias="tiermem")
    key = _key(system)
    _systems[key] = system
    try:
        _loops[key] = asyncio.get_running_loop()
    except RuntimeError:
        _loops.pop(key, None)
    for name in JOBS:
        every = intervals.get(name, DEFAULT_INTERVALS[name])
        if every is None:
            continue
        # An explicit next_run_time=None would add the job paused, so pass it only to run at once.
        first: dict[str, object] = {"next_run_time": datetime.now().astimezone()} if start_now else {}
        scheduler.add_job(
            run_job,
            trigger="interval",
            seconds=max(every.total_seconds(), 1.0),
            args=[name, key],
            id=f"tiermem:{name}:{key}",
            name=f"tiermem {name}",
            replace_existing=True,
            max_instances=1,
            coalesce=True,
            jobstore="tiermem" if jobstore_url is not None else "default",
            **first,
        )
    return scheduler
