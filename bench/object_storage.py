"""Latency of the pipeline on a local folder and on an S3-compatible server (moto, 127.0.0.1).

Workload: ``--sessions`` sessions of 10 turns (one user message, one assistant reply) with the
offline rules model and the ``hashing`` embedder (so the numbers are storage, not model or
embedding time); ``end_session`` after each session, then ``consolidate``, ``digest``, ``--recalls``
recalls of four cues, and one janitor run (compaction). Each backend starts from an empty store.

moto answers from memory in a local Python process: it has no network round trip, so its numbers
are a floor set by LanceDB's request pattern and moto's per-request cost. The report also counts
HTTP requests per operation (from moto's access log): multiply by a real object store's latency
per request (about 10-30 ms within an AWS region, more across regions) for an estimate there.

Usage (from the repo root):
    python bench/object_storage.py            # writes bench/RESULTS-object-storage.md
    python bench/object_storage.py --quick    # 2 sessions, prints only
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch litellm's cost map

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.object_storage starts the moto server
sys.path.insert(0, str(ROOT / "bench"))

from _machine import cpu_name, package_version  # noqa: E402

from tests.object_storage import S3Server, moto_server  # noqa: E402
from tiermem import MemoryContext, MemorySystem, system  # noqa: E402
from tiermem.jobs import run_janitor  # noqa: E402
from tiermem.memory._embed._names import resolve_embedder  # noqa: E402
from tiermem.memory._store._store import Store  # noqa: E402
from tiermem.memory.testing import FrozenClock  # noqa: E402

EMBEDDER = resolve_embedder("hashing")

LINES = [
    "I work as a nurse in Porto.",
    "My sister Maria lives in Lisbon.",
    "I adopted a dog named Biscuit.",
    "I am allergic to shellfish.",
    "I play the violin on weekends.",
    "I moved to Braga last month.",
    "My favourite food is bacalhau.",
    "I drive a blue Fiat.",
    "My dog Biscuit loves the beach.",
    "I am learning Japanese.",
]
CUES = ["Where does the user work?", "dog", "shellfish allergy", "Which language is the user learning?"]


@dataclass(kw_only=True)
class Timings:
    backend: str
    ms: dict[str, list[float]] = field(default_factory=dict)
    requests: dict[str, float] = field(default_factory=dict)

    def add(self, op: str, seconds: float) -> None:
        self.ms.setdefault(op, []).append(seconds * 1000)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _timed(timings: Timings, op: str, call: Callable[[], Awaitable[Any]]) -> Any:
    start = time.perf_counter()
    result = await call()
    timings.add(op, time.perf_counter() - start)
    return result


async def run(
    backend: str, store: Callable[[], str | Store], options: dict[str, str] | None, server: S3Server | None, args: Any
) -> Timings:
    timings = Timings(backend=backend)
    clock = FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))

    def requests() -> int:
        time.sleep(0.2 if server else 0)  # the server logs a request just after answering it
        return server.requests() if server else 0

    start = time.perf_counter()
    mem: MemorySystem = system(model="rules", store=store(), storage_options=options, embedder=EMBEDDER, clock=clock)
    timings.add("open", time.perf_counter() - start)
    user = MemoryContext(user_id="ann")
    capture_requests = end_requests = 0
    for s in range(args.sessions):
        ctx = user.model_copy(update={"session_id": f"s-{s}"})
        before = requests()
        for line in LINES:
            turn = [{"role": "user", "content": line}, {"role": "assistant", "content": "Noted."}]
            await _timed(timings, "capture", partial(mem.capture, ctx, turn))
            clock.advance(minutes=1)
        capture_requests += requests() - before
        before = requests()
        await _timed(timings, "end_session", partial(mem.end_session, ctx))
        end_requests += requests() - before
    timings.requests["capture"] = capture_requests / (args.sessions * len(LINES))
    timings.requests["end_session"] = end_requests / args.sessions
    for op, call in (("consolidate", partial(mem.consolidate, user)), ("digest", partial(mem.digest, user))):
        before = requests()
        await _timed(timings, op, call)
        timings.requests[op] = requests() - before
    before = requests()
    await _timed(timings, "recall (first)", partial(mem.recall, user, CUES[0]))
    timings.requests["recall (first)"] = requests() - before
    before = requests()
    for i in range(args.recalls):
        await _timed(timings, "recall", partial(mem.recall, user, CUES[i % len(CUES)]))
    timings.requests["recall"] = (requests() - before) / args.recalls
    before = requests()
    await _timed(timings, "janitor", partial(run_janitor, mem))
    timings.requests["janitor"] = requests() - before
    return timings


def report(results: list[Timings], args: Any) -> str:
    ops = ["open", "capture", "end_session", "consolidate", "digest", "recall (first)", "recall", "janitor"]
    s3_backends = [r.backend for r in results if r.backend != "local"]
    head = "| operation | " + " | ".join(f"{r.backend} p50 ms | {r.backend} p95 ms" for r in results)
    lines = [
        "Command: `python bench/object_storage.py`",
        "",
        "# Object storage latency: local folder vs S3-compatible server",
        "",
        f"Workload: {args.sessions} sessions x 10 turns, rules model, `hashing` embedder (storage cost only); "
        f"`end_session` per session, then `consolidate`, `digest`, {args.recalls} recalls, one janitor run. "
        "S3: moto's server mode in a local process on 127.0.0.1 (no network round trip), reached by LanceDB "
        "with `storage_options` (`aws_endpoint`, `allow_http`).",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
        f"lancedb {package_version('lancedb')}, moto {package_version('moto')}.",
        "",
        head + " | " + " | ".join(f"{b} requests per op" for b in s3_backends) + " |",
        "| --- | "
        + " | ".join("---: | ---:" for _ in results)
        + " | "
        + " | ".join("---:" for _ in s3_backends)
        + " |",
    ]
    by_backend = {r.backend: r for r in results}
    for op in ops:
        cells = []
        for r in results:
            values = r.ms.get(op, [])
            cells.append(f"{statistics.median(values):.1f} | {_pct(values, 0.95):.1f}" if values else "n/a | n/a")
        reqs = [f"{by_backend[b].requests[op]:.1f}" if op in by_backend[b].requests else "" for b in s3_backends]
        lines.append(f"| {op} | " + " | ".join(cells) + " | " + " | ".join(reqs) + " |")
    lines += [
        "",
        "`recall` is warm (the user's vectors cached after the first); `recall (first)` reads them. "
        "`s3 stale 5s`: the same bucket type with `Store(read_consistency=timedelta(seconds=5))` instead of the "
        "front door's 0 (every read first lists the table's versions to see other processes' commits). "
        "Single runs (`capture` and `recall` have one sample per call); run-to-run noise on a shared machine "
        "is large, compare the ratios.",
    ]
    return "\n".join(lines) + "\n"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--recalls", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="2 sessions, 12 recalls; print only")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "RESULTS-object-storage.md")
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.recalls = 2, 12
    with tempfile.TemporaryDirectory() as tmp, moto_server(Path(tmp) / "moto.log") as server:
        local = await run("local", partial(str, Path(tmp) / "store"), None, None, args)
        bucket = server.bucket()
        s3 = await run("s3", partial(str, bucket.uri), bucket.storage_options, server, args)
        # The same with reads allowed 5 s stale (Store's read_consistency; the front door keeps 0): how much
        # of the request count is the check for other processes' commits.
        bucket = server.bucket()
        stale = partial(
            Store,
            bucket.uri,
            embedder_id=EMBEDDER.id,
            dimensions=EMBEDDER.dimensions,
            storage_options=bucket.storage_options,
            read_consistency=timedelta(seconds=5),
        )
        s3_stale = await run("s3 stale 5s", stale, None, server, args)
    text = report([local, s3, s3_stale], args)
    print(text)
    if not args.quick:
        args.out.write_text(text)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    asyncio.run(main())
