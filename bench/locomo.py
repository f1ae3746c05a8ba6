"""LoCoMo evidence recall: tiermem against lexical and dense baselines over the raw turns.

For each conversation of the LoCoMo development split (``../shared/data/locomo-dev.json`` from the repo root,
CC BY-NC 4.0, not shipped; see its README), a fresh store gets every session in order through
``system(...).capture`` (the clock set to the session's date, +30 s per turn), ``end_session``
after each session, then ``consolidate`` and ``digest``. Every question is then recalled with
``recall_sync(MemoryContext(namespace, user_id), question, limit=50)`` and the recalled items are
mapped back to dialogue turns through their provenance (turn ids -> ``Turn.metadata["dia_id"]``),
flattened in rank order and de-duplicated; a coarse item (an episode covering a session, a fact
whose provenance is a consolidation batch) spends the budget of every turn it covers.

Metrics: Recall@5/10/25 (share of a question's evidence turns within the first k turns) and
hit@5/10 (any evidence within k), per category (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial) and overall for 1-4 (the headline) and 1-5. Questions with no
evidence are skipped; evidence ids are repaired as the data README says.

Baselines over the raw turns (document ``[session date] speaker: text``), within the question's
conversation: BM25 (rank_bm25 BM25Okapi, lowercase regex word tokens, English stop words
removed), dense cosine with tiermem's embedder (``--embedder``, else the default), and their
reciprocal-rank fusion (k=60).

Usage (from the repo root):
    python bench/locomo.py                          # full run (2 conversations, 304 questions)
    python bench/locomo.py --quick                  # first conversation, first 5 sessions
    python bench/locomo.py --out bench/RESULTS.md   # also write the tables
    python bench/locomo.py --dump-misses 10         # cat 1-4 questions tiermem misses at 10
    python bench/locomo.py --variants               # + analysis (reachability, item kinds)
    python bench/locomo.py --keys tests/data/lexicon.json  # rules model + the fake's retrieval keys
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from rank_bm25 import BM25Okapi

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _locomo_data import CATEGORIES, Conversation, Question, load

import tiermem as memory
from tiermem import Embedder, MemoryContext
from tiermem.memory._embed._names import resolve_embedder
from tiermem.memory._store._store import Where
from tiermem.memory._text import STOP_WORDS, words
from tiermem.memory.testing import FrozenClock, FunctionModel, Lexicon
from tiermem.pipelines._rules import RULES

warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")

NAMESPACE = "locomo"
# The data sits beside the repository (../shared/data from its root); not shipped, see its README.
DEFAULT_DATA = str(Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json")
KS = (5, 10, 25)
HITS = (5, 10)
TURN_STEP = timedelta(seconds=30)
RRF_K = 60


def tokens(text: str) -> list[str]:
    """The BM25 baseline's terms: words without stop words (tiermem.memory._text), unstemmed."""
    return [w for w in words(text) if w not in STOP_WORDS]


# -- metrics ----------------------------------------------------------------------------------


@dataclass
class Scores:
    """Per-question recall rows for one system."""

    rows: list[tuple[int, dict[str, float]]] = field(default_factory=list)

    def add(self, category: int, ranked: Sequence[str], evidence: Sequence[str]) -> dict[str, float]:
        ev = set(evidence)
        row: dict[str, float] = {}
        for k in KS:
            row[f"R@{k}"] = len(ev & set(ranked[:k])) / len(ev)
        for k in HITS:
            row[f"hit@{k}"] = 1.0 if ev & set(ranked[:k]) else 0.0
        self.rows.append((category, row))
        return row

    def mean(self, categories: Sequence[int], metric: str) -> float | None:
        values = [r[metric] for c, r in self.rows if c in categories]
        return 100.0 * statistics.fmean(values) if values else None

    def count(self, categories: Sequence[int]) -> int:
        return sum(1 for c, _ in self.rows if c in categories)


def flatten(items: Sequence[Any], turn_dia: dict[str, str], limit: int = max(KS)) -> list[str]:
    """Recalled items -> dia_ids in rank order, de-duplicated; a coarse item spends a slot per turn."""
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        dias = [turn_dia[p] for p in item.provenance if p in turn_dia]
        for d in sorted(set(dias), key=dia_key):
            if d not in seen:
                seen.add(d)
                out.append(d)
        if len(out) >= limit:
            break
    return out[:limit]


