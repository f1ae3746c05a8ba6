"""Governance and erasure beside capture and consolidation, at scale (issue 33): the governance census.

The scenario of ``tests/test_faults.py`` (``tests/faults/governed.py``), larger: ``--processes`` real
processes at once, each capturing ``--sessions`` x ``--turns`` turns for each of its users (``--users`` in
all, side by side), ending and consolidating each session, governing another process's users (``--ops``
pieces each: pin, update, forget, feedback after a recall, two updates of one fact at once, an attempt
on another user's fact) and erasing ``--erase`` users in all mid-session while work on them runs.

The census reads every row of every table: lost (a turn of a user kept missing from a tier, a governance
change undone), duplicated (an id twice, a turn twice in a tier, two active versions of one fact),
resurrected (anything of an erased user at the end), cross-user (a row saying what another user said,
another user's fact changed). Writes its section of ``bench/RESULTS-faults.md`` (repo root):

    python bench/faults_governance.py --processes 4 --users 8 --sessions 4 --turns 10 --ops 12 --erase 2
    python bench/faults_governance.py --users 4 --sessions 2 --turns 4 --out -   # quick, prints only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
from pathlib import Path

from faults import ROOT, measured_by  # the census's imports and paths are set up there

from tests.faults.census import TIERS
from tests.faults.governed import LATENCY, Governed, governed
from tiermem.memory.testing import forbid_real_model_requests

HEADING = "## Governance and erasure beside capture and consolidation"


def section(outcome: Governed, args: argparse.Namespace) -> str:
    """The measured table and what each process did, as a section of RESULTS-faults.md."""
    found, census = outcome.governance, outcome.census
    kept = census.expected
    ok = sum(1 for op in outcome.ops if op["outcome"] in ("ok", "refused"))
    reached = " | ".join(str(census.reached.get(t, 0)) for t in TIERS)
    erased = outcome.notes["erased"]
    return "\n".join(
        [
            HEADING,
            "",
            measured_by("faults_governance.py"),
            "",
            f"{args.processes} processes at once, {args.users} users ({args.sessions} sessions x {args.turns} turns",
            f"each, {args.users * args.sessions * args.turns} turns), {args.ops} pieces of governance per process,",
            f"{len(erased)} users erased mid-session while work on them ran; a fake model behind real litellm,",
            f"healthy, answering after {LATENCY} s. Each count is read from every row of every table; each must be 0.",
            "",
            "| turns of users kept | " + " | ".join(TIERS) + " | governance done | erased "
            "| lost | duplicated | resurrected | cross-user | failures | wall s |",
            "|---" * (len(TIERS) + 9) + "|",
            f"| {kept} | {reached} | {ok} of {len(outcome.ops)} | {len(erased)} | {found.lost} | {found.duplicated} "
            f"| {found.resurrected} | {found.cross_user} | {len(found.failures)} | {outcome.seconds:.0f} |",
            "",
            f"- governance by kind and outcome: {json.dumps(outcome.notes['ops'], sort_keys=True)}",
            "  (*no fact*: the user was being erased before a fact was free to act on; *skipped*, *erased*:",
            "  begun too late, or overtaken by the erasure, as the fence means; *refused*: another user's fact)",
            f"- erased: {json.dumps(erased, sort_keys=True)}",
            f"- retry_pending afterwards: {json.dumps(outcome.notes['retry'], sort_keys=True)}",
            *(f"  - problem: {p}" for p in [*found.problems(), *census.problems()][:30]),
            "",
        ]
    )


def write(path: Path, text: str) -> None:
    """Replace this bench's section of ``path`` (or append it), keeping the rest."""
    old = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(HEADING) + r".*?(?=^## |\Z)", re.S | re.M)
    new = pattern.sub(lambda _: text + "\n", old) if pattern.search(old) else old.rstrip("\n") + "\n\n" + text
    path.write_text(new.rstrip("\n") + "\n")


async def main(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory() as folder:
        outcome = await governed(
            Path(folder), processes=args.processes, users=args.users, sessions=args.sessions, turns=args.turns,
            ops=args.ops, erase=args.erase, seed=args.seed,
        )  # fmt: skip
    return section(outcome, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4, help="processes at once")
    parser.add_argument("--users", type=int, default=8, help="users in all, spread over the processes")
    parser.add_argument("--sessions", type=int, default=4, help="sessions per user")
    parser.add_argument("--turns", type=int, default=10, help="turns per session")
    parser.add_argument("--ops", type=int, default=12, help="pieces of governance per process")
    parser.add_argument("--erase", type=int, default=2, help="users erased mid-run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-faults.md"), help="'-' prints only")
    arguments = parser.parse_args()
    forbid_real_model_requests()
    report = asyncio.run(main(arguments))
    print(report)
    if arguments.out != "-":
        write(Path(arguments.out), report)
