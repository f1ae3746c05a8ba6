"""Capture latency as the agent sees it: awaited capture vs ``background=True`` vs the journal alone.

An agent captures a turn, then spends ``--think`` seconds on its own work (answering the next
message) before the next turn, as a chat agent does. What it waits for is the time inside
``capture``; the observer's model call (a fake LLM with ``--latency`` seconds, reached through
real litellm) is either awaited there or runs in the background queue during the agent's own
work. Also reported: the time from ``capture`` returning until the turn's observations are stored
(*visible*), for the awaited path 0 by construction.

Configurations (each ``--runs`` times, interleaved; medians of the runs' p50/p95):
- ``journal only`` (baseline): ``mem.tiers.put_turns([turn])`` in a worker thread, what capture
  cannot go below (embed + one durable insert);
- ``awaited``: ``await mem.capture(ctx, messages)`` with the fake LLM;
- ``background``: ``await mem.capture(ctx, messages, background=True)`` with the same fake.

Usage (from the repo root):
    python bench/capture_latency.py          # 4 sessions x 10 turns, 3 runs; writes bench/RESULTS-capture-latency.md
    python bench/capture_latency.py --quick --out -   # 1 session x 10 turns, 1 run; prints only
    python bench/capture_latency.py --long --out -    # each user message in passing in a long request
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch litellm's cost map
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _machine import cpu_name, package_version
from capture import _turn, conversation, fake_answer
from paraphrase_turns import in_passing

from tiermem import MemoryContext, Turn, system
from tiermem.memory._embed._names import resolve_embedder
from tiermem.memory._write._system import MemorySystem
from tiermem.memory.testing import FrozenClock, FunctionModel, forbid_real_model_requests

forbid_real_model_requests()  # a benchmark never reaches a real provider

CONFIGS = ("journal only", "awaited", "background")


@dataclass
class Run:
    """One configuration, one run: seconds per capture and per turn until visible."""

    latencies: list[float] = field(default_factory=list)
    visible: list[float] = field(default_factory=list)
    calls: int = 0


def _pct(values: Sequence[float], q: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))] if ordered else 0.0


def _timed_observer(mem: MemorySystem, landed: dict[str, float]) -> None:
    """Record when each turn's observation is stored (the capture's own observe step, wrapped)."""
    observe: Callable[..., Awaitable[Any]] = mem._capture._observe

    async def timed(ctx: MemoryContext, turn: Turn) -> Any:
        result = await observe(ctx, turn)
        landed[turn.id] = time.perf_counter()
        return result

    mem._capture._observe = timed  # type: ignore[method-assign]


async def run_once(config: str, sessions: list[list[list[dict[str, str]]]], args: argparse.Namespace) -> Run:
    clock = FrozenClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    fake = FunctionModel(function=fake_answer, latency=args.latency)
    run, returned, landed = Run(), dict[str, float](), dict[str, float]()
    with tempfile.TemporaryDirectory(prefix="tiermem-latency-") as folder:
        mem = system(model=fake.model, store=folder, embedder=resolve_embedder(args.embedder), clock=clock)
        _timed_observer(mem, landed)
        for number, turns in enumerate(sessions):
            ctx = MemoryContext(namespace="bench", user_id="u-latency", session_id=f"s-{number:03d}")
            for seq, messages in enumerate(turns):
                clock.advance(timedelta(minutes=1))
                started = time.perf_counter()
                if config == "journal only":
                    await asyncio.to_thread(mem.tiers.put_turns, [_turn(ctx, seq, messages, clock.now())])
                else:
                    captured = await mem.capture(ctx, messages, background=config == "background")
                    returned[captured.turn.id] = time.perf_counter()
                run.latencies.append(time.perf_counter() - started)
                await asyncio.sleep(args.think)  # the agent's own work before the next turn
            if config != "journal only":
                await mem.end_session(ctx)  # joins observations still in flight
            clock.advance(timedelta(hours=20))
        await mem.aclose()
    run.visible = [max(0.0, landed[t] - returned[t]) for t in returned if t in landed]
    run.calls = len(fake.calls)
    return run


def report(results: dict[str, list[Run]], args: argparse.Namespace, command: str) -> str:
    def med(config: str, value: Callable[[Run], float]) -> float:
        return statistics.median(value(r) for r in results[config])

    base = med("journal only", lambda r: _pct(r.latencies, 50))
    lines = [
        f"Command: `{command}`",
        "",
        "# Capture latency as the agent sees it",
        "",
        f"Workload: {args.sessions} sessions x {args.turns} turns (synthetic, `bench/capture.py`'s generator"
        f"{'; each user message in passing among 3-7 request sentences' if args.long else ''}), "
        f"the agent's own work between turns {args.think * 1000:.0f} ms, fake LLM {args.latency * 1000:.0f} ms "
        f"per call through real litellm; embedder `{args.embedder}`; fresh LanceDB store per run; "
        f"medians of {args.runs} runs' p50/p95 (configurations interleaved run by run).",
        "",
        "| configuration | capture p50 ms | capture p95 ms | p50 vs journal only | visible after p50 ms "
        "| visible after p95 ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for config in CONFIGS:
        p50 = med(config, lambda r: _pct(r.latencies, 50))
        p95 = med(config, lambda r: _pct(r.latencies, 95))
        if config == "awaited":
            seen = "0 (returned observed)", "0"
        elif config == "background":
            seen = (
                f"{med(config, lambda r: _pct(r.visible, 50)) * 1000:.1f}",
                f"{med(config, lambda r: _pct(r.visible, 95)) * 1000:.1f}",
            )
        else:
            seen = "n/a", "n/a"
        lines.append(f"| {config} | {p50 * 1000:.1f} | {p95 * 1000:.1f} | {p50 / base:.2f}x | {seen[0]} | {seen[1]} |")
    load = os.getloadavg()
    lines += [
        "",
        "*visible after*: from `capture` returning until the turn's observations are stored in working memory.",
        "",
        "## Machine",
        "",
        f"- CPU: {cpu_name()}, {os.cpu_count()} cores; load average at the end {load[0]:.2f}, {load[1]:.2f}, "
        f"{load[2]:.2f} (the machine may be shared: absolute figures move with its load, ratios less)",
        f"- Python {sys.version.split()[0]}; lancedb {package_version('lancedb')}, "
        f"litellm {package_version('litellm')}",
    ]
    return "\n".join(lines) + "\n"


async def main_async(args: argparse.Namespace) -> dict[str, list[Run]]:
    sessions = conversation(args.sessions, args.turns, seed=11)
    if args.long:  # each user message said in passing among request sentences (what embeds a turn's sentences)
        said = iter(in_passing([m["content"] for s in sessions for t in s for m in t if m["role"] == "user"]))
        sessions = [
            [[{**m, "content": next(said)} if m["role"] == "user" else m for m in t] for t in s] for s in sessions
        ]
    results: dict[str, list[Run]] = {c: [] for c in CONFIGS}
    for _ in range(args.runs):
        for config in CONFIGS:
            results[config].append(await run_once(config, sessions, args))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--think", type=float, default=0.3, help="seconds of the agent's own work between turns")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per fake model call")
    parser.add_argument("--embedder", default="minilm-onnx")
    parser.add_argument("--quick", action="store_true", help="1 session, 1 run")
    parser.add_argument(
        "--long", action="store_true", help="each user message among 3-7 request sentences (paraphrase_turns --long)"
    )
    parser.add_argument("--out", default="bench/RESULTS-capture-latency.md", help="'-' prints only")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.runs = 1, 1
    command = "python bench/capture_latency.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    text = report(asyncio.run(main_async(args)), args, command.strip())
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