def item_kind(item: Any) -> str:
    if item.metadata.get("kind") == "turn":
        return "turn log"
    return {"episodic": "episode", "semantic": "fact"}.get(item.tier, str(item.tier))


def flatten_sources(items: Sequence[Any], turn_dia: dict[str, str], limit: int = 10) -> list[tuple[str, str]]:
    """Like :func:`flatten`, with the kind of item that put each turn there."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in items:
        for d in sorted({turn_dia[p] for p in item.provenance if p in turn_dia}, key=dia_key):
            if d not in seen:
                seen.add(d)
                out.append((d, item_kind(item)))
        if len(out) >= limit:
            break
    return out[:limit]


def dia_key(dia: str) -> tuple[int, int]:
    s, i = dia[1:].split(":")
    return int(s), int(i)


def ranked_ids(scores: np.ndarray, ids: Sequence[str], limit: int = max(KS)) -> list[str]:
    order = np.argsort(-scores, kind="stable")
    return [ids[i] for i in order[:limit]]


# -- baselines --------------------------------------------------------------------------------


class Baselines:
    """BM25, dense and RRF over one conversation's raw turns."""

    def __init__(self, conv: Conversation, embedder: Embedder) -> None:
        turns = conv.turns
        self.ids = [t.dia_id for t in turns]
        docs = [t.document for t in turns]
        self.bm25 = BM25Okapi([tokens(d) or ["_"] for d in docs])
        self.embedder = embedder
        self.vectors = embedder.embed(docs)

    def rank_all(self, question: str) -> dict[str, list[str]]:
        n = len(self.ids)
        lex = np.asarray(self.bm25.get_scores(tokens(question)), dtype=np.float64)
        dense = (self.vectors @ self.embedder.embed([question])[0]).astype(np.float64)
        lex_rank = np.empty(n)
        lex_rank[np.argsort(-lex, kind="stable")] = np.arange(1, n + 1)
        dense_rank = np.empty(n)
        dense_rank[np.argsort(-dense, kind="stable")] = np.arange(1, n + 1)
        rrf = 1.0 / (RRF_K + lex_rank) + 1.0 / (RRF_K + dense_rank)
        return {
            "bm25": ranked_ids(lex, self.ids),
            "dense": ranked_ids(dense, self.ids),
            "rrf": ranked_ids(rrf, self.ids),
        }


# -- tiermem ----------------------------------------------------------------------------------


@dataclass
class Ingested:
    mem: Any
    ctx: MemoryContext  # recall scope: no session
    turn_dia: dict[str, str]  # Turn.id -> dia_id
    seconds: float
    capture_seconds: float
    turns: int
    store_dir: tempfile.TemporaryDirectory[str]


async def _feed(mem: Any, conv: Conversation, clock: FrozenClock) -> float:
    """Capture every session in order; returns the capture-only wall time."""
    capture = 0.0
    base = MemoryContext(namespace=NAMESPACE, user_id=conv.sample_id)
    await mem.add_alias(base, conv.speaker_a)
    for session in conv.sessions:
        ctx = base.model_copy(update={"session_id": f"session_{session.number}"})
        clock.set(session.when)
        for turn in session.turns:
            t0 = time.perf_counter()
            await mem.capture(
                ctx,
                [{"role": "user", "name": turn.speaker, "content": turn.text}],
                metadata={"dia_id": turn.dia_id, "session_date": session.date_text},
            )
            capture += time.perf_counter() - t0
            clock.advance(TURN_STEP)
        await mem.end_session(ctx)
    await mem.consolidate(base)
    await mem.digest(base)
    return capture


def _keyed_rules(lexicon: str) -> str:
    """The rules model, each observation and fact given the retrieval keys of a fixed lexicon (a fake)."""

    def rules(messages: list[dict[str, Any]], call: Any) -> dict[str, Any]:
        return RULES[call.stage](call.inputs).model_dump(mode="json")

    return FunctionModel(Lexicon.load(lexicon).attach(rules), name="rules-keys").model


