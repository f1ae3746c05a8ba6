"""Fault injection at scale: the census of every turn through every tier (issue 11, item 8).

The scenarios of ``tests/test_faults.py`` (``tests/faults/scenarios.py``), larger:

- ``failing model``: ``--turns`` turns (5 users side by side, sessions of 10 turns, keys derived by the
  library) through a fake model behind real litellm that fails 30% of requests (connection reset, 503,
  timeout) and answers invalid output for 10%; every session ended, every user consolidated; then the
  model heals and ``retry_pending()`` runs (again with ``include_parked=True`` if anything parked). Twice:
  with the LLM's own retries off (every fault reaches the pipeline) and at the library's defaults
  (2 transient and 2 validation retries, backoff shortened to 10 ms).
- ``kill -9``: 2 processes capture a user each (caller keys and ``at=`` in turn) through the faulty
  model and are SIGKILLed at random points, ``--kill-rounds`` times; then every capture is rerun.
- ``two writers``: 2 processes x ``--writers`` distinct turns into one session at once (past about 2 x 100,
  one episode's observations no longer fit one consolidation prompt: the facts column shows what fits).
- ``two workers``: 2 processes consolidate 100 waiting episodes at once, by the consolidation job and as
  workers sharing one APScheduler job store; the model is healthy, so each episode should be seen by
  exactly one consolidation request.

Every count comes from reading every row of every table (duplicates included). Usage (repo root):

    python bench/faults.py --turns 1000        # writes bench/RESULTS-faults.md
    python bench/faults.py --turns 150 --out -  # quick, prints only
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch litellm's cost map
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.faults holds the scenarios, the fake model and the census
sys.path.insert(0, str(ROOT / "bench"))

from _machine import cpu_name, package_version  # type: ignore[import-not-found]  # noqa: E402

from tests.faults.census import TIERS  # noqa: E402
from tests.faults.scenarios import Outcome, failing_model, kill_9, two_workers, two_writers  # noqa: E402
from tiermem.memory.testing import forbid_real_model_requests  # noqa: E402

warnings.filterwarnings("ignore", message=r"Items? .* `ReadOnly` qualifier")
TABLES = ("turns", "working", "episodes", "facts")


def _row(name: str, outcome: Outcome) -> str:
    census = outcome.census
    reached = [f"{census.reached.get(t, 0)}" for t in TIERS]
    doubled = sum(census.doubled.values())
    duplicates = sum(census.duplicate_rows.values())
    calls = sum(sum(c.values()) for c in outcome.calls.values())
    failed = sum(c["error"] + c["invalid"] for c in outcome.calls.values())
    verdict = f"{len(census.problems())} problems" if census.problems() else "ok"
    return (
        f"| {name} | {census.expected} | {' | '.join(reached)} | {doubled} | {duplicates} "
        f"| {census.same_text_facts} | {calls} ({failed} faulty) | {outcome.seconds:.0f} | {verdict} |"
    )


HEADER = (
    "| scenario | turns | journaled | observed | in working | in episodes | consolidated | in facts "
    "| turns doubled | duplicate rows | same-text facts | model requests | wall s | census |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def measured_by(script: str) -> str:
    """The line naming the command that ran, the date and the machine."""
    command = f"python bench/{script} " + shlex.join(sys.argv[1:])
    return (
        f"`{command}` on {datetime.now(UTC):%Y-%m-%d} — {cpu_name()}, {os.cpu_count()} cores "
        f"(shared with other jobs: wall times are upper bounds), Python {platform.python_version()}, "
        f"lancedb {package_version('lancedb')}, litellm {package_version('litellm')}."
    )


async def main(args: argparse.Namespace) -> str:
    users = 5
    sessions = max(args.turns // (users * 10), 1)
    runs: list[tuple[str, Callable[[Path], Awaitable[Outcome]]]] = [
        (
            "failing model, LLM retries off",
            lambda d: failing_model(d, users=users, sessions=sessions, turns=10, seed=args.seed),
        ),
        (
            "failing model, LLM retries 2+2",
            lambda d: failing_model(d, users=users, sessions=sessions, turns=10, seed=args.seed + 1, num_retries=2),
        ),
        (
            f"kill -9, 2 processes x {args.kill_rounds} rounds",
            lambda d: kill_9(d, processes=2, sessions=5, turns=20, rounds=args.kill_rounds, seed=args.seed + 2),
        ),
        (
            f"two writers, 2 x {args.writers} into one session",
            lambda d: two_writers(d, turns=args.writers, seed=args.seed + 3),
        ),
        (
            "two workers, consolidation job",
            lambda d: two_workers(d, mode="consolidate", users=5, sessions=20, seed=args.seed + 4),
        ),
        (
            "two workers, shared job store",
            lambda d: two_workers(d, mode="worker", users=5, sessions=20, seed=args.seed + 5),
        ),
    ]
    rows, details = [], []
    for name, run in runs:
        if args.only and args.only not in name:
            continue
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            outcome = await run(Path(folder))
            outcome.seconds = time.perf_counter() - started
        rows.append(_row(name, outcome))
        print(rows[-1], flush=True)
        calls = {stage: dict(c) for stage, c in sorted(outcome.calls.items())}
        details.append(f"- **{name}**: model requests {calls}; {outcome.notes}")
        details += [f"  - problem: {p}" for p in outcome.census.problems()]
    return "\n".join(
        [
            "# Fault injection: the census",
            "",
            measured_by("faults.py"),
            "",
            "Each column after *turns* counts the turns that reached the tier (the census reads every row of",
            "every table): journaled once, observed, in a working entry, in exactly one episode's provenance,",
            "in a consolidated episode, in an active fact naming the turn. *turns doubled*: turns found twice in",
            "some tier; *duplicate rows*: rows sharing an id in any table. Model requests include the failed",
            "and invalid ones the fake served on purpose.",
            "",
            HEADER,
            *rows,
            "",
            *details,
            "",
        ]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000, help="turns of the failing-model runs")
    parser.add_argument("--writers", type=int, default=200, help="turns per process of the two-writers run")
    parser.add_argument("--kill-rounds", type=int, default=5, help="rounds of kill -9 (2 processes each)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", help="run only the scenarios whose name contains this")
    parser.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-faults.md"), help="'-' prints only")
    arguments = parser.parse_args()
    forbid_real_model_requests()
    report = asyncio.run(main(arguments))
    print(report)
    if arguments.out != "-":
        Path(arguments.out).write_text(report)
