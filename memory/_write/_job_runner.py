"""Scheduled jobs run by the system itself: ``start_jobs`` in this process, ``run_worker`` on an event loop.

A part of :class:`~._write_side.MemorySystem`, which delegates to it name by name; the jobs and their
scheduling are :mod:`tiermem.jobs` (imported on first use: APScheduler is loaded only when jobs run).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from .._errors import ConfigurationError

__all__ = ["JobRunner"]


class JobRunner:
    """Starts, stops and runs the scheduled jobs over the system that holds it."""

    def __init__(self, system: Any) -> None:
        self.system: Any = system  # the MemorySystem (what tiermem.jobs maintains); Any: it imports this module
        self.scheduler: Any = None  # start_jobs's, until stop_jobs

    def start_jobs(
        self,
        /,  # **intervals: delegate() needs self positional-only to pass them on
        scheduler: Any = None,
        *,
        jobstore_url: str | None = None,
        start_now: bool = False,
        **intervals: timedelta | None,
    ) -> Any:
        """Run the scheduled jobs in this process (an APScheduler scheduler is made if none is given).

        ``intervals`` override the default interval by job name (None leaves a job out); ``jobstore_url``
        and ``start_now`` as :func:`tiermem.jobs.schedule_jobs` takes them.
        """
        from tiermem.jobs import schedule_jobs

        if self.scheduler is not None:
            raise ConfigurationError("jobs are already running; call stop_jobs() first")
        self.scheduler = schedule_jobs(
            self.system, scheduler, jobstore_url=jobstore_url, start_now=start_now, **intervals
        )
        self.scheduler.start()
        return self.scheduler

    def stop_jobs(self, *, wait: bool = True) -> None:
        """Stop the in-process jobs started by :meth:`start_jobs`."""
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=wait)
            self.scheduler = None

    async def run_worker(
        self,
        /,
        stop: asyncio.Event,
        *,
        jobstore_url: str | None = None,
        run_now: bool = False,
        grace: float = 30.0,
        **intervals: timedelta | None,
    ) -> int:
        """Run the scheduled jobs on this event loop until ``stop`` is set; returns jobs abandoned.

        Every write is one atomic LanceDB commit and every stage is idempotent, so a job abandoned
        after ``grace`` seconds leaves nothing half-written; the next run redoes its work. Several
        workers on one store share the work through per-user leases.
        """
        from tiermem.jobs import schedule_jobs, wait_for_jobs

        scheduler = schedule_jobs(self.system, jobstore_url=jobstore_url, start_now=run_now, **intervals)
        scheduler.start()
        try:
            await stop.wait()
            scheduler.pause()  # no new runs; the ones in flight get the grace period
            return await wait_for_jobs(grace)
        finally:
            scheduler.shutdown(wait=False)
