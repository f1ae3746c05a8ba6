"""Bulk import throughput: ``import_conversations`` over a real history (issue 13 item 5, issue 15 item 2).

Workload: the first LoCoMo development conversation (``../shared/data/locomo-dev.json``, ``conv-26``): its
sessions in order, each LoCoMo turn one captured turn (``{"role": "user", "name": speaker, "content": text}``,
dated by the session's date plus 30 s per turn), the first speaker aliased to the user as in
``bench/locomo.py``. Every run starts from an empty LanceDB store in a temporary folder.

Configurations, interleaved run by run (``--runs``, default 3; medians reported, with the slowest and fastest run):

- ``journal bulk`` (the baseline): the journal step of the bulk import alone, ``tiers.journal_new(turns)`` per
  session (the session's turns embedded in one batch, inserted if absent in one commit) in a worker thread.
  Nothing else is done to the turns: no import of the same turns can beat it.
- ``journal per turn``: ``tiers.journal(turn)`` per turn (embed one, insert if absent), capture's journal write.
- ``rules c1`` / ``rules c8``: ``import_conversations(ctx, history, concurrency=1 | 8)`` with the offline rules
  model: sessions journaled, observed and written in bulk and ended by groups of 4 in order, full batches of
  episodes consolidated as they come, then the rest consolidated and the user digested.
- ``fake 200ms c8``: the same at ``concurrency=8`` with ``FunctionModel(latency=0.2)`` through real litellm,
  declaring a 128k context window and answering every stage validly (one observation per message, the episode
  from its entries, one fact per
  episode sentence, the digest from the facts). ``fake 200ms c1`` on request (``--configs "fake 200ms c1"``).
  The imports observe by windows of consecutive turns (``observe_window``, the library default unless
  ``--observe-window 1,4,8`` asks for several, interleaved).

``--embedder`` and ``--encode`` take comma-separated lists: every configuration runs with each embedder
(``default``, ``minilm-static``, ``hashing``) and each episode-encoding mode (``session``, ``consolidation``,
``library``: the library default), interleaved; each row's ratio is to the journal baseline of its embedder.

``turns/s`` is end to end: the whole ``import_conversations`` call (or the whole journal loop) over the
history's turns. ``commits / turn`` counts the store's commits (record writes: ``upsert``, ``insert``,
``insert_absent``; ``delete``, ``dedupe``, lease ``claim``/``unclaim`` and their ``_many`` forms),
``reads / turn`` its reads (``query`` (``get`` included), ``count``, ``column_values``, ``vector_search``,
``text_search``, ``lease_row``), both counted by wrapping the
run's store. ``--profile`` also
runs one ``rules c1`` import under cProfile (the event loop's thread and every worker thread) and reports where
the time goes.

Usage (from the repo root):
    python bench/import_history.py             # full run: conv-26, 19 sessions, 3 runs -> bench/RESULTS-import.md
    python bench/import_history.py --quick     # smoke run: 3 sessions, 1 run; prints only
    python bench/import_history.py --profile   # + a cProfile of one rules-model import
    python bench/import_history.py --embedder hashing --configs journal,rules --out /tmp/import-hashing.md
    python bench/import_history.py --configs "journal bulk,fake 200ms c8" --observe-window 1,4,8   # windows
    python bench/import_history.py --profile --embedder default,minilm-static --encode session,consolidation \
        --configs "journal bulk,rules,fake" --out bench/RESULTS-import.md   # the issue 15 matrix
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import cProfile
import math
import os
import platform
import pstats
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch litellm's cost map
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _locomo_data import Conversation as LocomoConversation
from _locomo_data import load
from _machine import cpu_name, package_version

from tiermem import Embedder, HashingEmbedder, MemoryContext, Turn, system
from tiermem.memory._embed._names import resolve_embedder
from tiermem.memory._identity import turn_id
from tiermem.memory._records import Message
from tiermem.memory._write._capture import _speaker
from tiermem.memory._write._system import MemorySystem
from tiermem.memory.testing import FunctionModel, StageCall, forbid_real_model_requests
from tiermem.prompts import consolidate, digest, encode_consolidate, encode_episode, observe

forbid_real_model_requests()  # a benchmark never reaches a real provider
warnings.filterwarnings("ignore", message=r"Items? .* `ReadOnly` qualifier")  # litellm import-time noise

NAMESPACE = "bench"
USER = "u-import"
STAGES = ("observe", "observe_window", "encode_episode", "consolidate", "encode_consolidate", "digest")
FAKE_LATENCY = 0.2
FAKE_WINDOW = 128_000
TURN_STEP = timedelta(seconds=30)
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json"
ANALYSIS = "<!-- analysis: written by hand, kept when the bench rewrites the tables above -->"
AIM_RULES_TPS = 200.0
AIM_FAKE_C8_TPS = 30.0
CONFIGS = ("journal bulk", "journal per turn", "rules c1", "rules c8", "fake 200ms c8", "fake 200ms c1")
PACKAGES = ("lancedb", "litellm", "pyarrow", "onnxruntime", "pydantic")
GROUPS = {"journal": CONFIGS[:2], "rules": CONFIGS[2:4], "fake": CONFIGS[4:5]}
BASELINE = "journal bulk"
COMMITS = ("write", "delete", "dedupe", "claim", "unclaim", "claim_many", "unclaim_many")
READS = ("query", "count", "column_values", "vector_search", "text_search", "lease_row")
# The part of the store each is counted on (else the store itself): the one every call of it goes through,
# the store's own calls included (a write's dedupe, ``get``'s query, a search's count, ``claim_many``'s rows).
STORE_PARTS = {
    "write": "_writes",
    "dedupe": "_tables",
    "query": "_reads",
    "count": "_reads",
    "lease_row": "_lease_table",
}


# -- workload -----------------------------------------------------------------------------------


def history(conv: LocomoConversation, sessions: int | None) -> list[dict[str, Any]]:
    """The conversation as ``import_conversations`` input: one dict per session, turns dated."""
    return [
        {
            "session_id": f"session_{s.number}",
            "turns": [
                {"at": s.when + i * TURN_STEP, "messages": [{"role": "user", "name": t.speaker, "content": t.text}]}
                for i, t in enumerate(s.turns)
            ],
        }
        for s in conv.sessions[:sessions]
    ]


def fake_answer(messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
    """A valid, content-preserving answer to whichever stage is asked, from its typed input.

    Every message is observed (LoCoMo turns are named speakers, so ``tests/fakes.py``'s "user messages
    only" would observe nothing), all filed under "user".
    """
    inputs = call.inputs
    if isinstance(inputs, observe.Input):
        said = [m.content for m in inputs.messages if m.content]
        return {"observations": [{"subject": "user", "kind": "fact", "text": s[:500], "salience": 0.6} for s in said]}
    if isinstance(inputs, encode_episode.Input):
        seen = [e.text for e in inputs.entries]
        return {"summary": " ".join(seen)[:3900] or "The user chatted.", "subjects": ["user"], "salience": 0.6}
    if isinstance(inputs, consolidate.Input):  # encode_consolidate's input is one too: it also gets the summaries
        sentences = [s for e in inputs.episodes for s in re.split(r"(?<=[.!?])\s+", e.summary) if s.strip()]
        answer: dict[str, Any] = {
            "operations": [{"op": "add", "subject": "user", "text": s} for s in sentences[:100]],
            "edges": [],
        }
        if isinstance(inputs, encode_consolidate.Input):
            answer["episodes"] = [
                {"id": e.id, "summary": e.summary[:3900] or "The user chatted.", "subjects": ["user"], "salience": 0.6}
                for e in inputs.episodes
                if e.id in inputs.encode
            ]
        return answer
    if isinstance(inputs, digest.Input):
        return {"text": " ".join(f.text for f in inputs.facts[:8]) or "The user has no facts yet."}
    return {"merges": []}


# -- runs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One configuration with one embedder and one episode-encoding mode: a row of the report."""

    config: str
    embedder_name: str
    embedder: Embedder
    encode: str
    label: str
    window: int | None = None
    """``observe_window=`` of the import (None: the library default)."""

    @property
    def journal(self) -> bool:
        return self.config.startswith("journal")


def variants(
    configs: Sequence[str],
    embedders: Sequence[tuple[str, Embedder]],
    encodes: Sequence[str],
    windows: Sequence[int | None] = (None,),
) -> list[Variant]:
    """Every configuration with every embedder (and, but the journal's, every encoding and observe window),
    labelled by what varies."""
    out = []
    for name, embedder in embedders:
        for config in configs:
            journal = config.startswith("journal")
            for encode in encodes[:1] if journal else encodes:
                for window in windows[:1] if journal else windows:
                    parts = [config]
                    if len(embedders) > 1:
                        parts.append(name)
                    if len(encodes) > 1 and not journal:
                        parts.append(f"encode={encode}")
                    if len(windows) > 1 and not journal:
                        parts.append(f"window={'default' if window is None else window}")
                    out.append(Variant(config, name, embedder, encode, " / ".join(parts), None if journal else window))
    return out


def _episodic(encode: str) -> dict[str, Any] | None:
    return None if encode == "library" else {"encode": encode}


@dataclass
class RunResult:
    """One configuration, one run."""

    turns: int
    seconds: float
    phase_s: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    usage: dict[str, dict[str, float]] = field(default_factory=dict)
    deferred: int = 0
    episodes: int = 0
    facts: int = 0
    texts: int = 0  # texts the run embedded
    embed_alone_s: float = 0.0  # the same embedding calls replayed alone, one after another, after the run

    @property
    def tps(self) -> float:
        return self.turns / self.seconds

    def store_per_turn(self, names: Sequence[str]) -> float:
        return sum(self.calls.get(n, 0) for n in names) / self.turns

    def per_turn(self, stage: str | None, key: str) -> float:
        stages = [stage] if stage else list(self.usage)
        return sum(self.usage.get(s, {}).get(key, 0.0) for s in stages) / self.turns


def _turns(mem: MemorySystem, ctx: MemoryContext, session: dict[str, Any]) -> list[Turn]:
    sid = session["session_id"]
    aliases = mem.tiers.aliases(ctx)
    out = []
    for seq, raw in enumerate(session["turns"]):
        msgs = tuple(Message(**m) for m in raw["messages"])
        out.append(
            Turn(
                id=turn_id(ctx, session_id=sid, key=f"bench-{seq}"),
                key=f"bench-{seq}",
                namespace=ctx.namespace,
                user_id=ctx.user_id,
                session_id=sid,
                seq=seq,
                messages=msgs,
                subject=_speaker(msgs, aliases),
                created_at=raw["at"],
                dated=True,
            )
        )
    return out


def _timed(result: RunResult, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its wall time added to ``result.phase_s[phase]``."""

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            result.phase_s[phase] = result.phase_s.get(phase, 0.0) + time.perf_counter() - started

    return wrapper


def _count_store_calls(mem: MemorySystem, result: RunResult) -> None:
    """Count the run's commits and reads (instance attributes shadow the methods of the store and its parts,
    :data:`STORE_PARTS`; thread-safe enough: a lost increment under a race only undercounts by one)."""
    store = mem.store
    lock = threading.Lock()
    for name in (*COMMITS, *READS):
        owner = getattr(store, STORE_PARTS[name]) if name in STORE_PARTS else store
        real = getattr(owner, name)

        def counted(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            with lock:
                result.calls[_name] = result.calls.get(_name, 0) + 1
            return _real(*args, **kwargs)

        setattr(owner, name, counted)


class _Recording:
    """The run's embedder, keeping each call's texts so that they can be embedded again alone."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.calls = inner, list[list[str]]()

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    def replay(self) -> float:
        """Seconds to make the same calls again, alone: the run's speed were all but embedding free."""
        started = time.perf_counter()
        for texts in self.calls:
            self.inner.embed(texts)
        return time.perf_counter() - started


async def run_once(variant: Variant, hist: list[dict[str, Any]], speaker: str, folder: Path) -> RunResult:
    recording = _Recording(variant.embedder)
    result = await _run_once(replace(variant, embedder=recording), hist, speaker, folder)
    result.texts = sum(len(c) for c in recording.calls)
    result.embed_alone_s = await asyncio.to_thread(recording.replay)
    return result


async def _run_once(variant: Variant, hist: list[dict[str, Any]], speaker: str, folder: Path) -> RunResult:
    config = variant.config
    model: Any = "rules"
    if config.startswith("fake"):
        # A 128k window, as the models it stands for have: a batch of 4 LoCoMo sessions fits one call.
        model = FunctionModel(function=fake_answer, latency=FAKE_LATENCY, context_window=FAKE_WINDOW).model
    mem: MemorySystem = system(
        model=model, store=str(folder), embedder=variant.embedder, semantic={"relations": True},
        episodic=_episodic(variant.encode),
    )  # fmt: skip
    ctx = MemoryContext(namespace=NAMESPACE, user_id=USER)
    await mem.add_alias(ctx, speaker)
    total = sum(len(s["turns"]) for s in hist)
    result = RunResult(turns=total, seconds=0.0)
    if config.startswith("journal"):
        batches = [_turns(mem, ctx.model_copy(update={"session_id": s["session_id"]}), s) for s in hist]
        _count_store_calls(mem, result)
        started = time.perf_counter()
        for turns in batches:
            if config == "journal per turn":
                for turn in turns:
                    await asyncio.to_thread(mem.tiers.journal, turn)
            else:
                await asyncio.to_thread(mem.tiers.journal_new, turns)
        result.seconds = time.perf_counter() - started
        return result
    # Instance attributes shadow the methods: import_conversations calls them through ``self``.
    for phase in ("end_sessions", "consolidate", "digest"):
        setattr(mem, phase, _timed(result, phase, getattr(mem, phase)))
    _count_store_calls(mem, result)
    concurrency = int(config.rsplit("c", 1)[1])
    started = time.perf_counter()
    if variant.window is None:
        report = await mem.import_conversations(ctx, hist, concurrency=concurrency)
    else:
        report = await mem.import_conversations(ctx, hist, concurrency=concurrency, observe_window=variant.window)
    result.seconds = time.perf_counter() - started
    result.deferred = report.deferred
    result.episodes = report.episodes
    result.usage = mem.usage()
    counted = dict(result.calls)
    result.facts = mem.store.count("facts")
    result.calls = counted
    if report.errors:
        print(f"  {config}: errors {report.errors}", file=sys.stderr)
    return result


def run_all(
    hist: list[dict[str, Any]], speaker: str, runs: int, chosen: Sequence[Variant]
) -> dict[str, list[RunResult]]:
    out: dict[str, list[RunResult]] = {v.label: [] for v in chosen}
    root = Path(tempfile.mkdtemp(prefix="tiermem-bench-import-"))
    try:
        for run in range(runs):
            for n, variant in enumerate(chosen):  # interleaved, so drifting machine load hits every config alike
                folder = root / f"{n}-{run}"
                result = asyncio.run(run_once(variant, hist, speaker, folder))
                out[variant.label].append(result)
                print(
                    f"  run {run + 1}/{runs} {variant.label:<40} {result.tps:7.1f} turns/s ({result.seconds:.1f} s),"
                    f" deferred {result.deferred}",
                    file=sys.stderr,
                )
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


# -- profile ------------------------------------------------------------------------------------


class _ProfiledExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor (``asyncio.to_thread``), each worker thread under its own cProfile."""

    def __init__(self) -> None:
        super().__init__(max_workers=min(32, (os.cpu_count() or 1) + 4))
        self.profiles: list[cProfile.Profile] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    def _profile(self) -> cProfile.Profile:
        prof: cProfile.Profile | None = getattr(self._local, "prof", None)
        if prof is None:
            prof = self._local.prof = cProfile.Profile()
            with self._lock:
                self.profiles.append(prof)
        return prof

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        def profiled() -> Any:
            prof = self._profile()
            prof.enable()
            try:
                return fn(*args, **kwargs)
            finally:
                prof.disable()

        return super().submit(profiled)


# Where the time goes: each group is the cumulative time of its entry points (disjoint by construction:
# the store never embeds, the embedder never touches the store, the rules never do either).
PROFILE_GROUPS: dict[str, list[tuple[str, str]]] = {
    "embedding (embedder.embed)": [("_embedders.py", "embed"), ("_onnx.py", "embed")],
    "LanceDB commits (Store's writes, delete, dedupe, leases, compaction)": [
        ("_store_writes.py", "write"),
        *(("_store.py", n) for n in ("delete", "dedupe", "claim", "unclaim", "claim_many", "unclaim_many")),
    ],
    "reads (Store.query, get, count, column_values, keys, counts, searches)": [
        ("_store.py", n)
        for n in ("query", "get", "count", "column_values", "keys", "counts", "vector_search", "text_search", "scopes")
    ],
    "model / rules (StageModel.run)": [("_model.py", "run")],
}


def profile_import(hist: list[dict[str, Any]], speaker: str, embedder: Embedder, encode: str) -> str:
    """One ``rules c1`` import under cProfile; a markdown section."""
    folder = Path(tempfile.mkdtemp(prefix="tiermem-bench-import-profile-"))
    executor = _ProfiledExecutor()
    main = cProfile.Profile()
    turns = sum(len(s["turns"]) for s in hist)

    async def go() -> tuple[float, float]:
        asyncio.get_running_loop().set_default_executor(executor)
        mem = system(
            model="rules", store=str(folder), embedder=embedder, semantic={"relations": True},
            episodic=_episodic(encode),
        )  # fmt: skip
        ctx = MemoryContext(namespace=NAMESPACE, user_id=USER)
        await mem.add_alias(ctx, speaker)
        started, cpu_started = time.perf_counter(), time.process_time()
        main.enable()
        try:
            await mem.import_conversations(ctx, hist, concurrency=1)
        finally:
            main.disable()
        return time.perf_counter() - started, time.process_time() - cpu_started

    try:
        wall, cpu = asyncio.run(go())
    finally:
        executor.shutdown(wait=True)
        shutil.rmtree(folder, ignore_errors=True)
    stats = pstats.Stats(main)
    for prof in executor.profiles:
        stats.add(prof)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]

    def cum(file: str, name: str) -> tuple[float, int]:
        hits = [(v[3], v[1]) for (f, _, n), v in raw.items() if f.endswith(file) and n == name]
        return sum(h[0] for h in hits), sum(h[1] for h in hits)

    busy = sum(v[2] for v in raw.values())  # every thread's own time: CPU-ish work, excludes idle waits
    lines = [
        f"## Profile: one `rules c1` import under cProfile (embedder `{embedder.id}`, encode {encode})",
        "",
        f"{turns} turns, {wall:.1f} s wall under the profiler ({turns / wall:.1f} turns/s; cProfile slows"
        f" Python-heavy code, so shares matter, not the rate). Threads profiled: the event loop's and"
        f" {len(executor.profiles)} worker threads; summed own time of all functions {busy:.1f} s.",
        "",
        "| group (entry points) | cumulative s | share of wall | ms / turn | calls / turn | ms / call |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    grouped = 0.0
    for group, entries in PROFILE_GROUPS.items():
        seconds = sum(cum(f, n)[0] for f, n in entries)
        calls = sum(cum(f, n)[1] for f, n in entries)
        grouped += seconds
        lines.append(
            f"| {group} | {seconds:.2f} | {seconds / wall:.0%} | {seconds / turns * 1000:.1f} | {calls / turns:.2f}"
            f" | {seconds / max(calls, 1) * 1000:.1f} |"
        )
    other = wall - grouped
    lines += [
        f"| other (wall minus the groups: pydantic, event loop, thread hand-offs) | {other:.2f} | {other / wall:.0%}"
        f" | {other / turns * 1000:.1f} | | |",
        "",
        "Group times are wall clock inside worker threads (a LanceDB call waits on LanceDB's own background loop,"
        ' every thread waits for the GIL and for a CPU on a loaded machine), so they can overlap and "other" can'
        f" come out negative. Process CPU time over the import: {cpu:.1f} s for {wall:.1f} s wall.",
        "",
        "Top 10 functions by cumulative time (tiermem code, LanceDB and the embedder; wrappers such as"
        " `asyncio.to_thread`, a class's delegation to its parts, the event loop, the thread pool, LanceDB's"
        " background loop and the commit retry left out):",
        "",
        "| function | calls | calls / turn | cumulative s | share of wall | own s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    ours = re.compile(r"(/memory/|/pipelines/|/prompts/|lancedb|onnxruntime|tokenizers|_embedders|_onnx)")
    wrappers = {"import_conversations", "one", "wrapper", "delegated", "run_blocking", "retry", "retry_conflicts"}
    skip = wrappers | {"<module>"}
    rows = sorted(
        ((k, v) for k, v in raw.items() if ours.search(k[0]) and k[2] not in skip and "background_loop" not in k[0]),
        key=lambda kv: -kv[1][3],
    )
    for (file, line, name), (_, calls, own, cumulative, _) in rows[:10]:
        where = "/".join(Path(file).parts[-2:])
        lines.append(
            f"| `{where}:{line} {name}` | {calls} | {calls / turns:.2f} | {cumulative:.2f}"
            f" | {cumulative / wall:.0%} | {own:.2f} |"
        )
    lines += ["", "Calls per turn of the store and embedder entry points:", ""]
    counts = []
    for file, name in [
        ("_store_writes.py", "write"),
        ("_store_reads.py", "query"),
        ("_store.py", "get"),
        ("_store_reads.py", "count"),
        ("_store_maintenance.py", "after_write"),
        ("_embedders.py", "embed"),
        ("_onnx.py", "embed"),
        ("_tiers.py", "aliases"),
        ("_tiers.py", "known_subjects"),
        ("_session_log.py", "session_turns"),
        ("_working_tier.py", "working_memory"),
    ]:
        seconds, calls = cum(file, name)
        counts.append(f"`{name}` {calls / turns:.2f} ({seconds / max(calls, 1) * 1000:.1f} ms each)")
    lines.append("- " + "; ".join(counts) + ".")
    return "\n".join(lines) + "\n"


# -- report -------------------------------------------------------------------------------------


def _median(results: Sequence[RunResult], value: Callable[[RunResult], float]) -> float:
    return statistics.median(value(r) for r in results)


def _embedder_label(name: str, embedder: Embedder) -> str:
    if isinstance(embedder, HashingEmbedder):
        return f"`hashing`: HashingEmbedder({embedder.dimensions})"
    if name == "default":
        return f"`default`: the default embedder `{embedder.id}` ({embedder.dimensions} dims, `resolve_embedder(None)`)"
    return f"`{name}`: `{embedder.id}` ({embedder.dimensions} dims, `embedder={name!r}`)"


def report(
    results: dict[str, list[RunResult]],
    *,
    command: str,
    args: argparse.Namespace,
    chosen: Sequence[Variant],
    sessions: int,
    profile: str | None,
) -> str:
    runs = len(next(iter(results.values())))
    turns = next(iter(results.values()))[0].turns
    by_label = {v.label: v for v in chosen}
    # Each row's ratio is to the journal baseline with the same embedder, measured in the same runs.
    base_tps = {v.embedder_name: _median(results[v.label], lambda r: r.tps) for v in chosen if v.config == BASELINE}
    embedders = {v.embedder_name: v.embedder for v in chosen}
    encodes = sorted({v.encode for v in chosen if not v.journal})
    lines = [
        f"Command: `{command}`",
        "",
        "# Bulk import benchmark",
        "",
        f"Workload: LoCoMo dev `conv-26`, {sessions} sessions, {turns} turns per run (each LoCoMo turn one turn,"
        " dated by its session), imported with `import_conversations` (the bulk path, by groups of 4 sessions in"
        " order: per group one resume read, observations concurrent (one call per window of consecutive turns of a"
        " session, `observe_window`), one read for turns another writer journaled meanwhile, one entries commit,"
        " one commit journaling the turns as observed, then one `end_sessions` (the group's leases in one commit"
        " each way, one read each of its turns, episodes and entries, its episodes in one commit, its closed"
        " entries in one); full batches of 4"
        " episodes consolidated as they come, then the rest consolidated and the user digested). Fresh LanceDB"
        f" store in a temporary folder per run; relations on. Medians of {runs} runs"
        " (configurations interleaved run by run), with the slowest and the fastest run.",
        "Embedders: " + "; ".join(_embedder_label(n, e) for n, e in embedders.items()) + ".",
        "Episode encoding: "
        + ", ".join(
            "the library default (`episodic` not set)" if e == "library" else f'`episodic={{"encode": "{e}"}}`'
            for e in encodes
        )
        + ' ("session": one encode call per session as it ends; "consolidation": no call at the end, a provisional'
        " episode, summarised by the one call per batch of 4 that consolidates it).",
        f"Baseline `{BASELINE}`: `tiers.journal_new(turns)` per session (one embedding batch, one insert-if-absent"
        " commit), the journal step of the import alone; `journal per turn`: capture's journal write,"
        f" `tiers.journal(turn)` per turn. `fake 200ms`: `FunctionModel(latency={FAKE_LATENCY})` through real"
        " litellm, a valid answer for every stage (a window of turns answered turn by turn, in one call)."
        " `cN`: `concurrency=N` (sessions in bulk and observer calls in flight). `window=N`: `observe_window=N`"
        " (1: one observer call per turn; unset: the library default).",
        "",
        f"| configuration | turns/s (end to end) | slowest - fastest run | x {BASELINE} | texts embedded / turn"
        " | embedding alone turns/s | model calls / turn | commits / turn | reads / turn | episodes | facts |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for config, rs in results.items():
        tps = _median(rs, lambda r: r.tps)
        spread = f"{min(r.tps for r in rs):,.1f} - {max(r.tps for r in rs):,.1f}"
        base = base_tps.get(by_label[config].embedder_name)
        ratio = f"{tps / base:.2f}" if base else "n/a"
        texts = f"{_median(rs, lambda r: r.texts / r.turns):.2f}"
        alone = f"{_median(rs, lambda r: r.turns / r.embed_alone_s if r.embed_alone_s else math.inf):,.1f}"
        commits = f"{_median(rs, lambda r: r.store_per_turn(COMMITS)):.2f}"
        reads = f"{_median(rs, lambda r: r.store_per_turn(READS)):.2f}"
        if by_label[config].journal:
            rest = f"n/a | {commits} | {reads} | n/a | n/a"
        else:
            calls = _median(rs, lambda r: r.per_turn(None, "calls"))
            rest = (
                f"{calls:.2f} | {commits} | {reads} | {int(_median(rs, lambda r: r.episodes))}"
                f" | {int(_median(rs, lambda r: r.facts))}"
            )
        lines.append(f"| {config} | {tps:,.1f} | {spread} | {ratio} | {texts} | {alone} | {rest} |")
    lines += [
        "",
        "The rules model makes no model calls (its usage ledger stays empty). *Embedding alone*: the run's"
        " embedding calls (the same texts in the same batches) made again after it, one after another on an"
        " otherwise idle process: the turns/s the run would reach were everything but embedding free, an upper"
        " bound set by the embedder on this machine.",
        "",
        "## Where the wall time of an import goes (median seconds, summed over calls)",
        "",
        "| configuration | end_sessions s | consolidate s | digest s | the rest (bulk journal, observe, write) s"
        " | wall s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for config, rs in results.items():
        if by_label[config].journal:
            continue
        phases = [_median(rs, lambda r, p=p: r.phase_s.get(p, 0.0)) for p in ("end_sessions", "consolidate", "digest")]  # type: ignore[misc]
        wall = _median(rs, lambda r: r.seconds)
        cells = " | ".join(f"{x:.1f}" for x in phases)
        lines.append(f"| {config} | {cells} | {max(wall - sum(phases), 0.0):.1f} | {wall:.1f} |")
    lines += [
        "",
        "Sessions end by groups of 4 in order (one `end_sessions` per group, so consolidation sees them in order)"
        " while later sessions are journaled and observed: the ends and the consolidations made during the import"
        " overlap the bulk work, and"
        ' "the rest" is wall time minus their sum, a lower bound of the bulk path\'s share.',
    ]
    fakes = [c for c in results if by_label[c].config.startswith("fake")]
    if fakes:
        lines += [
            "",
            "## Model calls per imported turn, per stage (fake model)",
            "",
            "| configuration | " + " | ".join(STAGES) + " | all | retries / turn | prompt tokens / turn |",
            "| --- | " + " | ".join("---:" for _ in STAGES) + " | ---: | ---: | ---: |",
        ]
        for config in fakes:
            rs = results[config]
            cells = " | ".join(f"{_median(rs, lambda r, s=s: r.per_turn(s, 'calls')):.3f}" for s in STAGES)  # type: ignore[misc]
            lines.append(
                f"| {config} | {cells} | {_median(rs, lambda r: r.per_turn(None, 'calls')):.3f}"
                f" | {_median(rs, lambda r: r.per_turn(None, 'retries')):.3f}"
                f" | {_median(rs, lambda r: r.per_turn(None, 'prompt_tokens')):,.0f} |"
            )
        lines += [
            "",
            "## Prompt tokens per imported turn, per stage (fake model)",
            "",
            "| configuration | " + " | ".join(STAGES) + " | all |",
            "| --- | " + " | ".join("---:" for _ in STAGES) + " | ---: |",
        ]
        for config in fakes:
            rs = results[config]
            cells = " | ".join(f"{_median(rs, lambda r, s=s: r.per_turn(s, 'prompt_tokens')):,.0f}" for s in STAGES)  # type: ignore[misc]
            lines.append(f"| {config} | {cells} | {_median(rs, lambda r: r.per_turn(None, 'prompt_tokens')):,.0f} |")
    lines += ["", "## Aims (issue 15 item 2)", ""]
    for config, aim, what in (
        ("rules c8", AIM_RULES_TPS, "end to end with the rules model (rules c8, the default concurrency)"),
        ("fake 200ms c8", AIM_FAKE_C8_TPS, "with a 200 ms model at concurrency 8"),
    ):
        for label in (v.label for v in chosen if v.config == config):
            tps = _median(results[label], lambda r: r.tps)
            met = "MET" if tps >= aim else "NOT MET"
            ceiling = _median(results[label], lambda r: r.turns / r.embed_alone_s if r.embed_alone_s else math.inf)
            base = base_tps.get(by_label[label].embedder_name)
            bound = (
                f"; its embedder alone allows {ceiling:,.1f}, below the aim: out of reach with this embedder here"
                if ceiling < aim
                else ""
            )
            if base is not None and base < aim:  # an import journals every turn: it cannot outrun its journal step
                bound += f"; the journal step alone runs at {base:,.1f}"
            lines.append(f"- >= {aim:.0f} turns/s {what}, `{label}`: **{met}** ({tps:,.1f}{bound}).")
    for name, tps in base_tps.items():
        lines.append(f"- The journal-only baseline of the same runs, embedder `{name}`: {tps:,.1f} turns/s.")
    deferred = sum(r.deferred for rs in results.values() for r in rs)
    lines.append(f"- Turns or sessions deferred (model failures) across all runs: {deferred}.")
    if profile:
        lines += ["", profile.rstrip()]
    lines += [
        "",
        "## Machine",
        "",
        f"- {cpu_name()}, {os.cpu_count()} cores, shared with other jobs while this ran;"
        f" load average at start: {args.load_at_start}, at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"- Python {platform.python_version()} on {platform.system()} {platform.release()}",
        "- "
        + ", ".join(f"{n} {package_version(n)}" for n in ("lancedb", "litellm", "pyarrow", "onnxruntime", "pydantic")),
        "- Absolute turns/s move with the machine's load; ratios to the journal baseline of the same run and"
        " calls per turn do not.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 sessions, 1 run, prints the report only")
    parser.add_argument("--sessions", type=int, default=None, help="sessions of conv-26 to import (default all 19)")
    parser.add_argument("--runs", type=int, default=None, help="runs per configuration (default 3, quick 1)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (default the dev split)")
    parser.add_argument(
        "--embedder",
        default="default",
        help="comma-separated: default (the ONNX MiniLM), minilm-static (40-70x cheaper), hashing (the floor);"
        " several are interleaved run by run",
    )
    parser.add_argument(
        "--encode",
        default="library",
        help='comma-separated episodic={"encode": ...} modes: session, consolidation, or library (the library'
        " default); several are interleaved run by run",
    )
    parser.add_argument(
        "--configs",
        default="journal,rules,fake",
        help="comma-separated groups or configurations: journal, rules, fake, or e.g. 'rules c1'",
    )
    parser.add_argument(
        "--observe-window",
        default="",
        help="comma-separated observe_window= values of the imports (default: the library's); several are"
        " interleaved run by run",
    )
    parser.add_argument("--profile", action="store_true", help="also profile one rules c1 import")
    parser.add_argument(
        "--out", type=Path, default=None, help="write the report here (full run: bench/RESULTS-import.md)"
    )
    args = parser.parse_args(argv)
    args.runs = args.runs or (1 if args.quick else 3)
    sessions = args.sessions or (3 if args.quick else None)
    args.load_at_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    default_out = not (
        args.quick
        or args.sessions
        or args.configs != "journal,rules,fake"
        or args.embedder != "default"
        or args.encode != "library"
        or args.observe_window
    )
    out = args.out or (Path(__file__).resolve().parent / "RESULTS-import.md" if default_out else None)
    configs: list[str] = []
    for part in (p.strip() for p in args.configs.split(",") if p.strip()):
        group = GROUPS.get(part, (part,) if part in CONFIGS else None)
        if group is None:
            parser.error(f"unknown configuration {part!r}: one of {', '.join([*GROUPS, *CONFIGS])}")
        configs += [c for c in group if c not in configs]
    conv = load(args.data)[0]
    hist = history(conv, sessions)
    names = [n.strip() for n in args.embedder.split(",") if n.strip()]
    encodes = [e.strip() for e in args.encode.split(",") if e.strip()]
    for name in names:
        if name not in ("default", "minilm-static", "hashing"):
            parser.error(f"unknown embedder {name!r}: one of default, minilm-static, hashing")
    for encode in encodes:
        if encode not in ("library", "session", "consolidation"):
            parser.error(f"unknown encode {encode!r}: one of library, session, consolidation")
    embedders = [
        (n, HashingEmbedder(256) if n == "hashing" else resolve_embedder(None if n == "default" else n)) for n in names
    ]
    try:
        windows: list[int | None] = [int(w) for w in args.observe_window.split(",") if w.strip()] or [None]
    except ValueError:
        parser.error(f"--observe-window takes comma-separated integers, not {args.observe_window!r}")
    chosen = variants(configs, embedders, encodes, windows)
    command = shlex.join(["python", "bench/import_history.py", *(sys.argv[1:] if argv is None else argv)])
    turns = sum(len(s["turns"]) for s in hist)
    print(f"import benchmark: {len(hist)} sessions, {turns} turns, {args.runs} runs, {len(chosen)} variants",
          file=sys.stderr)  # fmt: skip
    results = run_all(hist, conv.speaker_a, args.runs, chosen)
    profile = profile_import(hist, conv.speaker_a, embedders[0][1], encodes[0]) if args.profile else None
    text = report(results, command=command, args=args, chosen=chosen, sessions=len(hist), profile=profile)
    print(text)
    if out is not None:
        kept = out.read_text().partition(ANALYSIS)[2] if out.exists() else ""
        out.write_text(text + (f"\n{ANALYSIS}{kept}" if kept else ""))
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
