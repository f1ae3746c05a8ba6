"""Governance and erasure beside capture and consolidation, in several processes at once (issue 33).

``processes`` processes run together (``child.py traffic``, see ``traffic.py``). Process ``p`` captures,
ends and consolidates the users ``u`` with ``u % processes == p``, governs those of process ``p - 1``
(pin, update, forget, feedback, two updates of one fact at once, an attempt on another user's fact) and
erases the users to erase whose capturing process is ``p - 2``, once about half their turns are
captured (mid-session) and work on them is under way.
Then this process ends and consolidates whatever is left of the users kept and takes two censuses:
the turns' (:mod:`.census`) and the governance census (:mod:`.governance_census`).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tiermem
from tests.subprocesses import run_together
from tiermem import MemoryContext

from .census import Census, take_census, workload
from .governance_census import GovernanceCensus, govern_census
from .model import TokenModel, read_log, tokens_in
from .scenarios import LAUNCH, Outcome, build

__all__ = ["LATENCY", "Governed", "governed"]

LATENCY = 0.3  # seconds per model answer: work is mid-call long enough to be overtaken by an erasure


@dataclass(kw_only=True)
class Governed(Outcome):
    """The turns' census (``census``), the governance census, and what the processes did."""

    governance: GovernanceCensus = field(default_factory=GovernanceCensus)
    ops: list[dict[str, Any]] = field(default_factory=list)
    erased: list[dict[str, Any]] = field(default_factory=list)


def _read_lines(folder: Path, pattern: str) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(folder.glob(pattern)) for line in path.read_text().splitlines()]


async def governed(
    folder: Path, *, processes: int, users: int, sessions: int, turns: int, ops: int, erase: int, seed: int
) -> Governed:
    """The scenario at this scale: ``users`` x ``sessions`` x ``turns`` turns, ``ops`` pieces of governance
    per process, ``erase`` users erased mid-run."""
    started = time.perf_counter()
    store = folder / "store"
    log = folder / "calls.jsonl"
    mem = build(store, TokenModel(log=log))  # the store exists before the processes open it
    await mem.stats(MemoryContext(user_id="u-0"))
    specs = workload(users=users, sessions=sessions, turns=turns, seed=seed)
    owner = {f"u-{u}": u % processes for u in range(users)}
    step = max(users // max(erase, 1), 1)
    erased = [f"u-{u}" for u in range(users - 1, -1, -step)][:erase]
    half = sessions * turns // 2 + turns // 2  # turns captured before the erasure: mid-session, mid-run
    configs = []
    for p in range(processes):
        mine = sorted((s for s in specs if owner[s.user_id] == p), key=lambda s: (s.session_id, s.index, s.user_id))
        path = folder / f"specs-{p}.json"
        path.write_text(json.dumps([{**s.as_json(), "token": s.token} for s in mine]))
        config = {
            "store": str(store),
            "folder": str(folder),
            "specs": str(path),
            "log": str(log),
            "latency": LATENCY,
            "seed": seed * 100 + p,
            "ops": ops,
            "govern": sorted(u for u, o in owner.items() if (o + 1) % processes == p),
            "erase": [[u, half] for u in erased if (owner[u] + 2) % processes == p],
        }
        configs.append(["traffic", json.dumps(config)])
    env = {"PYTHONPATH": str(Path(tiermem.__file__).resolve().parents[1])}  # the tree under test
    reports = [json.loads(out.strip().splitlines()[-1]) for out in run_together(LAUNCH, configs, folder, env=env)]
    done = _read_lines(folder, "erased.jsonl")
    gone = {d["user"] for d in done}
    kept = [s for s in specs if s.user_id not in gone]
    for user, session in sorted({(s.user_id, s.session_id) for s in kept}):
        await mem.end_session(MemoryContext(user_id=user, session_id=session))
    for user in sorted({s.user_id for s in kept}):
        await mem.consolidate(MemoryContext(user_id=user))
    retried = vars(await mem.retry_pending())
    governance_ops = _read_lines(folder, "ops-*.jsonl")
    rewritten = {
        t
        for op in governance_ops
        if op["kind"] in ("update", "update twice", "forget") and op.get("outcome") == "ok" and op["user"] not in gone
        for t in tokens_in([op["text"]])
    }
    census: Census = take_census(mem.store, kept, rewritten=rewritten)
    outcome = Governed(census=census, ops=governance_ops, erased=done)
    outcome.governance = govern_census(mem.store, specs, census, governance_ops, gone)
    failures = [f for r in reports for f in r["failures"]]
    outcome.governance.failures = failures
    outcome.notes = {
        "processes": processes,
        "erased": {d["user"]: {"captured before": d["captured before"], "purged": d["purged"]} for d in done},
        "ops": _tally(governance_ops),
        "retry": retried,
        "failures": len(failures),
    }
    outcome.add_calls(read_log(log))
    outcome.seconds = time.perf_counter() - started
    return outcome


def _tally(ops: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Pieces of governance by kind and outcome."""
    tally: dict[str, dict[str, int]] = defaultdict(dict)
    for op in ops:
        tally[op["kind"]][op["outcome"]] = tally[op["kind"]].get(op["outcome"], 0) + 1
    return dict(tally)
