"""Relations graph benchmark: build time from storage, ``connections`` and ``relate`` latency.

Scenario (full run): one user holds 10,000 edges over 2,000 synthetic people ("p0001".."p2000",
canonical subjects) plus "user" (30 of the edges touch "user"), and 300 facts so endpoints
exist. Edges and facts are written directly with ``Store.upsert`` in batches of 2,000 (vectors
from ``HashingEmbedder(256)``), then one ``Store.optimize()``. Relations are on with
``max_edges=20000`` so the cap never cuts the graph. Everything is deterministic (fixed seed).

Measured, each beside a baseline in the same run over the same edge list:

- graph build: ``mem.relations.graph(ctx)`` after ``mem.relations.graphs.invalidate((ns, user))``
  (storage read + records + networkx ``MultiDiGraph``); baseline: one ``store.query("edges", ...)``
  and a plain-Python adjacency dict built from those rows.
- ``mem.relations.connections(ctx, entity)`` on a warm cache over random entities; baseline: dict lookup of
  the entity's in/out edges, sorted strongest first (what ``connections`` returns).
- ``mem.relations.relate(ctx, a, b)`` on a warm cache over random pairs; baseline: BFS over the undirected
  adjacency dict with parent pointers, strongest edge per hop.

A breakdown times the parts of one helper call separately (store version check, alias read,
the networkx query alone).

Usage (from the repo root):
    python bench/graph.py                # full run, writes bench/RESULTS-graph.md
    python bench/graph.py --quick        # smoke run (1,000 edges), prints only
    python bench/graph.py --out FILE     # write the report to FILE
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import tiermem as memory
from tiermem.memory._identity import edge_id
from tiermem.memory._relations._graph import RelationGraph
from tiermem.memory._store._store import Where

NAMESPACE = "bench"
USER_ID = "graph-user"
SCOPE = memory.MemoryContext(namespace=NAMESPACE, user_id=USER_ID)
RELATIONS = [
    "friend of", "colleague of", "brother of", "sister of", "married to", "neighbour of",
    "mentor of", "cousin of", "works with", "boss of", "roommate of", "knows",
]  # fmt: skip
BATCH = 2000
# optimize(cleanup_older_than=0) warns about concurrent readers; nothing else reads this temp store.
warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")


@dataclass(frozen=True, kw_only=True)
class Size:
    edges: int
    people: int
    facts: int
    user_edges: int
    queries: int
    builds: int


FULL = Size(edges=10_000, people=2_000, facts=300, user_edges=30, queries=200, builds=15)
QUICK = Size(edges=1_000, people=200, facts=50, user_edges=10, queries=50, builds=5)


# -- data -------------------------------------------------------------------------------------------


def people(n: int) -> list[str]:
    return [f"p{i:04d}" for i in range(1, n + 1)]


def make_edges(size: Size, rng: random.Random, now: datetime) -> list[memory.Edge]:
    """``size.edges`` distinct (source, relation, target) triples, ``size.user_edges`` of them touching "user"."""
    names = people(size.people)
    triples: dict[tuple[str, str, str], None] = {}
    while len(triples) < size.user_edges:
        other = rng.choice(names)
        pair = ("user", other) if rng.random() < 0.5 else (other, "user")
        triples[(pair[0], rng.choice(RELATIONS), pair[1])] = None
    while len(triples) < size.edges:
        a, b = rng.sample(names, 2)
        triples[(a, rng.choice(RELATIONS), b)] = None
    out = []
    for i, (source, relation, target) in enumerate(triples):
        stamp = now - timedelta(minutes=len(triples) - i)
        out.append(
            memory.Edge(
                id=edge_id(SCOPE, source=source, relation=relation, target=target),
                namespace=NAMESPACE,
                user_id=USER_ID,
                source=source,
                relation=relation,
                target=target,
                confidence=round(rng.uniform(0.5, 1.0), 3),
                created_at=stamp,
                updated_at=stamp,
            )
        )
    return out


def make_facts(size: Size, rng: random.Random, now: datetime) -> list[memory.Fact]:
    subjects = ["user", *rng.sample(people(size.people), size.facts - 1)]
    hobbies = ["chess", "hiking", "pottery", "jazz", "sailing", "baking", "running", "painting"]
    out = []
    for subject in subjects:
        text = f"{subject} enjoys {rng.choice(hobbies)}."
        out.append(memory.Fact.new(SCOPE, subject=subject, text=text, now=now))
    return out


def write(mem: memory.MemoryCapability, edges: Sequence[memory.Edge], facts: Sequence[memory.Fact]) -> float:
    started = time.perf_counter()

    def put(table: Literal["edges", "facts"], records: Sequence[memory.Edge | memory.Fact]) -> None:
        for start in range(0, len(records), BATCH):
            batch = list(records[start : start + BATCH])
            mem.store.upsert(table, batch, mem.embedder.embed([r.text for r in batch]))

    put("edges", edges)
    put("facts", facts)
    mem.store.optimize(cleanup_older_than=timedelta(0))
    return time.perf_counter() - started


# -- the baseline: a dict and a BFS -----------------------------------------------------------------


class Adjacency:
    """entity -> every edge into or out of it (the undirected view the helpers use)."""

    def __init__(self, edges: Sequence[memory.Edge]) -> None:
        self.edges: dict[str, list[memory.Edge]] = {}
        for edge in edges:
            self.edges.setdefault(edge.source, []).append(edge)
            if edge.target != edge.source:
                self.edges.setdefault(edge.target, []).append(edge)

    def neighbours(self, entity: str) -> list[memory.Edge]:
        return sorted(self.edges.get(entity, ()), key=lambda e: (-e.confidence, e.id))

    def path(self, source: str, target: str) -> list[memory.Edge] | None:
        if source not in self.edges or target not in self.edges:
            return None
        if source == target:
            return []
        parent: dict[str, str] = {source: source}
        queue = deque([source])
        while queue:
            node = queue.popleft()
            for edge in self.edges[node]:
                other = edge.target if edge.source == node else edge.source
                if other in parent:
                    continue
                parent[other] = node
                if other == target:
                    return self._walk(parent, source, target)
                queue.append(other)
        return None

    def _walk(self, parent: dict[str, str], source: str, target: str) -> list[memory.Edge]:
        nodes = [target]
        while nodes[-1] != source:
            nodes.append(parent[nodes[-1]])
        nodes.reverse()
        hops = []
        for a, b in itertools.pairwise(nodes):
            between = [e for e in self.edges[a] if {e.source, e.target} == {a, b}]
            hops.append(max(between, key=lambda e: (e.confidence, e.id)))
        return hops


# -- timing -----------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return (time.perf_counter() - started) * 1000.0, value


def series(calls: Sequence[Callable[[], Any]], warmup: int = 5) -> list[float]:
    for call in calls[:warmup]:
        call()
    return [timed(call)[0] for call in calls]


def paired(
    ours: Sequence[Callable[[], Any]], base: Sequence[Callable[[], Any]], warmup: int = 5
) -> tuple[list[float], list[float]]:
    """Time both sides call by call, interleaved, so load on a shared machine hits both alike."""
    for a, b in zip(ours[:warmup], base[:warmup], strict=True):
        a(), b()
    out_a, out_b = [], []
    for a, b in zip(ours, base, strict=True):
        out_a.append(timed(a)[0])
        out_b.append(timed(b)[0])
    return out_a, out_b


def p(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def fmt(ms: float) -> str:
    return f"{ms:.3f}" if ms < 10 else f"{ms:.1f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "n/a"


# -- the run ----------------------------------------------------------------------------------------


def run(size: Size, seed: int) -> tuple[list[str], dict[str, Any]]:
    rng = random.Random(seed)
    now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    edges, facts = make_edges(size, rng, now), make_facts(size, rng, now)
    folder = tempfile.mkdtemp(prefix="tiermem-graph-bench-")
    try:
        mem = memory.create_memory_capability(
            store=folder,
            embedder=memory.HashingEmbedder(256),
            semantic={"relations": {"max_edges": 20_000}},
            working=False,
            episodic=False,
            digest=False,
            hygiene=False,
        )
        ctx = memory.MemoryContext(namespace=NAMESPACE, user_id=USER_ID)
        key = (ctx.namespace, ctx.user_id)
        scope = Where(eq={"namespace": NAMESPACE, "user_id": USER_ID})
        write_s = write(mem, edges, facts)

        # build from storage
        def build() -> RelationGraph:
            mem.relations.graphs.invalidate(key)
            return mem.relations.graph(ctx)

        def baseline_build() -> Adjacency:
            return Adjacency(mem.store.query("edges", scope))

        build_ms, base_build_ms = paired([build] * size.builds, [baseline_build] * size.builds, warmup=1)
        query_ms = series([lambda: mem.store.query("edges", scope)] * size.builds, warmup=1)
        stored = mem.store.query("edges", scope)
        nx_build_ms = series([lambda: RelationGraph(stored)] * size.builds, warmup=1)
        dict_build_ms = series([lambda: Adjacency(stored)] * size.builds, warmup=1)

        graph = mem.relations.graph(ctx)  # warm cache from here on
        adjacency = Adjacency(stored)
        assert len(graph) == len(edges) == len(stored), (len(graph), len(edges), len(stored))

        names = ["user", *people(size.people)]
        entities = [rng.choice(names) for _ in range(size.queries)]
        pairs = [(rng.choice(names), rng.choice(names)) for _ in range(size.queries)]
        conn_ms, base_conn_ms = paired(
            [partial(mem.relations.connections, ctx, e) for e in entities],
            [partial(adjacency.neighbours, e) for e in entities],
        )
        nx_conn_ms = series([partial(graph.neighbours, e) for e in entities])
        relate_ms, base_relate_ms = paired(
            [partial(mem.relations.relate, ctx, a, b) for a, b in pairs],
            [partial(adjacency.path, a, b) for a, b in pairs],
        )
        nx_relate_ms = series([partial(graph.path, a, b) for a, b in pairs])
        version_ms = series([lambda: mem.store.version("edges")] * size.queries)
        alias_ms = series([lambda: mem.tiers.aliases(ctx)] * size.queries)

        # the helpers and the baseline agree
        same_conn = sum(
            [e.id for e in mem.relations.connections(ctx, x)] == [e.id for e in adjacency.neighbours(x)]
            for x in entities
        )
        hops = [(mem.relations.relate(ctx, a, b), adjacency.path(a, b)) for a, b in pairs]
        same_len = sum((x is None) == (y is None) and (x is None or len(x) == len(y or [])) for x, y in hops)
        lengths = [len(x) for x, _ in hops if x is not None]
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    rows = [
        ("graph build from storage", f"{size.builds} builds", build_ms, base_build_ms),
        ("`connections(entity)`, warm cache", f"{size.queries} entities", conn_ms, base_conn_ms),
        ("`relate(a, b)`, warm cache", f"{size.queries} pairs", relate_ms, base_relate_ms),
    ]
    lines = [
        "| operation | calls | tiermem p50 ms | tiermem p95 ms | baseline p50 ms | baseline p95 ms "
        "| ratio p50 | ratio p95 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, calls, ours, base in rows:
        lines.append(
            f"| {label} | {calls} | {fmt(p(ours, 0.5))} | {fmt(p(ours, 0.95))} | {fmt(p(base, 0.5))} | "
            f"{fmt(p(base, 0.95))} | {ratio(p(ours, 0.5), p(base, 0.5))} | {ratio(p(ours, 0.95), p(base, 0.95))} |"
        )
    parts = [
        ("`store.query('edges')` (rows -> Edge records)", query_ms),
        ("networkx `RelationGraph(edges)` from records", nx_build_ms),
        ("adjacency dict from records", dict_build_ms),
        ("`store.version('edges')` (each helper call)", version_ms),
        ("`tiers.aliases(ctx)` (each helper call, to canonicalise)", alias_ms),
        ("`RelationGraph.neighbours` alone", nx_conn_ms),
        ("`RelationGraph.path` alone", nx_relate_ms),
    ]
    breakdown = ["| part | p50 ms | p95 ms |", "| --- | ---: | ---: |"]
    breakdown += [f"| {label} | {fmt(p(v, 0.5))} | {fmt(p(v, 0.95))} |" for label, v in parts]
    facts_out = {
        "edges": len(edges),
        "nodes": len(graph.nodes),
        "facts": len(facts),
        "write_s": write_s,
        "same_conn": same_conn,
        "same_len": same_len,
        "queries": size.queries,
        "mean_hops": statistics.fmean(lengths) if lengths else 0.0,
        "unreachable": sum(1 for x, _ in hops if x is None),
        "reading": (
            f"Reading: of a build (p50 {fmt(p(build_ms, 0.5))} ms) the storage read and record parsing "
            f"(`store.query`) take {fmt(p(query_ms, 0.5))} ms and the networkx construction "
            f"{fmt(p(nx_build_ms, 0.5))} ms (a dict: {fmt(p(dict_build_ms, 0.5))} ms). On a warm cache each helper "
            f"call first reads the edges table version ({fmt(p(version_ms, 0.5))} ms) and the user's aliases "
            f"({fmt(p(alias_ms, 0.5))} ms); the graph query itself takes {fmt(p(nx_conn_ms, 0.5))} ms "
            f"(`neighbours`) / {fmt(p(nx_relate_ms, 0.5))} ms (`path`, bidirectional BFS). The cache key is the "
            "edges table version, which moves with any user's edge write, so the first helper call after any "
            "consolidation that wrote edges pays a full build."
        ),
    }
    return [*lines, "", "### Where a helper call spends its time", "", *breakdown], facts_out


def versions() -> str:
    found = []
    for name in ("networkx", "lancedb", "pyarrow", "pydantic"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} ?")
    return ", ".join(found)


def report(command: str, size: Size, seed: int, table: list[str], facts: dict[str, Any], load: str) -> str:
    head = [
        f"Command: `{command}`",
        "",
        "# Relations graph benchmark",
        "",
        f"One user, {facts['edges']:,} edges over {facts['nodes']:,} nodes (synthetic canonical subjects "
        f"`p0001`..; {size.user_edges} edges touch `user`), {facts['facts']} facts; written with "
        f"`Store.upsert` in batches of {BATCH:,} (HashingEmbedder(256) vectors), then one `Store.optimize()` "
        f"({facts['write_s']:.1f} s in all). Relations on with `max_edges=20000`. Seed {seed}.",
        "",
        "- **graph build**: `mem.relations.graph(ctx)` after `mem.relations.graphs.invalidate((ns, user))`; baseline: "
        "one `store.query('edges', ...)` plus a plain-Python adjacency dict from its rows.",
        "- **connections**: `mem.relations.connections(ctx, entity)` on a warm cache, random entities; baseline: "
        "the dict's edges of the entity, sorted strongest first.",
        "- **relate**: `mem.relations.relate(ctx, a, b)` on a warm cache, random pairs (no hop limit); baseline: "
        "BFS over the undirected adjacency dict, strongest edge per hop.",
        "",
        f"Agreement with the baseline: connections identical for {facts['same_conn']}/{facts['queries']} "
        f"entities; relate path length identical for {facts['same_len']}/{facts['queries']} pairs "
        f"(mean {facts['mean_hops']:.2f} hops, {facts['unreachable']} unreachable).",
        "",
    ]
    tail = [
        "",
        facts["reading"],
        "",
        "## Environment",
        "",
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; {versions()}. Load average at start: {load} (a shared machine: absolute "
        "numbers are noisy; the baseline runs in the same process at the same time).",
        "",
    ]
    return "\n".join([*head, *table, *tail])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1,000 edges, 50 queries; prints only")
    parser.add_argument("--out", type=Path, default=None, help="where to write the report")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    out = args.out if args.out is not None else (None if args.quick else Path(__file__).with_name("RESULTS-graph.md"))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    command = " ".join(["python", "bench/graph.py", *(argv if argv is not None else sys.argv[1:])])
    table, facts = run(size, args.seed)
    text = report(command, size, args.seed, table, facts, load)
    print(text)
    if out is not None:
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
