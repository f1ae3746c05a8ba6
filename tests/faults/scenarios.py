"""The four faults as runnable scenarios, sized by the caller: the test suite runs them small, the bench large.

Each returns an :class:`Outcome`: the census after the run, the model requests it took and its wall time.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from tests.subprocesses import clean_env, run_together
from tiermem import LLM, MemoryContext, MemorySystem, system
from tiermem.memory.testing import FrozenClock, HashingEmbedder, Where
from tiermem.pipelines import LLMStages

from .census import Census, Spec, take_census, workload
from .model import Faults, TokenModel, read_log, tokens_in

__all__ = ["FAULTY", "Outcome", "build", "failing_model", "faulty", "kill_9", "two_workers", "two_writers"]

FAULTY: dict[str, float] = {"failure_rate": 0.30, "invalid_rate": 0.10}
"""What fails: 30% of requests, and 10% answer invalid output."""
CHILD = Path(__file__).with_name("child.py")
LAUNCH = f"import runpy; runpy.run_path({str(CHILD)!r}, run_name='__main__')"  # run_together runs `python -c`
STARTUP = 300.0  # seconds: a bound for a slow, shared machine, not an expected duration


@dataclass(kw_only=True)
class Outcome:
    """A scenario's census, the model requests it took (stage -> outcome -> count) and what else it saw."""

    census: Census
    calls: dict[str, Counter[str]] = field(default_factory=dict)
    seconds: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)

    def add_calls(self, records: Sequence[dict[str, Any]]) -> None:
        for record in records:
            self.calls.setdefault(record["stage"], Counter())[record["outcome"]] += 1


def faulty(seed: int) -> Faults:
    """The faults of :data:`FAULTY`, drawn from ``seed``."""
    return Faults(failure_rate=FAULTY["failure_rate"], invalid_rate=FAULTY["invalid_rate"], seed=seed)


def build(store: str | Path, fake: TokenModel, *, num_retries: int = 0) -> MemorySystem:
    """A system on ``store`` answered by ``fake`` through litellm.

    ``num_retries``: the LLM's own transient and validation retries (0: every fault reaches the pipeline);
    they wait 10 ms, not half a second, so a run's time is the library's, not sleeps.
    """
    llm = LLM(fake.model, num_retries=num_retries, validation_retries=num_retries, retry_backoff=0.01)
    return system(
        model=LLMStages(llm), store=str(store), embedder=HashingEmbedder(64), clock=FrozenClock(), digest=False
    )


def _parked(mem: MemorySystem) -> bool:
    """Anything out of attempts: a turn ("failed") or an episode ("parked"), any user's."""
    turns = mem.tiers.pending_turns(None, include_parked=True)
    episodes = mem.tiers.unfinished_episodes(None, include_parked=True)
    return any(t.status == "failed" for t in turns) or any(e.status == "parked" for e in episodes)


async def _heal_and_retry(mem: MemorySystem, fake: TokenModel, outcome: Outcome) -> None:
    """The model behaves again: ``retry_pending()``, and again with ``include_parked`` if anything parked."""
    fake.faults.enabled = False
    outcome.notes["retry"] = vars(await mem.retry_pending())
    if await asyncio.to_thread(_parked, mem):
        outcome.notes["retry_parked"] = vars(await mem.retry_pending(include_parked=True))


async def _end_and_consolidate(mem: MemorySystem, specs: Sequence[Spec]) -> None:
    for user, session in sorted({(s.user_id, s.session_id) for s in specs}):
        await mem.end_session(MemoryContext(user_id=user, session_id=session))
    for user in sorted({s.user_id for s in specs}):
        await mem.consolidate(MemoryContext(user_id=user))


def _config(store: str, folder: Path, name: str, specs: Sequence[Spec] | None = None, **extra: Any) -> str:
    """A child process's configuration (see ``child.py``), its turns written beside it."""
    config: dict[str, Any] = {"store": store, **extra}
    if specs is not None:
        path = folder / f"{name}.json"
        path.write_text(json.dumps([s.as_json() for s in specs]))
        config["specs"] = str(path)
    return json.dumps(config)


# -- 1. a model that fails 30% of requests and answers invalid output for 10% ----------------------


