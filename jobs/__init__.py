"""Scheduled work: plain async jobs and the APScheduler wiring."""

from __future__ import annotations

from ._janitor import JanitorReport, Stopped, run_janitor
from ._pipeline_runs import close_idle_sessions, retry_pending, run_consolidation, run_digests
from ._scheduler import DEFAULT_INTERVALS, JOBS, run_job, run_job_async, schedule_jobs, wait_for_jobs

__all__ = [
    "DEFAULT_INTERVALS",
    "JOBS",
    "JanitorReport",
    "Stopped",
    "close_idle_sessions",
    "retry_pending",
    "run_consolidation",
    "run_digests",
    "run_janitor",
    "run_job",
    "run_job_async",
    "schedule_jobs",
    "wait_for_jobs",
]
