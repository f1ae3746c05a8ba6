"""A worker process of the fault suite, run by its file path: ``python child.py MODE CONFIG_JSON [INDEX GO]``.

Modes:

- ``capture``: capture the turns listed in ``config["specs"]`` (a JSON file) in order, through the fault
  model, appending each turn's index to ``config["progress"]`` once its capture returned. Killed with
  SIGKILL at random points by the kill test, or run twice at once into one session.
- ``consolidate``: run the consolidation job once (``tiermem.jobs.run_consolidation``, what a worker runs).
- ``worker``: a worker (``MemorySystem.run_worker``, as ``tiermem worker`` runs it) sharing the APScheduler
  job store ``config["jobstore"]``, stopped once no episode waits for consolidation.
- ``traffic``: capture, consolidation, governance and erasure at once (``traffic.py``; the governance
  scenario of ``governed.py``).

With ``INDEX GO`` (see ``tests.subprocesses.run_together``) the process touches ``ready-INDEX`` beside
``GO`` once set up and waits for ``GO``. The repository is not importable here (its ``memory/`` and
``jobs/`` folders must not shadow the installed package): the fault model is loaded from its file.
"""

from __future__ import annotations

import sys

sys.path.pop(0)  # this file's folder, put first by `python child.py`: nothing of the repository is imported

import asyncio
import importlib.util
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from tiermem import LLM, MemoryContext, MemorySystem, system
from tiermem.jobs import run_consolidation
from tiermem.memory.testing import HashingEmbedder
from tiermem.pipelines import LLMStages


def _sibling(name: str) -> ModuleType:
    """The module ``name`` beside this file, loaded by its path."""
    spec = importlib.util.spec_from_file_location(f"tiermem_fault_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _system(config: dict[str, Any]) -> tuple[MemorySystem, Any]:
    model = _sibling("model")
    faults = model.Faults(**config.get("faults", {"failure_rate": 0.0, "invalid_rate": 0.0}))
    fake = model.TokenModel(faults, log=config.get("log"), latency=float(config.get("latency", 0.0)))
    retries = int(config.get("num_retries", 0))
    llm = LLM(fake.model, num_retries=retries, validation_retries=retries, retry_backoff=0.01)
    mem = system(
        model=LLMStages(llm),
        store=config["store"],
        storage_options=config.get("storage_options"),
        embedder=HashingEmbedder(64),
        digest=False,
    )
    return mem, fake


def _released(rest: list[str]) -> None:
    """Wait for the go file of ``run_together``, once set up."""
    if len(rest) < 2:
        return
    index, go = rest[0], Path(rest[1])
    (go.parent / f"ready-{index}").touch()
    deadline = time.monotonic() + 300  # a bound for a slow machine, not an expected duration
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.005)


async def capture(config: dict[str, Any], rest: list[str]) -> dict[str, Any]:
    mem, _ = _system(config)
    specs = json.loads(Path(config["specs"]).read_text())
    progress = Path(config["progress"]) if config.get("progress") else None
    _released(rest)
    duplicates = deferred = 0
    for spec in specs:
        ctx = MemoryContext(user_id=spec["user_id"], session_id=spec["session_id"])
        at = datetime.fromisoformat(spec["at"]) if spec.get("at") else None
        result = await mem.capture(ctx, spec["messages"], idempotency_key=spec.get("key"), at=at)
        duplicates += int(result.duplicate)
        deferred += int(result.deferred)
        if progress is not None:
            with progress.open("a") as out:
                out.write(f"{spec['index']}\n")
    return {"captured": len(specs), "duplicates": duplicates, "deferred": deferred}


async def consolidate(config: dict[str, Any], rest: list[str]) -> dict[str, Any]:
    mem, _ = _system(config)
    _released(rest)
    return await run_consolidation(mem)


async def worker(config: dict[str, Any], rest: list[str]) -> dict[str, Any]:
    mem, _ = _system(config)
    _released(rest)
    stop = asyncio.Event()
    running = asyncio.create_task(
        mem.run_worker(
            stop,
            jobstore_url=config["jobstore"],
            run_now=True,
            consolidation=timedelta(seconds=1),
            janitor=None,  # only consolidation: what two workers must not do twice
            digests=None,
            idle_sessions=None,
            retries=None,
        )
    )
    deadline = datetime.now(UTC) + timedelta(seconds=240)  # a bound for a slow machine
    while datetime.now(UTC) < deadline and not running.done():
        await asyncio.sleep(0.5)
        if not await asyncio.to_thread(mem.tiers.unfinished_episodes, None, include_parked=True):
            break
    stop.set()
    abandoned = await running
    return {"abandoned": abandoned}


async def traffic(config: dict[str, Any], rest: list[str]) -> dict[str, Any]:
    mem, _ = _system(config)
    await mem.stats(MemoryContext(user_id="u-0"))  # the store and its tables opened before the go
    _released(rest)
    report: dict[str, Any] = await _sibling("traffic").run(mem, config, int(rest[0]))
    return report


MODES = {"capture": capture, "consolidate": consolidate, "worker": worker, "traffic": traffic}

if __name__ == "__main__":
    mode, raw, *rest = sys.argv[1:]
    report = asyncio.run(MODES[mode](json.loads(raw), rest))
    print(json.dumps(report))