async def _user(mem: MemorySystem, specs: Sequence[Spec], seen: Counter[str]) -> None:
    sessions: dict[str, list[Spec]] = defaultdict(list)
    for spec in specs:
        sessions[spec.session_id].append(spec)
    for sid, turns in sessions.items():
        for spec in turns:
            result = await mem.capture(spec.ctx, spec.messages, idempotency_key=spec.key, at=spec.at)
            seen["captures deferred"] += int(result.deferred)
        seen["sessions deferred"] += int((await mem.end_session(turns[0].ctx, sid)).deferred)
    seen["consolidations deferred"] += int((await mem.consolidate(MemoryContext(user_id=specs[0].user_id))).deferred)


async def failing_model(
    folder: Path, *, users: int, sessions: int, turns: int, seed: int, num_retries: int = 0
) -> Outcome:
    """Users side by side on one event loop (an app serving several): every turn captured, every session
    ended, every user consolidated through the faulty model; then it heals and ``retry_pending()`` runs."""
    started = time.perf_counter()
    fake = TokenModel(faulty(seed), log=folder / "calls.jsonl")
    mem = build(folder / "store", fake, num_retries=num_retries)
    specs = workload(users=users, sessions=sessions, turns=turns, seed=seed)
    seen: Counter[str] = Counter()
    by_user: dict[str, list[Spec]] = defaultdict(list)
    for spec in specs:
        by_user[spec.user_id].append(spec)
    await asyncio.gather(*(_user(mem, user_specs, seen) for user_specs in by_user.values()))
    outcome = Outcome(census=take_census(mem.store, specs), notes=dict(seen))
    await _heal_and_retry(mem, fake, outcome)
    outcome.census = take_census(mem.store, specs)
    outcome.add_calls(read_log(folder / "calls.jsonl"))
    outcome.seconds = time.perf_counter() - started
    return outcome


# -- 2. kill -9 of capturing processes at random points -----------------------------------------


def _kill_at_random(procs: Sequence[tuple[subprocess.Popen[str], Path, int]], rng: random.Random) -> list[int]:
    """SIGKILL each process once its progress passes a random turn, a random moment later (inside a capture).

    Returns how many captures each had returned when killed; a process that finishes first is not killed.
    """
    targets = [rng.randrange(1, max(total - 1, 2)) for _, _, total in procs]
    killed: list[int | None] = [None] * len(procs)
    deadline = time.monotonic() + STARTUP
    while None in killed and time.monotonic() < deadline:
        for i, (proc, progress, total) in enumerate(procs):
            done = len(progress.read_text().split()) if progress.exists() else 0
            if killed[i] is not None:
                continue
            if proc.poll() is not None:
                if proc.returncode != 0:
                    raise AssertionError(f"capturing process failed: {proc.communicate()[1][-3000:]}")
                killed[i] = total
            elif done >= targets[i]:
                time.sleep(rng.uniform(0, 0.2))
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
                killed[i] = len(progress.read_text().split())
        time.sleep(0.005)
    assert None not in killed, "the capturing processes never got far enough to be killed"
    return [k or 0 for k in killed]


