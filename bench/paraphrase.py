"""Recall by meaning: paraphrased cues that share no word with their memory, and unrelated cues.

Data: ``tests/data/paraphrases.json`` (memory/cue pairs written for tiermem whose cue shares no
content word with its memory, and cues unrelated to everyday personal memory) and
``tests/data/filler.json`` (deterministic everyday memories, ``bench/_filler.py``).

Stores of N memories per user, N in 3, 40, 400, 4,000, written as semantic facts in batches
through ``Store.upsert`` (the rows recall reads; no pipeline). Every pair's memory sits in a
store of exactly N memories: N=3 groups the pairs' memories three per user, N=40 ten pairs per
user plus filler, N=400 and 4,000 hold every pair's memory plus filler in one user's store.

For each pair: is its memory first (hit@1) or in the first three (hit@3) of
``recall_sync(ctx, cue, limit=10)``; for each unrelated cue on each store: does recall return
anything at all (a false positive). Baselines of the same run over the same memories: the raw
dense cosine of the same embedder (top-k, no gate: it always returns something) and BM25
(``rank_bm25`` over :func:`tiermem.memory._text.words` minus stop words; returns the memories
with a positive score).

With ``--keys LEXICON`` every memory carries the retrieval keys the scripted fake model gives
(:class:`tiermem.memory.testing.Lexicon`, e.g. ``tests/data/lexicon.json``): searched by full text and
ranked on (never embedded: :func:`embedded_text`), as the pipeline stores them. ``--embed-keys``
measures the alternative the pipeline does not take: the vector of "text (keys: a, b)". The
baselines read the text alone.

With ``--third-person`` every memory is stored as an observer writes it ("The user can't swim.", the
rules observer's rewrite of "I can't swim."), the cues unchanged: what an agent's facts look like.
The baselines read the same stored text.

Usage (from the repo root):
    python bench/paraphrase.py                                  # default embedder
    python bench/paraphrase.py --third-person --sizes 40 400    # memories as an observer writes them
    python bench/paraphrase.py --keys tests/data/lexicon.json   # memories with retrieval keys
    python bench/paraphrase.py --embedder hashing --sizes 3 40  # any name resolve_embedder takes
    python bench/paraphrase.py --out bench/RESULTS-paraphrase.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import warnings
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

from _machine import cpu_name

from tiermem import Fact, MemoryContext, create_memory_capability
from tiermem.memory._embed._names import resolve_embedder
from tiermem.memory._text import STOP_WORDS, words
from tiermem.memory._tiers._tiers import embedded_text
from tiermem.memory.testing import FrozenClock, Lexicon
from tiermem.pipelines._sentences import rewrite_first_person

warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
NAMESPACE = "paraphrase"
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SIZES = (3, 40, 400, 4000)


def load() -> tuple[list[dict[str, str]], list[str], list[str]]:
    data = json.loads((DATA / "paraphrases.json").read_text())
    filler = json.loads((DATA / "filler.json").read_text())["memories"]
    return data["pairs"], data["unrelated"], filler


def stores(pairs: Sequence[dict[str, str]], filler: Sequence[str], size: int) -> list[tuple[list[int], list[str]]]:
    """Per user: the pairs whose memory it holds, and its ``size`` memories (those, then filler).

    Below the number of pairs a user holds up to 10 pairs' memories (3 when ``size`` is 3); from
    there on one user holds every pair's memory and the rest is filler.
    """
    n = len(pairs)
    per = min(size, 10) if size < n else n
    out = []
    cursor = 0
    for start in range(0, n, per):
        idx = list(range(start, min(start + per, n)))
        need = size - len(idx)
        extra = [filler[(cursor + k) % len(filler)] for k in range(need)]
        cursor += need
        out.append((idx, [pairs[i]["memory"] for i in idx] + extra))
    return out


def keyed_text(fact: Fact) -> str:
    """The rejected alternative to :func:`embedded_text`: the text with its keys (``--embed-keys``)."""
    return f"{fact.text} (keys: {', '.join(fact.keys)})" if fact.keys else fact.text


def observed(text: str) -> str:
    """``text`` as the rules observer writes a user's statement: in the third person ("The user can't swim.")."""
    written = rewrite_first_person(text)
    return written[:1].upper() + written[1:]


def write_facts(
    mem: Any, user: str, texts: Sequence[str], embedder: Any, lexicon: Lexicon | None, *, embed_keys: bool = False
) -> None:
    """The memories as facts (with the lexicon's keys when given), stored with the vectors of their embedded text."""
    ctx = MemoryContext(namespace=NAMESPACE, user_id=user)
    facts = [
        Fact.new(
            ctx,
            subject="user",
            text=t,
            now=START + timedelta(minutes=i),
            provenance=(f"m{i}",),
            keys=lexicon.keys(t) if lexicon else (),
        )
        for i, t in enumerate(texts)
    ]
    vectors = embedder.embed([(keyed_text if embed_keys else embedded_text)(f) for f in facts])
    for at in range(0, len(facts), 2000):
        mem.store.upsert("facts", facts[at : at + 2000], vectors[at : at + 2000])


@dataclass
class Tally:
    hit1: int = 0
    hit3: int = 0
    cues: int = 0
    fp: int = 0
    unrelated: int = 0
    returned: list[int] = field(default_factory=list)  # items returned per unrelated cue

    def row(self) -> str:
        return (
            f"{self.hit1 / self.cues:.2f} | {self.hit3 / self.cues:.2f} | "
            f"{self.fp}/{self.unrelated} ({100 * self.fp / max(self.unrelated, 1):.1f}%)"
        )


def rank_of(order: Sequence[str], target: str) -> int:
    return order.index(target) if target in order else 10**6