def ingest(conv: Conversation, args: argparse.Namespace) -> Ingested:
    folder = tempfile.TemporaryDirectory(prefix="tiermem-locomo-")
    clock = FrozenClock(conv.sessions[0].when)
    mem = memory.system(
        model=_keyed_rules(args.keys) if args.keys else args.model,
        store=folder.name,
        embedder=args.embedder,
        clock=clock,
        semantic=True,
        recall=json.loads(args.recall) if args.recall else None,
    )
    t0 = time.perf_counter()
    capture = asyncio.run(_feed(mem, conv, clock))
    seconds = time.perf_counter() - t0
    ctx = MemoryContext(namespace=NAMESPACE, user_id=conv.sample_id)
    turns = mem.store.query("turns", Where(eq={"namespace": NAMESPACE, "user_id": conv.sample_id}))
    turn_dia = {t.id: str(t.metadata["dia_id"]) for t in turns if "dia_id" in t.metadata}
    return Ingested(
        mem=mem, ctx=ctx, turn_dia=turn_dia, seconds=seconds, capture_seconds=capture,
        turns=len(conv.turns), store_dir=folder,
    )  # fmt: skip


# -- analysis ---------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(words(text))


@dataclass
class Reach:
    """Which turns each stored tier can lead back to."""

    observed: set[str]  # turns with at least one working entry
    in_episode_prov: set[str]
    in_fact_prov: set[str]
    in_episode_text: set[str]  # turns whose observation text made it into an episode summary
    in_fact_text: set[str]  # turns whose observation text became a fact
    fine: dict[str, list[str]]  # episode/fact id -> dia_ids whose observations its text contains
    counts: dict[str, float]
    obs_by_speaker: dict[str, tuple[int, int]]  # speaker -> (turns observed, turns)


def reach(ing: Ingested, conv: Conversation) -> Reach:
    store, scope = ing.mem.store, {"namespace": NAMESPACE, "user_id": conv.sample_id}
    working = store.query("working", Where(eq=scope))
    episodes = store.query("episodes", Where(eq=scope))
    facts = store.query("facts", Where(eq=scope))
    obs_dia: dict[str, str] = {}  # normalised observation text -> dia_id of its turn (first)
    observed: set[str] = set()
    for w in working:
        for p in w.provenance:
            if p in ing.turn_dia:
                observed.add(ing.turn_dia[p])
                obs_dia.setdefault(_norm(w.text), ing.turn_dia[p])
    fine: dict[str, list[str]] = {}

    def contained(text: str) -> list[str]:
        body = _norm(text)
        found = {d for t, d in obs_dia.items() if t and t in body}
        return sorted(found, key=dia_key)

    ep_text: set[str] = set()
    for e in episodes:
        fine[e.id] = contained(e.summary)
        ep_text |= set(fine[e.id])
    fact_text: set[str] = set()
    for f in facts:
        fine[f.id] = contained(f.text)
        fact_text |= set(fine[f.id])
    by_speaker: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in conv.turns:
        by_speaker[t.speaker][1] += 1
        by_speaker[t.speaker][0] += t.dia_id in observed
    return Reach(
        observed=observed,
        in_episode_prov={ing.turn_dia[p] for e in episodes for p in e.provenance if p in ing.turn_dia},
        in_fact_prov={ing.turn_dia[p] for f in facts for p in f.provenance if p in ing.turn_dia},
        in_episode_text=ep_text,
        in_fact_text=fact_text,
        fine=fine,
        counts={
            "turns": len(conv.turns),
            "working": len(working),
            "episodes": len(episodes),
            "facts": len(facts),
            "active facts": sum(f.status == "active" for f in facts),
            "fact provenance (mean turns)": round(statistics.fmean([len(f.provenance) for f in facts]), 1)
            if facts
            else 0,
            "episode summary (mean chars)": round(statistics.fmean([len(e.summary) for e in episodes]), 0)
            if episodes
            else 0,
        },
        obs_by_speaker={s: (a, b) for s, (a, b) in by_speaker.items()},
    )


def flatten_fine(items: Sequence[Any], ing: Ingested, fine: dict[str, list[str]], limit: int = max(KS)) -> list[str]:
    """Prototype: an episode or fact points at the turns whose observations its text contains."""
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if fine.get(item.id):
            dias = fine[item.id]
        else:
            dias = sorted({ing.turn_dia[p] for p in item.provenance if p in ing.turn_dia}, key=dia_key)
        for d in dias:
            if d not in seen:
                seen.add(d)
                out.append(d)
        if len(out) >= limit:
            break
    return out[:limit]


