"""Which ranking parameters pay on each dev conversation separately (issue 34's tuning protocol).

Each LoCoMo dev conversation is ingested once (as ``bench/locomo.py`` does: rules model, the default
embedder, every session captured, consolidated, digested); then every variant re-runs recall over
the same store with one ranking parameter moved to its neutral value (a weight to 0, the tier
priors to 1, a gate off) and is scored on each conversation on its own: R@10 over categories 1-4,
over the questions sharing no content word with their evidence (the disjoint slice), and over
category 5. The paraphrase bench (``bench/paraphrase.py``) runs each variant beside it, at 40
and 400 memories per store.

A parameter pays when neutralising it loses R@10 on *both* conversations (each beyond the noise of
one question) without a gain on the paraphrase set; the protocol is in ``bench/README.md``.

Usage (from the repo root):
    python bench/ablation.py                    # every variant, both conversations, paraphrases
    python bench/ablation.py --only baseline "no session_weight" --no-paraphrase
    python bench/ablation.py --out bench/RESULTS-ablation.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo
import paraphrase
from _locomo_data import load
from _machine import cpu_name

from tiermem import create_memory_capability
from tiermem.memory._embed._names import resolve_embedder

DISJOINT = str(Path(locomo.DEFAULT_DATA).with_name("locomo-dev-disjoint.json"))
OLD_TIERS = {"working": 1.0, "episodic": 0.8, "semantic": 1.0, "digest": 0.7, "relation": 0.9}

# name -> (RecallOptions overrides, free parameters the row stands for)
VARIANTS: dict[str, tuple[dict[str, Any], int]] = {
    "baseline": ({}, 0),
    "dense only (lexical_weight 0)": ({"lexical_weight": 0.0}, 1),
    "lexical only (dense_weight 0)": ({"dense_weight": 0.0}, 0),
    "no relative gate (min_relevance 0)": ({"min_relevance": 0.0}, 1),
    "meaning gate at 1% (unrelated_rate 0.01)": ({"unrelated_rate": 0.01}, 1),
    "no priors (prior_weight 0)": ({"prior_weight": 0.0}, 2),  # + recency_half_life, only acting through it
    "no subject_boost": ({"subject_boost": 0.0}, 1),
    "no coverage (coverage_weight 0)": ({"coverage_weight": 0.0}, 0),
    "no session_weight": ({"session_weight": 0.0}, 1),
    "no reply_weight": ({"reply_weight": 0.0}, 1),
    "no replied_weight": ({"replied_weight": 0.0}, 1),
    "no neighbours (reply and replied 0)": ({"reply_weight": 0.0, "replied_weight": 0.0}, 0),
    "one neighbour weight (0.15 each)": ({"reply_weight": 0.15, "replied_weight": 0.15}, 0),
    # the parameters removed by this protocol (issue 34), at their old tuned values
    "old tier priors (0.8 episodic, 0.7 digest, 0.9 relation)": ({"tier_weights": OLD_TIERS}, 0),
    "old meaning_weight 0.5": ({"meaning_weight": 0.5}, 0),
    "old coverage_weight 0.5": ({"coverage_weight": 0.5}, 0),
    # issue 34 item 4, multi-hop: switches off by default, measured here
    "session diversity 0.05 (MMR over sessions)": ({"session_diversity": 0.05}, 1),
    "session diversity 0.2 (MMR over sessions)": ({"session_diversity": 0.2}, 1),
    "at most 5 per session first": ({"per_session": 5}, 1),
    "second hop from the first result": ({"second_hop": 1}, 0),
    "second hop from the first 3 results": ({"second_hop": 3}, 0),
}


def _r10(scores: locomo.Scores, cats: Sequence[int]) -> float | None:
    return scores.mean(cats, "R@10")


def run_conversation(
    conv: Any, disjoint: set[str], variants: Sequence[str], args: argparse.Namespace
) -> dict[str, Any]:
    """Ingest one conversation once; score every variant and the dense baseline on it."""
    ing = locomo.ingest(conv, argparse.Namespace(keys=None, model="rules", embedder=args.embedder, recall=None))
    ing.mem.store.optimize()
    print(f"{conv.sample_id}: {ing.turns} turns ingested in {ing.seconds:.0f}s", file=sys.stderr)
    base = locomo.Baselines(conv, ing.mem.embedder)
    questions = [q for q in conv.questions if q.evidence]
    rows: dict[str, Any] = {}
    for name in [*variants, "dense (raw turns)"]:
        full, slice_ = locomo.Scores(), locomo.Scores()
        if name == "dense (raw turns)":
            ranked = {q.question: base.rank_all(q.question)["dense"] for q in questions}
        else:
            cap = create_memory_capability(
                store=ing.mem.store, embedder=ing.mem.embedder, clock=ing.mem.clock, recall=VARIANTS[name][0]
            )
            ranked = {
                q.question: locomo.flatten(cap.recall_sync(ing.ctx, q.question, limit=50), ing.turn_dia)
                for q in questions
            }
        for q in questions:
            full.add(q.category, ranked[q.question], q.evidence)
            if q.question in disjoint:
                slice_.add(q.category, ranked[q.question], q.evidence)
        rows[name] = {
            "r10": _r10(full, [1, 2, 3, 4]),
            "disjoint": _r10(slice_, [1, 2, 3, 4]),
            "adversarial": _r10(full, [5]),
            "multi-hop": _r10(full, [1]),
            "n": full.count([1, 2, 3, 4]),
            "n_disjoint": slice_.count([1, 2, 3, 4]),
        }
        print(f"  {name}: {rows[name]}", file=sys.stderr)
    ing.store_dir.cleanup()
    return rows


def run_paraphrases(variants: Sequence[str], sizes: Sequence[int], embedder: Any) -> dict[str, dict[int, str]]:
    pairs, unrelated, filler = paraphrase.load()
    out: dict[str, dict[int, str]] = {}
    for name in variants:
        out[name] = {}
        for size in sizes:
            tallies, _, _ = paraphrase.run_size(size, embedder, pairs, unrelated, filler, recall=VARIANTS[name][0])
            t, d = tallies["tiermem"], tallies["dense"]
            out[name][size] = f"{t.hit3 / t.cues:.2f} ({d.hit3 / d.cues:.2f}) fp {t.fp}/{t.unrelated}"
            print(f"  paraphrase {name} @{size}: {out[name][size]}", file=sys.stderr)
    return out


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _delta(value: float | None, base: float | None) -> str:
    if value is None or base is None:
        return _cell(value)
    return f"{value:.1f} ({value - base:+.1f})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=locomo.DEFAULT_DATA, help="LoCoMo JSON (a list of conversations)")
    parser.add_argument("--disjoint", default=DISJOINT, help="the same conversations' no-shared-word questions")
    parser.add_argument("--embedder", default=None, help="embedder name (default: the shipped default)")
    parser.add_argument("--only", nargs="+", default=None, metavar="VARIANT", help="run these variants only")
    parser.add_argument("--no-paraphrase", action="store_true", help="skip the paraphrase bench")
    parser.add_argument("--sizes", type=int, nargs="+", default=[40, 400], help="paraphrase store sizes")
    parser.add_argument("--out", default=None, help="write the markdown report here")
    args = parser.parse_args(argv)
    variants = args.only or list(VARIANTS)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    if "baseline" not in variants:
        variants = ["baseline", *variants]

    started = datetime.now(UTC)
    convs = load(args.data)
    disjoint = {q.question for c in load(args.disjoint) for q in c.questions}
    per_conv = {conv.sample_id: run_conversation(conv, disjoint, variants, args) for conv in convs}
    para = {} if args.no_paraphrase else run_paraphrases(variants, args.sizes, resolve_embedder(args.embedder))

    ids = list(per_conv)
    head = ["variant", "tuned values it stands for"]
    head += [f"{i} R@10 (n={per_conv[i]['baseline']['n']})" for i in ids]
    head += [f"{i} disjoint (n={per_conv[i]['baseline']['n_disjoint']})" for i in ids]
    head += [f"{i} adversarial" for i in ids]
    head += [f"{i} multi-hop" for i in ids]
    head += [f"paraphrase hit@3 (dense) @{s}" for s in args.sizes if para]
    lines = [
        "# Ranking ablation per dev conversation",
        "",
        f"Command: `{' '.join(['python bench/ablation.py', *(argv if argv is not None else sys.argv[1:])])}`  ",
        f"Date: {started.strftime('%Y-%m-%d %H:%M UTC')}; Python {platform.python_version()}, "
        f"{cpu_name()}, {os.cpu_count()} CPUs.",
        "",
        "R@10 over categories 1-4 per conversation, each variant on the same ingested store (change",
        "against the baseline in brackets). *dense (raw turns)*: the same embedder over the raw turns.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for name in [*variants, "dense (raw turns)"]:
        base = {i: per_conv[i]["baseline"] for i in ids}
        row = [name, str(VARIANTS[name][1]) if name in VARIANTS else "-"]
        for key in ("r10", "disjoint", "adversarial", "multi-hop"):
            row += [_delta(per_conv[i][name][key], base[i][key]) for i in ids]
        row += [para[name][s] for s in args.sizes] if name in para else ["-"] * (len(args.sizes) if para else 0)
        lines.append("| " + " | ".join(row) + " |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    json.dump(per_conv, sys.stderr, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
