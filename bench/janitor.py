"""Janitor cost at 10k and 100k facts, and what storage compaction does to a store after 1,000 captures.

Part 1, janitor time. One store per size, ~100 users (facts interleaved), written directly with
``mem.store.upsert("facts", facts, vectors)`` in batches of 5,000 (HashingEmbedder(256) vectors,
synthetic texts from ``bench/_synthetic.py``), then one ``Store.optimize()`` so the janitor starts
from a compacted store. Every fact's last reinforcement is spread uniformly over the two years
before "now" (fixed seed) and its confidence over 0.5..1.0, so with the default half-life (180 d)
and floor (0.15) a share of them is archived. Timed, on the same store, in this order:
``run_janitor(dry_run=True)`` (reads and decay, no writes), ``run_janitor`` (archive writes plus
storage compaction, ``cleanup_older_than=0``), then ``run_janitor`` again (nothing left to archive),
all with ``force=True`` (the removal guard would stop the users who lose more than half; unforced,
its preview adds one dry run).
Baselines in the same run: (a) the same decay and floor test in plain numpy over the same
confidences and ages (the arithmetic floor), (b) one scan of the whole facts table into records
(``store.query`` with no filter: the read floor), (c) one ``store.optimize()`` alone right after
a 5,000-row write (the storage-compaction floor). The janitor's archived count is checked against
numpy's. The semantic cap (max_facts 2000/user) is not reached, so no compaction model is called.

Part 2, storage compaction over single captures. ``system(model="rules")`` with a HashingEmbedder
and a FrozenClock; 1,000 ``capture`` calls of one short synthetic message each (10 users, 50
sessions). Measured before and after one ``run_janitor`` with ``hygiene={"cleanup_older_than":
timedelta(0)}``: bytes on disk and file count under the store folder, table versions (sum and the
largest table), ``recall_sync`` latency p50/p95 (100 queries after 10 warm-up, a session context so
every tier is searched), and capture latency (mean of the first and last 100 captures, and of 100
captures after compaction).

Usage (from the repo root):
    python bench/janitor.py            # full run, writes bench/RESULTS-janitor.md (~5-10 min on 2 cores)
    python bench/janitor.py --quick    # smoke run: 1k/5k facts, 100 captures, prints only
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import cpu_name, package_version
from _synthetic import fact_batches, queries

from tiermem import Fact, MemoryContext, MemorySystem, system
from tiermem.jobs import run_janitor
from tiermem.memory._store._store import Store, Where
from tiermem.memory.testing import FrozenClock, HashingEmbedder

NAMESPACE = "bench"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
MAX_AGE_DAYS = 730
USERS = 100
# optimize(cleanup_older_than=0) warns about concurrent readers; nothing else reads these temp stores.
warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")


# -- helpers ----------------------------------------------------------------------------------


def disk(path: str) -> tuple[int, int]:
    """(bytes, files) under ``path``."""
    size = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(root, name))
    return size, files


def versions(mem: MemorySystem) -> tuple[int, int, str]:
    """(sum of versions over tables, the largest table's versions, that table)."""
    stats = mem.store.stats()
    name = max(stats, key=lambda t: stats[t]["versions"])
    return sum(s["versions"] for s in stats.values()), stats[name]["versions"], name


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def store_settings() -> str:
    """The store's own write-side compaction, when this version of the library has one."""
    every = Store.__init__.__kwdefaults__ or {}
    if "compact_every" not in every:
        return "no automatic compaction on write (only the janitor compacts)"
    keep = every.get("keep_versions")
    return f"automatic compaction every {every['compact_every']} writes per table, versions kept {keep}"


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


# -- part 1: janitor time ---------------------------------------------------------------------


@dataclass
class JanitorResult:
    facts: int
    users: int
    build_s: float
    dry_s: float
    real_s: float
    again_s: float
    archived: int
    expected: int
    numpy_ms: float
    scan_s: float
    optimize_s: float
    versions_after: int
    files_after: int


def aged(facts: list[Fact], rng: np.random.Generator) -> tuple[list[Fact], np.ndarray, np.ndarray]:
    ages = rng.uniform(0, MAX_AGE_DAYS, len(facts))
    out = []
    for fact, days in zip(facts, ages, strict=True):
        when = NOW - timedelta(days=float(days))
        out.append(fact.model_copy(update={"created_at": when, "updated_at": when, "reinforced_at": when}))
    return out, ages, np.asarray([f.confidence for f in facts])


def bench_janitor(root: Path, n_facts: int, seed: int) -> JanitorResult:
    path = str(root / f"janitor-{n_facts}")
    embedder = HashingEmbedder(256)
    mem = system(
        model="rules", store=path, embedder=embedder, clock=FrozenClock(NOW),
        hygiene={"cleanup_older_than": timedelta(0)},
    )  # fmt: skip
    owners = [(f"user-{i:03d}", n_facts // USERS) for i in range(USERS)]
    rng = np.random.default_rng(seed)
    confidences: list[np.ndarray] = []
    ages: list[np.ndarray] = []
    t0 = time.perf_counter()
    for batch in fact_batches(owners, namespace=NAMESPACE, seed=seed, batch=5000):
        facts, batch_ages, batch_conf = aged(batch, rng)
        mem.store.upsert("facts", facts, embedder.embed([f.text for f in facts]))
        ages.append(batch_ages)
        confidences.append(batch_conf)
    mem.store.optimize()
    build_s = time.perf_counter() - t0
    conf, age = np.concatenate(confidences), np.concatenate(ages)
    semantic = mem.capability.semantic
    assert semantic is not None
    half_life, floor = semantic.half_life / timedelta(days=1), semantic.archive_below

    # Baseline (a): the decay and the floor test alone, vectorised.
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        expected = int(np.count_nonzero(conf * 0.5 ** (age / half_life) < floor))
        runs.append(time.perf_counter() - t)
    numpy_ms = statistics.median(runs) * 1000
    # Baseline (b): one scan of the whole table into records.
    scan_s, _ = timed(lambda: mem.store.query("facts", Where(eq={})))

    # Forced: about 44% of each user's facts fade, and the removal guard would stop the users over half
    # (after its preview, one more dry run per user: a guarded run costs about dry_s more).
    dry_s, dry = timed(lambda: asyncio.run(run_janitor(mem, NOW, dry_run=True, force=True)))
    real_s, real = timed(lambda: asyncio.run(run_janitor(mem, NOW, force=True)))
    again_s, _ = timed(lambda: asyncio.run(run_janitor(mem, NOW, force=True)))
    if dry.facts_archived != real.facts_archived:
        raise RuntimeError(f"dry run said {dry.facts_archived}, real run archived {real.facts_archived}")
    versions_after = versions(mem)[0]
    files_after = disk(path)[1]

    # Baseline (c): storage compaction alone, after one 5,000-row write (a rewrite of existing rows).
    sample = mem.store.query("facts", Where(eq={}), limit=5000)
    mem.store.upsert("facts", sample, embedder.embed([f.text for f in sample]))
    optimize_s, _ = timed(lambda: mem.store.optimize(cleanup_older_than=timedelta(0)))
    return JanitorResult(
        facts=n_facts, users=USERS, build_s=build_s, dry_s=dry_s, real_s=real_s, again_s=again_s,
        archived=real.facts_archived, expected=expected, numpy_ms=numpy_ms, scan_s=scan_s,
        optimize_s=optimize_s, versions_after=versions_after, files_after=files_after,
    )  # fmt: skip


# -- part 2: storage compaction over single captures ------------------------------------------


@dataclass
class Snapshot:
    size: int
    files: int
    versions: int
    largest: int
    largest_table: str
    recall_ms: list[float] = field(default_factory=list)


@dataclass
class CaptureResult:
    captures: int
    capture_s: float
    first_ms: float
    last_ms: float
    after_ms: float
    janitor_s: float
    before: Snapshot
    after: Snapshot
    returned_before: float
    returned_after: float


def snapshot(
    mem: MemorySystem, path: str, qs: list[str], ctxs: list[MemoryContext], warmup: int
) -> tuple[Snapshot, float]:
    size, files = disk(path)
    total, largest, name = versions(mem)
    for i, q in enumerate(qs[:warmup]):
        mem.recall_sync(ctxs[i % len(ctxs)], q)
    times, returned = [], []
    for i, q in enumerate(qs[warmup:]):
        t0 = time.perf_counter_ns()
        items = mem.recall_sync(ctxs[i % len(ctxs)], q)
        times.append((time.perf_counter_ns() - t0) / 1e6)
        returned.append(len(items))
    return Snapshot(size, files, total, largest, name, times), statistics.fmean(returned)


def bench_captures(root: Path, n: int, n_queries: int, warmup: int, seed: int) -> CaptureResult:
    path = str(root / "captures")
    clock = FrozenClock(NOW)
    mem = system(
        model="rules", store=path, embedder=HashingEmbedder(256), clock=clock,
        hygiene={"cleanup_older_than": timedelta(0)},
    )  # fmt: skip
    texts = [
        f.text.replace("The user", "I")
        for batch in fact_batches([("c", n + 100)], namespace="c", seed=seed)
        for f in batch
    ]
    ctxs = [MemoryContext(namespace=NAMESPACE, user_id=f"user-{i % 10}", session_id=f"s-{i % 50}") for i in range(50)]
    per: list[float] = []

    async def capture(start: int, count: int) -> None:
        for i in range(start, start + count):
            t0 = time.perf_counter()
            await mem.capture(ctxs[i % len(ctxs)], [{"role": "user", "content": texts[i]}])
            per.append(time.perf_counter() - t0)
            clock.advance(seconds=30)
            if (i + 1) % 100 == 0:
                print(f"  {i + 1} captures, {sum(per):.0f}s", flush=True)

    asyncio.run(capture(0, n))
    capture_s = sum(per)
    qs = queries(n_queries + warmup, seed=seed + 1)
    before, returned_before = snapshot(mem, path, qs, ctxs, warmup)
    janitor_s, _ = timed(lambda: asyncio.run(run_janitor(mem, clock.now())))
    after, returned_after = snapshot(mem, path, qs, ctxs, warmup)
    asyncio.run(capture(n, 100))
    return CaptureResult(
        captures=n, capture_s=capture_s, first_ms=statistics.fmean(per[:100]) * 1000,
        last_ms=statistics.fmean(per[n - 100 : n]) * 1000, after_ms=statistics.fmean(per[n:]) * 1000,
        janitor_s=janitor_s, before=before, after=after,
        returned_before=returned_before, returned_after=returned_after,
    )  # fmt: skip


# -- report -----------------------------------------------------------------------------------


def machine() -> list[str]:
    cpu = cpu_name()
    version = package_version

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return [
        f"- CPU: {cpu}; cores: {os.cpu_count()}; 1-min load average at the end of the run: {load:.1f}",
        f"- Python {platform.python_version()} on {platform.system()} {platform.release()}",
        f"- lancedb {version('lancedb')}, pylance {version('pylance')}, pyarrow {version('pyarrow')}, "
        f"numpy {version('numpy')}, APScheduler {version('APScheduler')}",
    ]


def report(command: str, janitors: list[JanitorResult], cap: CaptureResult, total_s: float) -> str:
    lines = [f"Command: `{command}`", "", "# Janitor benchmark", ""]
    lines += [
        "## Janitor time",
        "",
        f"Facts written directly (`mem.store.upsert('facts', ...)`, batches of 5,000, HashingEmbedder(256)) for "
        f"{USERS} users, interleaved, then one `Store.optimize()`. Last reinforcement uniform over the "
        f"{MAX_AGE_DAYS} days before now, confidence uniform 0.5..1.0; default half-life 180 d, floor 0.15. "
        "Janitor runs in order on the same store: dry run, real run (archive + storage compaction with "
        "`cleanup_older_than=0`), a second real run (nothing left to archive).",
        "Baselines, same run and same data: **numpy decay** = `conf * 0.5 ** (age / half_life) < floor` over "
        "the same arrays (median of 5); **table scan** = `store.query('facts')` of every row into records; "
        "**optimize alone** = one `store.optimize()` after rewriting 5,000 rows.",
        "",
        "| facts | users | dry run s | janitor s | 2nd janitor s | archived (numpy expects) | numpy decay ms "
        "| table scan s | optimize alone s | versions after | files after |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in janitors:
        lines.append(
            f"| {r.facts:,} | {r.users} | {r.dry_s:.2f} | {r.real_s:.2f} | {r.again_s:.2f} | "
            f"{r.archived:,} ({r.expected:,}) | {r.numpy_ms:.2f} | {r.scan_s:.2f} | {r.optimize_s:.2f} | "
            f"{r.versions_after} | {r.files_after} |"
        )
    b, a = cap.before, cap.after
    lines += [
        "",
        f"## Storage compaction after {cap.captures:,} single captures",
        "",
        f"`system(model='rules')`, HashingEmbedder(256), FrozenClock; {cap.captures:,} `capture` calls of one "
        f"short message each over 10 users / 50 sessions took {cap.capture_s:.0f} s. Then one `run_janitor` "
        f"with `hygiene={{'cleanup_older_than': timedelta(0)}}` ({cap.janitor_s:.2f} s). Recall: "
        f"`recall_sync(ctx, query)` on a session context (all tiers), {len(b.recall_ms)} synthetic queries "
        "after 10 warm-up, the same queries before and after.",
        "",
        "| | bytes on disk | files | versions (all tables) | versions (largest table) | recall p50 ms "
        "| recall p95 ms | items returned (mean) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| before janitor | {mib(b.size)} | {b.files:,} | {b.versions:,} | {b.largest:,} ({b.largest_table}) | "
        f"{pct(b.recall_ms, 50):.1f} | {pct(b.recall_ms, 95):.1f} | {cap.returned_before:.1f} |",
        f"| after janitor | {mib(a.size)} | {a.files:,} | {a.versions:,} | {a.largest:,} ({a.largest_table}) | "
        f"{pct(a.recall_ms, 50):.1f} | {pct(a.recall_ms, 95):.1f} | {cap.returned_after:.1f} |",
        "",
        "| capture latency (mean) | ms |",
        "| --- | ---: |",
        f"| captures 1-100 (fresh store) | {cap.first_ms:.0f} |",
        f"| captures {cap.captures - 99:,}-{cap.captures:,} (before the janitor) | {cap.last_ms:.0f} |",
        f"| 100 captures right after the janitor | {cap.after_ms:.0f} |",
        "",
        "Every single write adds a LanceDB version and small data files; reads and `merge_insert` upserts "
        "touch every fragment, so capture and recall slow down as versions pile up until storage compaction "
        "folds them. The janitor's default cadence (6 h) and `cleanup_older_than` (1 h) bound that growth.",
        f"Store settings in this run: {store_settings()}.",
        "",
        f"Whole run: {total_s:.0f} s.",
        "",
        "## Machine",
        "",
        *machine(),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1k/5k facts, 100 captures, no file written")
    parser.add_argument("--captures", type=int, default=None, help="single captures in part 2 (default 1000)")
    parser.add_argument("--queries", type=int, default=100, help="timed recall queries before and after")
    parser.add_argument("--out", type=Path, default=None, help="markdown report (default bench/RESULTS-janitor.md)")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)

    sizes = [1_000, 5_000] if args.quick else [10_000, 100_000]
    n_captures = args.captures or (100 if args.quick else 1_000)
    out = args.out or (None if args.quick else Path(__file__).resolve().parent / "RESULTS-janitor.md")
    command = (
        "python bench/janitor.py"
        + (" --quick" if args.quick else "")
        + (f" --captures {args.captures}" if args.captures else "")
        + (f" --queries {args.queries}" if args.queries != 100 else "")
        + (f" --out {args.out}" if args.out else "")
    )

    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="tiermem-janitor-"))
    try:
        janitors = []
        for n in sizes:
            r = bench_janitor(root, n, args.seed)
            print(
                f"{n:,} facts: build {r.build_s:.1f}s, dry {r.dry_s:.2f}s, janitor {r.real_s:.2f}s, "
                f"again {r.again_s:.2f}s, archived {r.archived} (numpy {r.expected}), numpy {r.numpy_ms:.2f} ms, "
                f"scan {r.scan_s:.2f}s, optimize {r.optimize_s:.2f}s",
                flush=True,
            )
            janitors.append(r)
            shutil.rmtree(root / f"janitor-{n}", ignore_errors=True)
        print(f"{n_captures} single captures:", flush=True)
        cap = bench_captures(root, n_captures, args.queries, 10, args.seed)
        print(
            f"before: {mib(cap.before.size)}, {cap.before.files} files, {cap.before.versions} versions, recall p50 "
            f"{pct(cap.before.recall_ms, 50):.1f} ms; after: {mib(cap.after.size)}, {cap.after.files} files, "
            f"{cap.after.versions} versions, recall p50 {pct(cap.after.recall_ms, 50):.1f} ms",
            flush=True,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    text = report(command, janitors, cap, time.perf_counter() - started)
    print(text)
    if out is not None:
        out.write_text(text)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