async def kill_9(folder: Path, *, processes: int, sessions: int, turns: int, rounds: int, seed: int) -> Outcome:
    """``processes`` capture one user each (caller keys and ``at=`` in turn) through the faulty model and
    are killed at random points, ``rounds`` times (each round reruns every capture); then this process
    reruns every capture (their outcome was unknown), ends, consolidates, heals and retries."""
    started = time.perf_counter()
    store = str(folder / "store")
    fake = TokenModel(faulty(seed), log=folder / "calls.jsonl")
    mem = build(store, fake)  # the store exists before the processes race to create it
    everything = workload(users=processes, sessions=sessions, turns=turns, seed=seed, naming="mixed")
    groups = [[s for s in everything if s.user_id == f"u-{i}"] for i in range(processes)]
    rng = random.Random(seed)
    kills = 0
    for round_ in range(rounds):
        procs = []
        for i, specs in enumerate(groups):
            progress = folder / f"progress-{round_}-{i}"
            faults = {**FAULTY, "seed": seed * 1000 + round_ * 10 + i}
            config = _config(
                store,
                folder,
                f"specs-{i}",
                specs,
                faults=faults,
                progress=str(progress),
                log=str(folder / "calls.jsonl"),
            )
            proc = subprocess.Popen(
                [sys.executable, "-c", LAUNCH, "capture", config],
                cwd=folder,  # never the repository: see tests/subprocesses.py
                env=clean_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            procs.append((proc, progress, len(specs)))
        finished = _kill_at_random(procs, rng)
        for proc, _, _ in procs:
            proc.communicate()
            kills += int(proc.returncode == -signal.SIGKILL)
        outcome_notes_returned = sum(finished)
    before = {t.id for t in mem.store.query("turns", Where(eq={}))}
    rerun = [await mem.capture(s.ctx, s.messages, idempotency_key=s.key, at=s.at) for s in everything]
    outcome = Outcome(census=take_census(mem.store, everything))
    outcome.notes = {
        "kills": kills,
        "captures returned before the kills": outcome_notes_returned,
        "journaled before the rerun": len(before),
        "rerun returned the first turn": len(before & {r.turn.id for r in rerun}),
    }
    await _end_and_consolidate(mem, everything)
    await _heal_and_retry(mem, fake, outcome)
    outcome.census = take_census(mem.store, everything)
    outcome.add_calls(read_log(folder / "calls.jsonl"))
    outcome.seconds = time.perf_counter() - started
    return outcome


# -- 3. two processes capturing into one session -----------------------------------------------


async def two_writers(folder: Path, *, turns: int, seed: int) -> Outcome:
    """Two processes capture ``turns`` distinct turns each into one session at once, through the faulty
    model; then this process ends the session, consolidates, heals and retries."""
    started = time.perf_counter()
    store = str(folder / "store")
    fake = TokenModel(faulty(seed), log=folder / "calls.jsonl")
    mem = build(store, fake)
    groups = [
        [
            Spec(user_id="u-0", session_id="shared", index=s.index, token=s.token)
            for s in workload(users=1, sessions=1, turns=turns, seed=seed, prefix=name)
        ]
        for name in ("alpha", "beta")
    ]
    configs = [
        _config(
            store, folder, f"specs-{i}", specs, faults={**FAULTY, "seed": seed + 1 + i}, log=str(folder / "calls.jsonl")
        )
        for i, specs in enumerate(groups)
    ]
    outputs = run_together(LAUNCH, [["capture", config] for config in configs], folder)
    reports = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    specs = [s for group in groups for s in group]
    writer = {s.token: i for i, group in enumerate(groups) for s in group}
    journal = sorted(mem.store.query("turns", Where(eq={"session_id": "shared"})), key=lambda t: t.seq)
    order = [writer[t] for turn in journal for t in tokens_in(m.content for m in turn.messages) if t in writer]
    await _end_and_consolidate(mem, specs)
    # how often the session's seq order passes from one writer's turns to the other's: the captures raced
    switches = sum(a != b for a, b in pairwise(order))
    outcome = Outcome(census=take_census(mem.store, specs), notes={"processes": reports, "writer switches": switches})
    await _heal_and_retry(mem, fake, outcome)
    outcome.census = take_census(mem.store, specs)
    outcome.add_calls(read_log(folder / "calls.jsonl"))
    outcome.seconds = time.perf_counter() - started
    return outcome


# -- 4. two workers consolidating at once --------------------------------------------------------


async def two_workers(folder: Path, *, mode: str, users: int, sessions: int, seed: int) -> Outcome:
    """Episodes of ``users`` x ``sessions`` one-turn sessions wait; two processes consolidate at once,
    ``mode`` ``"consolidate"`` (the consolidation job) or ``"worker"`` (workers sharing a job store).

    ``notes["per episode"]``: how many consolidation requests saw each episode (1 each: none twice).
    """
    started = time.perf_counter()
    store = str(folder / "store")
    log = folder / "calls.jsonl"
    mem = build(store, TokenModel())
    specs = workload(users=users, sessions=sessions, turns=1, seed=seed)
    for spec in specs:
        await mem.capture(spec.ctx, spec.messages)
    for user, session in sorted({(s.user_id, s.session_id) for s in specs}):
        await mem.end_session(MemoryContext(user_id=user, session_id=session))
    config = _config(store, folder, "config", log=str(log), jobstore=f"sqlite:///{folder / 'jobs.db'}")
    run_together(LAUNCH, [[mode, config], [mode, config]], folder)
    calls = read_log(log)
    # encode_consolidate by default (the episodes summarised in the same call), consolidate on the session path
    consolidations = [c for c in calls if c["stage"] in ("consolidate", "encode_consolidate")]
    outcome = Outcome(census=take_census(mem.store, specs))
    outcome.add_calls(calls)
    outcome.notes = {
        "per episode": Counter(Counter(e for c in consolidations for e in c["subjects"]).values()),
        "episodes": len({e for c in consolidations for e in c["subjects"]}),
        "processes calling the model": len({c["pid"] for c in consolidations}),
    }
    outcome.seconds = time.perf_counter() - started
    return outcome