def run_size(
    size: int,
    embedder: Any,
    pairs: Sequence[dict[str, str]],
    unrelated: Sequence[str],
    filler: Sequence[str],
    recall: dict[str, Any] | None = None,
    lexicon: Lexicon | None = None,
    embed_keys: bool = False,
) -> tuple[dict[str, Tally], float, list[float]]:
    tallies = {name: Tally() for name in ("tiermem", "dense", "bm25")}
    latencies: list[float] = []
    build = 0.0
    with tempfile.TemporaryDirectory(prefix="tiermem-paraphrase-") as folder:
        mem = create_memory_capability(
            store=folder,
            embedder=embedder,
            clock=FrozenClock(START + timedelta(days=1)),
            working=False,
            recall=recall,
        )
        groups = stores(pairs, filler, size)
        for g, (_, texts) in enumerate(groups):
            t0 = time.perf_counter()
            write_facts(mem, f"u{g}", texts, embedder, lexicon, embed_keys=embed_keys)
            build += time.perf_counter() - t0
        mem.store.optimize(cleanup_older_than=timedelta(0))
        for g, (idx, texts) in enumerate(groups):
            ctx = MemoryContext(namespace=NAMESPACE, user_id=f"u{g}")
            vectors = embedder.embed(list(texts))
            bm25 = BM25Okapi([[w for w in words(t) if w not in STOP_WORDS] or ["_"] for t in texts])
            for i in idx:
                target = pairs[i]["memory"]
                cue = pairs[i]["cue"]
                t0 = time.perf_counter()
                found = [item.text for item in mem.search.recall(ctx, cue, limit=10, tiers=None, subject=None)]
                latencies.append(1000 * (time.perf_counter() - t0))
                cue_vector = embedder.embed([cue])[0]
                dense = [texts[j] for j in np.argsort(-(vectors @ cue_vector), kind="stable")[:10]]
                scores = bm25.get_scores([w for w in words(cue) if w not in STOP_WORDS])
                lexical = [texts[j] for j in np.argsort(-scores, kind="stable")[:10] if scores[j] > 0]
                for name, order in (("tiermem", found), ("dense", dense), ("bm25", lexical)):
                    r = rank_of(order, target)
                    tallies[name].cues += 1
                    tallies[name].hit1 += r < 1
                    tallies[name].hit3 += r < 3
            for cue in unrelated:
                returned = mem.search.recall(ctx, cue, limit=10, tiers=None, subject=None)
                scores = bm25.get_scores([w for w in words(cue) if w not in STOP_WORDS])
                for name, count in (
                    ("tiermem", len(returned)),
                    ("dense", min(10, len(texts))),
                    ("bm25", int((scores > 0).sum())),
                ):
                    tallies[name].unrelated += 1
                    tallies[name].fp += count > 0
                    tallies[name].returned.append(count)
    return tallies, build, latencies


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default=None, help="embedder name for resolve_embedder (default: the default)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="memories per store")
    parser.add_argument("--recall", default=None, help="ranking overrides as JSON, e.g. '{\"session_weight\": 0}'")
    parser.add_argument("--keys", default=None, help="lexicon JSON: memories carry the scripted fake's retrieval keys")
    parser.add_argument("--embed-keys", action="store_true", help="with --keys: embed 'text (keys: ...)' instead")
    parser.add_argument("--third-person", action="store_true", help="memories as an observer writes them")
    parser.add_argument("--out", default=None, help="write the markdown report here")
    args = parser.parse_args(argv)
    pairs, unrelated, filler = load()
    if args.third_person:
        pairs = [{**p, "memory": observed(p["memory"])} for p in pairs]
        filler = [observed(t) for t in filler]
    embedder = resolve_embedder(args.embedder)
    recall = json.loads(args.recall) if args.recall else None
    lexicon = Lexicon.load(args.keys) if args.keys else None
    started = datetime.now(UTC)
    rows: list[str] = []
    all_latencies: list[float] = []
    for size in args.sizes:
        tallies, build, latencies = run_size(size, embedder, pairs, unrelated, filler, recall, lexicon, args.embed_keys)
        all_latencies += latencies
        for name, tally in tallies.items():
            rows.append(f"| {size} | {name} | {tally.row()} |")
        print(f"size {size}: built in {build:.1f}s; " + "; ".join(f"{k} {t.row()}" for k, t in tallies.items()))
    cmd = "python bench/paraphrase.py " + " ".join(argv if argv is not None else sys.argv[1:])
    report = "\n".join(
        [
            "# Recall by meaning: paraphrases and unrelated cues",
            "",
            f"Command: `{cmd.strip()}`  ",
            f"Date: {started.strftime('%Y-%m-%d %H:%M UTC')}; Python {platform.python_version()}, {cpu_name()}, "
            f"{os.cpu_count()} CPUs; embedder `{embedder.id}`.  ",
            f"Data: `tests/data/paraphrases.json` ({len(pairs)} memory/cue pairs sharing no content word, "
            f"{len(unrelated)} unrelated cues), filler from `tests/data/filler.json`.",
            "",
            "hit@k: the pair's memory among the first k recalled (tiermem: `recall(ctx, cue, limit=10)`, every",
            "enabled tier; dense: raw cosine of the same embedder, no gate; bm25: memories with a positive score).",
            "false positives: unrelated cues that return anything, over (users x unrelated cues).",
            "",
            "| memories per store | system | hit@1 | hit@3 | false positives |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"tiermem recall latency over the paraphrase cues: p50 {np.percentile(all_latencies, 50):.1f} ms, "
            f"p95 {np.percentile(all_latencies, 95):.1f} ms (query embedding included).",
            "",
        ]
    )
    print(report)
    if args.out:
        Path(args.out).write_text(report)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
