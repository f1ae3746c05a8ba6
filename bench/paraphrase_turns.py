"""Recall by meaning over a conversation: the paraphrase pairs' memories said as turns, not stored as facts.

``bench/paraphrase.py`` writes each memory as a semantic fact. Agents mostly hold turns: a long
conversation's log, where most of what recall returns is raw turns (issue 34: on a second
conversation benchmark 97% of recall's first ten items were turns, and on its questions sharing no
word with their evidence recall fell below plain dense search over the same turns). Here every
pair's memory and the filler (``tests/data/filler.json``) are said by the user, one turn each, in a
shuffled order (a fixed seed), ``--per-session`` turns a session, one session a day, captured
through ``system(model="rules")`` with ``end_session`` and ``consolidate`` as an agent would (so
the store holds the turn log, episodes, facts the rules observer drew, and working memory).

For each pair's cue: the rank of its memory's turn in ``recall(ctx, cue, limit=10)``, items mapped to
turns through their provenance (an episode spends a slot per turn, as in ``bench/locomo.py``);
hit@1, hit@3, hit@10. Baseline: the raw dense cosine of the same embedder over the same turns' text
(no gate: it always returns something). For each unrelated cue: does recall return anything at all.

Usage (from the repo root):
    python bench/paraphrase_turns.py                 # 400 turns (every pair's memory + filler), 10 a session
    python bench/paraphrase_turns.py --size 4000 --per-session 20
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paraphrase
from _machine import cpu_name

from tiermem import MemoryContext, system
from tiermem.memory._embed._names import resolve_embedder
from tiermem.memory._store import Where
from tiermem.memory.testing import FrozenClock

NAMESPACE = "paraphrase-turns"
SEED = 7


async def _say(mem: Any, texts: Sequence[str], per_session: int, clock: FrozenClock) -> dict[str, int]:
    """Capture every text as a user turn, sessions of ``per_session``; turn id -> index of its text."""
    base = MemoryContext(namespace=NAMESPACE, user_id="u")
    order = list(range(len(texts)))
    random.Random(SEED).shuffle(order)
    for start in range(0, len(order), per_session):
        ctx = base.model_copy(update={"session_id": f"s{start // per_session}"})
        clock.set(paraphrase.START + timedelta(days=start // per_session))
        for j in order[start : start + per_session]:
            await mem.capture(ctx, [{"role": "user", "content": texts[j]}], metadata={"memory": j})
            clock.advance(timedelta(seconds=30))
        await mem.end_session(ctx)
    await mem.consolidate(base)
    turns = mem.store.query("turns", Where(eq={"namespace": NAMESPACE, "user_id": "u"}))
    return {t.id: int(t.metadata["memory"]) for t in turns}


def _ranked(items: Sequence[Any], turn_of: dict[str, int]) -> list[int]:
    """Recalled items -> the memories (text indexes) their turns said, in rank order, each once."""
    out: list[int] = []
    for item in items:
        for j in sorted({turn_of[p] for p in item.provenance if p in turn_of}):
            if j not in out:
                out.append(j)
    return out


def run(size: int, per_session: int, embedder_name: str | None) -> dict[str, Any]:
    embedder = resolve_embedder(embedder_name)
    pairs, unrelated, filler = paraphrase.load()
    [(idx, texts)] = paraphrase.stores(pairs, filler, max(size, len(pairs)))
    with tempfile.TemporaryDirectory(prefix="tiermem-paraphrase-turns-") as folder:
        clock = FrozenClock(paraphrase.START)
        mem = system(model="rules", store=folder, embedder=embedder, clock=clock, semantic=True)
        t0 = time.perf_counter()
        turn_of = asyncio.run(_say(mem, texts, per_session, clock))
        ingest = time.perf_counter() - t0
        mem.store.optimize()
        ctx = MemoryContext(namespace=NAMESPACE, user_id="u")
        vectors = embedder.embed(list(texts))
        hits = {name: {1: 0, 3: 0, 10: 0} for name in ("tiermem", "dense")}
        missed = []
        for i in idx:
            cue = pairs[i]["cue"]
            found = _ranked(asyncio.run(mem.recall(ctx, cue, limit=10)), turn_of)
            dense = np.argsort(-(vectors @ embedder.embed([cue])[0]), kind="stable")[:10].tolist()
            for name, order in (("tiermem", found), ("dense", dense)):
                rank = order.index(i) if i in order else 10**6
                for k in (1, 3, 10):
                    hits[name][k] += rank < k
            if i not in found[:3] and i in dense[:3]:
                missed.append(pairs[i]["id"])
        returned = sum(bool(asyncio.run(mem.recall(ctx, cue, limit=10))) for cue in unrelated)
    return {
        "turns": len(texts), "cues": len(idx), "hits": hits, "missed": missed, "unrelated": len(unrelated),
        "false_positives": returned, "ingest_s": ingest, "embedder": embedder.id,
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=400, help="turns in the conversation (at least the pairs)")
    parser.add_argument("--per-session", type=int, default=10, help="turns per session")
    parser.add_argument("--embedder", default=None, help="embedder name (default: the shipped default)")
    args = parser.parse_args(argv)
    out = run(args.size, args.per_session, args.embedder)
    n = out["cues"]
    print(f"{out['turns']} turns, {args.per_session} a session, {n} paraphrase cues, embedder {out['embedder']}, "
          f"{cpu_name()}; ingest {out['ingest_s']:.0f}s")  # fmt: skip
    print("| system | hit@1 | hit@3 | hit@10 |\n|---|---|---|---|")
    for name, h in out["hits"].items():
        print(f"| {name} | {h[1] / n:.2f} | {h[3] / n:.2f} | {h[10] / n:.2f} |")
    print(f"unrelated cues recalling anything: {out['false_positives']}/{out['unrelated']} (dense: all)")
    print(f"in dense's first 3, not in recall's: {len(out['missed'])} {' '.join(out['missed'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