# -- report -----------------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def table_main(systems: dict[str, Scores], cats: Sequence[int]) -> list[str]:
    cols = [f"R@{k}" for k in KS] + [f"hit@{k}" for k in HITS]
    lines = ["| system | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for name, s in systems.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(s.mean(cats, c)) for c in cols) + " |")
    return lines


def table_categories(systems: dict[str, Scores], metric: str) -> list[str]:
    first = next(iter(systems.values()))
    heads = [f"{c} {CATEGORIES[c]} (n={first.count([c])})" for c in CATEGORIES]
    lines = ["| system | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    for name, s in systems.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(s.mean([c], metric)) for c in CATEGORIES) + " |")
    return lines


def _git_state() -> str:
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "memory", "pipelines"], cwd=root, capture_output=True, text=True
        ).stdout
    except OSError:
        return "git state unknown"
    return f"git {head or '?'}" + (" with uncommitted changes in memory/ or pipelines/" if dirty.strip() else "")


def _shown(path: str) -> str:
    """A data path as the report prints it: relative to the repository root (no machine paths)."""
    return os.path.relpath(Path(path).resolve(), Path(__file__).resolve().parents[1])


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="LoCoMo JSON (a list of samples)")
    parser.add_argument("--quick", action="store_true", help="first conversation, first 5 sessions, its questions")
    parser.add_argument("--model", default="rules", help='stage model for system(): "rules" or a litellm model')
    parser.add_argument("--embedder", default=None, help="embedder for system() (default: the shipped default)")
    parser.add_argument("--keys", default=None, help="lexicon JSON: the rules model plus the fake's retrieval keys")
    parser.add_argument("--recall", default=None, help="ranking overrides as JSON, e.g. '{\"session_weight\": 0}'")
    parser.add_argument("--out", default=None, help="write the tables (markdown) here")
    parser.add_argument("--dump-misses", type=int, default=0, metavar="N", help="print N missed cat 1-4 questions")
    parser.add_argument("--no-optimize", action="store_true", help="recall on the store as ingest left it")
    parser.add_argument("--variants", action="store_true", help="add analysis prototypes (reachability, rows)")
    args = parser.parse_args(argv)

    started = datetime.now(UTC)
    convs = load(args.data, quick=args.quick)
    embedder = resolve_embedder(args.embedder)  # the dense baseline uses tiermem's embedder
    systems: dict[str, Scores] = {name: Scores() for name in ("tiermem", "bm25", "dense", "rrf")}
    variants: dict[str, Scores] = {}
    skipped = 0
    latencies: list[float] = []
    raw_latencies: list[float] = []
    optimize_s = 0.0
    ingest_s = capture_s = 0.0
    n_turns = 0
    misses: list[tuple[str, Question, list[str], list[Any], dict[str, str]]] = []
    reach_tot: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    counts_lines: list[str] = []
    speaker_lines: list[str] = []
    slot_kinds: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # kind -> [turn slots in top 10, evidence hits]
    top_kinds: dict[str, int] = defaultdict(int)  # kind -> items among the top 10 recalled

    for conv in convs:
        ing = ingest(conv, args)
        ingest_s += ing.seconds
        capture_s += ing.capture_seconds
        n_turns += ing.turns
        print(f"{conv.sample_id}: {ing.turns} turns ingested in {ing.seconds:.1f}s", file=sys.stderr)
        base = Baselines(conv, embedder)
        text_of = {t.dia_id: t.document for t in conv.turns}
        if not args.no_optimize:
            # Latency on the store as ingest left it (one version per write), then compact it the way
            # the janitor job does in a deployment; the scored recalls run on the compacted store.
            for q in [q for q in conv.questions if q.evidence][:20]:
                t0 = time.perf_counter()
                ing.mem.recall_sync(ing.ctx, q.question, limit=50)
                raw_latencies.append(1000 * (time.perf_counter() - t0))
            t0 = time.perf_counter()
            ing.mem.store.optimize()
            optimize_s += time.perf_counter() - t0
        rch = reach(ing, conv) if args.variants else None
        if rch is not None:
            counts_lines.append(f"| {conv.sample_id} | " + " | ".join(str(v) for v in rch.counts.values()) + " |")
            for spk, (a, b) in rch.obs_by_speaker.items():
                role = "speaker_a (alias of user)" if spk == conv.speaker_a else "speaker_b"
                speaker_lines.append(f"| {conv.sample_id} | {spk} ({role}) | {a}/{b} = {100 * a / b:.0f}% |")
        for q in conv.questions:
            if not q.evidence:
                skipped += 1
                continue
            t0 = time.perf_counter()
            items = ing.mem.recall_sync(ing.ctx, q.question, limit=50)
            latencies.append(1000 * (time.perf_counter() - t0))
            ours = flatten(items, ing.turn_dia)
            row = systems["tiermem"].add(q.category, ours, q.evidence)
            for name, ranked in base.rank_all(q.question).items():
                systems[name].add(q.category, ranked, q.evidence)
            if q.category != 5 and row["hit@10"] == 0.0:
                misses.append((conv.sample_id, q, ours, items, text_of))
            if rch is not None:
                ev = q.evidence
                if q.category != 5:
                    for label, pool in (
                        ("observed (has a working entry)", rch.observed),
                        ("in an episode's provenance", rch.in_episode_prov),
                        ("in a fact's provenance", rch.in_fact_prov),
                        ("its observation is in an episode summary", rch.in_episode_text),
                        ("its observation became a fact", rch.in_fact_text),
                    ):
                        reach_tot[label][0] += sum(d in pool for d in ev)
                        reach_tot[label][1] += len(ev)
                if q.category != 5:
                    for d, kind in flatten_sources(items, ing.turn_dia):
                        slot_kinds[kind][0] += 1
                        slot_kinds[kind][1] += d in ev
                    for it in items[:10]:
                        top_kinds[item_kind(it)] += 1
                fine_only = [it for it in items if len(it.provenance) <= 3]
                variants.setdefault("tiermem, coarse items (>3 turns) dropped", Scores()).add(
                    q.category, flatten(fine_only, ing.turn_dia), ev
                )
                variants.setdefault("tiermem, text-mapped provenance", Scores()).add(
                    q.category, flatten_fine(items, ing, rch.fine), ev
                )
                only = ing.mem.recall_sync(ing.ctx, q.question, limit=50, tiers=["episodic"])
                variants.setdefault("tiermem, episodic tier only", Scores()).add(
                    q.category, flatten(only, ing.turn_dia), ev
                )
                only = ing.mem.recall_sync(ing.ctx, q.question, limit=50, tiers=["semantic"])
                variants.setdefault("tiermem, semantic tier only (coarse provenance)", Scores()).add(
                    q.category, flatten(only, ing.turn_dia), ev
                )
                variants.setdefault("tiermem, semantic tier only (text-mapped)", Scores()).add(
                    q.category, flatten_fine(only, ing, rch.fine), ev
                )
        ing.store_dir.cleanup()

    # -- report ---------------------------------------------------------------------------------
    cmd = "python bench/locomo.py " + " ".join(argv if argv is not None else sys.argv[1:])
    n14, n15 = systems["tiermem"].count([1, 2, 3, 4]), systems["tiermem"].count([1, 2, 3, 4, 5])
    out: list[str] = [
        "# LoCoMo evidence recall: tiermem vs baselines",
        "",
        f"Command: `{cmd.strip()}`  ",
        f"Date: {started.strftime('%Y-%m-%d %H:%M UTC')}; Python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs; "
        f"tiermem model `{args.model}{' + lexicon keys' if args.keys else ''}`, "
        f"embedder `{ing.mem.embedder.id}`.  ",
        f"Data: `{_shown(args.data)}`{' (--quick: first conversation, first 5 sessions)' if args.quick else ''}: "
        f"{len(convs)} conversations, {n_turns} turns, {n15} questions scored "
        f"({n14} in categories 1-4), {skipped} skipped for empty evidence.",
        "",
        "Recall@k: share of a question's evidence turns among the first k turns retrieved; hit@k: any of them.",
        "tiermem items map to turns through their provenance; an item covering many turns (an episode,",
        "a fact) spends one slot per turn. Baselines rank the raw turns `[session date] speaker: text`.",
        "",
        f"## Categories 1-4 (headline, n={n14})",
        "",
        *table_main(systems, [1, 2, 3, 4]),
        "",
        "## Recall@10 per category",
        "",
        *table_categories(systems, "R@10"),
        "",
        f"## Categories 1-5 (with adversarial, n={n15})",
        "",
        *table_main(systems, [1, 2, 3, 4, 5]),
        "",
        "## tiermem timings",
        "",
        "| ingest per turn (ms, all stages) | capture per turn (ms) | recall p50 (ms) | recall p95 (ms) |",
        "|---|---|---|---|",
        f"| {1000 * ingest_s / n_turns:.1f} | {1000 * capture_s / n_turns:.1f} | "
        f"{percentile(latencies, 50):.1f} | {percentile(latencies, 95):.1f} |",
        "",
        "Ingest = capture of every turn + end_session per session + consolidate + digest, wall time / turns.",
        "Recall latency: `recall_sync(ctx, question, limit=50)`, query embedding included, "
        + (
            "on the store as ingest left it (--no-optimize)."
            if args.no_optimize
            else f"after `store.optimize()` (what the janitor job does; {optimize_s:.1f}s for all conversations). "
            f"Before it, on the store as ingest left it (one table version per write), the first 20 questions of "
            f"each conversation took p50 {percentile(raw_latencies, 50):.1f} ms, "
            f"p95 {percentile(raw_latencies, 95):.1f} ms."
        ),
    ]
    if variants:
        out += [
            "",
            "## Analysis (--variants)",
            "",
            "Stored records per conversation:",
            "",
            "| conversation | " + " | ".join(rch.counts) + " |",  # type: ignore[union-attr]
            "|---|" + "---|" * len(rch.counts),  # type: ignore[union-attr]
            *counts_lines,
            "",
            "Turns with at least one observation (working entry), per speaker:",
            "",
            "| conversation | speaker | observed turns |",
            "|---|---|---|",
            *speaker_lines,
            "",
            "Evidence turns of categories 1-4 that each tier can lead back to:",
            "",
            "| evidence turn ... | share |",
            "|---|---|",
            *(f"| {label} | {a}/{b} = {100 * a / b:.1f}% |" for label, (a, b) in reach_tot.items()),
            "",
            "Where tiermem's first 10 turns come from (categories 1-4): the kind of item that put each turn",
            "slot there, and how many of those slots are evidence; plus the kinds among the top 10 items:",
            "",
            "| item kind | turn slots in top 10 | evidence among them | items among the top 10 |",
            "|---|---|---|---|",
            *(
                f"| {k} | {a} | {b} ({100 * b / max(a, 1):.1f}%) | {top_kinds.get(k, 0)} |"
                for k, (a, b) in sorted(slot_kinds.items(), key=lambda kv: -kv[1][0])
            ),
            *(f"| {k} | 0 | 0 | {n} |" for k, n in top_kinds.items() if k not in slot_kinds),
            "",
            "Analysis variants (categories 1-4; the same recall, items filtered or mapped differently):",
            "",
            *table_main({**{"tiermem": systems["tiermem"]}, **variants, "bm25": systems["bm25"]}, [1, 2, 3, 4]),
            "",
            "R@10 per category:",
            "",
            *table_categories({**{"tiermem": systems["tiermem"]}, **variants, "bm25": systems["bm25"]}, "R@10"),
        ]
    report = "\n".join(out) + "\n"
    report = report.replace("\n\nRecall@k:", f"\n\nCode: {_git_state()}.\n\nRecall@k:", 1)
    print(report)
    if args.dump_misses:
        print(f"## {min(args.dump_misses, len(misses))} of {len(misses)} cat 1-4 questions tiermem misses at 10\n")
        for sample, q, ours, items, text_of in misses[: args.dump_misses]:
            print(f"### [{sample}] cat {q.category} {CATEGORIES[q.category]}: {q.question}  (answer: {q.answer})")
            for d in q.evidence:
                print(f"- evidence {d}: {text_of.get(d, '?')}")
            print(f"- first 10 turns recalled: {', '.join(ours[:10])}")
            for it in items[:5]:
                print(f"  - top [{it.tier}/{it.subject} {it.score:.3f}, {len(it.provenance)} turns] {it.text[:200]}")
            print()
    if args.out:
        Path(args.out).write_text(report)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
