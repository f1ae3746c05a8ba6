"""Capture throughput and model usage of the write side (issue acceptance benchmark).

Workload: deterministic synthetic conversations (fixed seed), sessions of ``--turns`` turns
(default 10), each turn one user message and one assistant reply. After every session:
``end_session`` + ``consolidate`` + ``digest``, so the per-session stages are amortised over the
session's turns. Every run starts from an empty LanceDB store in a temporary folder; the clock
is a frozen clock advanced one minute per turn.

Configurations, each run ``--runs`` times (default 3; medians reported):

- ``journal only`` (baseline): the first step of ``capture`` alone, i.e. one
  ``mem.tiers.put_turns([turn])`` per turn (the turn embedded and merge-inserted into the
  ``turns`` table), run in a worker thread like capture does. No observer, no later stages.
- ``no-op model``: the full pipeline (``capture``, ``end_session``, ``consolidate``, ``digest``)
  with a stage model that answers instantly and empty (no observations), i.e. the library's own
  overhead around the model call.
- ``rules model``: the full pipeline with the offline rules model (``model="rules"``).
- ``fake LLM 50 ms``: the full pipeline with ``FunctionModel(latency=0.05)`` reached through real
  litellm, answering every stage with valid JSON (content-preserving: one observation per user
  message, one fact per episode sentence). Model calls and prompt tokens come from
  ``mem.usage()``; the fake provider counts tokens with litellm's token counter (gpt-4o-mini
  tokenizer). Fake models take the JSON-mode path, so prompts include the output JSON schema.

Throughput: ``capture turns/s`` counts only the time spent inside ``capture`` (or the journal
write); ``end-to-end turns/s`` also counts ``end_session`` + ``consolidate`` + ``digest``.

Usage (from the repo root):
    python bench/capture.py                # full run: 20 sessions x 10 turns, 3 runs; writes bench/RESULTS-capture.md
    python bench/capture.py --quick        # smoke run: 2 sessions x 10 turns, 3 runs; prints only
    python bench/capture.py --embedder hashing --out /tmp/capture.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch litellm's cost map
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pydantic import BaseModel

from tiermem import Embedder, HashingEmbedder, MemoryContext, Turn, UsageLedger, system
from tiermem.jobs._scheduler import DEFAULT_INTERVALS, JOBS
from tiermem.memory._embed._names import resolve_embedder
from tiermem.memory._identity import turn_id
from tiermem.memory._records import Message
from tiermem.memory._stage import Stage
from tiermem.memory._write._system import MemorySystem
from tiermem.memory.testing import FrozenClock, FunctionModel, StageCall, forbid_real_model_requests
from tiermem.prompts import consolidate, digest, encode_consolidate, encode_episode, observe

forbid_real_model_requests()  # a benchmark never reaches a real provider
warnings.filterwarnings("ignore", message=r"Items? .* `ReadOnly` qualifier")  # litellm import-time noise

InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT", bound=BaseModel)
NAMESPACE = "bench"
STAGES = ("observe", "encode_episode", "consolidate", "encode_consolidate", "digest")
AIM_OBSERVE_PER_TURN = 1.0
AIM_CALLS_PER_TURN = 1.3
FAKE_LATENCY = 0.05


# -- workload -----------------------------------------------------------------------------------

PEOPLE = [("wife", "Moni"), ("sister", "Ana"), ("brother", "Tom"), ("friend", "Raj"), ("boss", "Greta"), ("son", "Leo")]
CITIES = ["Lisbon", "Porto", "Berlin", "Kyoto", "Denver", "Oslo", "Lima", "Vienna"]
FOODS = ["ramen", "paella", "tacos", "curry", "risotto", "pho", "falafel", "goulash"]
HOBBIES = ["climbing", "chess", "pottery", "running", "sailing", "baking", "birding", "piano"]
ORGS = ["Acme Corp", "Globex", "Initech", "Umbrella Labs"]
TEMPLATES: list[Callable[[random.Random], str]] = [
    lambda r: f"My {(p := r.choice(PEOPLE))[0]} {p[1]} lives in {r.choice(CITIES)}.",
    lambda r: f"My {(p := r.choice(PEOPLE))[0]} {p[1]} loves {r.choice(FOODS)}.",
    lambda r: f"I had {r.choice(FOODS)} for dinner yesterday and it was great.",
    lambda r: f"I started {r.choice(HOBBIES)} last month.",
    lambda r: f"I work at {r.choice(ORGS)} as an engineer.",
    lambda r: f"We are planning a trip to {r.choice(CITIES)} in the spring.",
    lambda r: f"I'm allergic to {r.choice(['peanuts', 'shellfish', 'pollen', 'cats'])}.",
    lambda r: f"Can you suggest a {r.choice(FOODS)} recipe for the weekend?",
    lambda r: f"{r.choice(PEOPLE)[1]} and I went {r.choice(HOBBIES)} on Saturday.",
    lambda r: "Thanks, that helps a lot!",
]
REPLIES = ["Got it, I'll remember that.", "That sounds lovely.", "Here is an idea: keep it simple.", "Noted!"]


def conversation(sessions: int, turns: int, seed: int) -> list[list[list[dict[str, str]]]]:
    """``sessions`` lists of ``turns`` turns, each [user message, assistant reply]; deterministic."""
    rng = random.Random(seed)
    return [
        [
            [
                {"role": "user", "content": rng.choice(TEMPLATES)(rng)},
                {"role": "assistant", "content": rng.choice(REPLIES)},
            ]
            for _ in range(turns)
        ]
        for _ in range(sessions)
    ]


# -- models -------------------------------------------------------------------------------------


class NoopStages:
    """A stage model that answers instantly and empty: the pipeline's own overhead."""

    name = "noop"

    def __init__(self) -> None:
        self.ledger = UsageLedger()

    async def run(self, stage: Stage[InputT, OutputT], inputs: InputT) -> OutputT:
        output = stage.output_for(inputs)
        if stage is encode_episode.STAGE:
            return output.model_validate({"summary": "Nothing of note."})
        if stage is digest.STAGE:
            return output.model_validate({"text": "Nothing of note."})
        return output.model_validate({})


def fake_answer(messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
    """A valid, content-preserving answer to whichever stage is asked, from its typed input."""
    inputs = call.inputs
    if isinstance(inputs, observe.Input):
        said = [m.content for m in inputs.messages if (m.name or m.role) == "user"]
        return {"observations": [{"subject": "user", "kind": "fact", "text": s, "salience": 0.6} for s in said]}
    if isinstance(inputs, encode_episode.Input):
        seen = [e.text for e in inputs.entries]
        return {"summary": " ".join(seen)[:3900] or "The user chatted.", "subjects": ["user"], "salience": 0.6}
    if isinstance(inputs, encode_consolidate.Input):  # what encode_episode then consolidate would answer
        written = {
            e.id: " ".join(o.text for o in inputs.observations if o.session_id == e.session_id)[:3900]
            or "The user chatted."
            for e in inputs.episodes
            if e.id in inputs.encode
        }
        summaries = [written.get(e.id, e.summary) for e in inputs.episodes]
        sentences = [s for text in summaries for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
        episodes = [{"id": i, "summary": text, "subjects": ["user"], "salience": 0.6} for i, text in written.items()]
        operations = [{"op": "add", "subject": "user", "text": s} for s in sentences[:100]]
        return {"episodes": episodes, "operations": operations, "edges": []}
    if isinstance(inputs, consolidate.Input):
        sentences = [s for e in inputs.episodes for s in re.split(r"(?<=[.!?])\s+", e.summary) if s.strip()]
        return {"operations": [{"op": "add", "subject": "user", "text": s} for s in sentences[:100]], "edges": []}
    if isinstance(inputs, digest.Input):
        return {"text": " ".join(f.text for f in inputs.facts[:8]) or "The user has no facts yet."}
    return {"merges": []}


# -- runs ---------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """One configuration, one run."""

    turns: int
    capture_s: float
    total_s: float
    capture_latencies: list[float] = field(default_factory=list)
    usage: dict[str, dict[str, float]] = field(default_factory=dict)
    deferred: int = 0
    facts: int = 0
    visible: list[float] = field(default_factory=list)
    """Background capture: seconds from a session's last capture until its observations are all stored."""

    @property
    def capture_tps(self) -> float:
        return self.turns / self.capture_s

    @property
    def total_tps(self) -> float:
        return self.turns / self.total_s

    def per_turn(self, stage: str | None, key: str) -> float:
        stages = [stage] if stage else list(self.usage)
        return sum(self.usage.get(s, {}).get(key, 0.0) for s in stages) / self.turns


def _turn(ctx: MemoryContext, seq: int, messages: list[dict[str, str]], now: datetime) -> Turn:
    assert ctx.session_id is not None
    return Turn(
        id=turn_id(ctx, session_id=ctx.session_id, key=f"bench-{seq}"),
        namespace=ctx.namespace,
        user_id=ctx.user_id,
        session_id=ctx.session_id,
        seq=seq,
        messages=tuple(Message(role=m["role"], content=m["content"]) for m in messages),  # type: ignore[arg-type]
        created_at=now,
    )


async def run_once(
    config: str, sessions: list[list[list[dict[str, str]]]], embedder: Embedder, folder: Path
) -> RunResult:
    clock = FrozenClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    model: Any = {"journal only": "rules", "no-op model": NoopStages(), "rules model": "rules"}.get(config)
    if config.startswith("fake"):
        model = FunctionModel(function=fake_answer, latency=FAKE_LATENCY).model
    mem: MemorySystem = system(
        model=model, store=str(folder), embedder=embedder, clock=clock, semantic={"relations": True}
    )
    result = RunResult(turns=sum(len(s) for s in sessions), capture_s=0.0, total_s=0.0)
    for number, turns in enumerate(sessions):
        ctx = MemoryContext(namespace=NAMESPACE, user_id="u-bench", session_id=f"s-{number:03d}")
        for seq, messages in enumerate(turns):
            clock.advance(timedelta(minutes=1))
            started = time.perf_counter()
            if config == "journal only":
                await asyncio.to_thread(mem.tiers.put_turns, [_turn(ctx, seq, messages, clock.now())])
            else:
                captured = await mem.capture(ctx, messages, background=config.endswith("background"))
                result.deferred += int(captured.deferred)
            took = time.perf_counter() - started
            result.capture_latencies.append(took)
            result.capture_s += took
            result.total_s += took
        if config.endswith("background"):
            started = time.perf_counter()
            await mem.flush()  # how long after the agent moved on its observations are visible
            result.visible.append(time.perf_counter() - started)
            result.total_s += result.visible[-1]
        if config != "journal only":
            started = time.perf_counter()
            await mem.end_session(ctx)
            await mem.consolidate(ctx)
            await mem.digest(ctx)
            result.total_s += time.perf_counter() - started
        clock.advance(timedelta(hours=20))
    result.usage = mem.usage()
    result.facts = mem.store.count("facts")
    await mem.aclose()
    return result


FAKE = f"fake LLM {int(FAKE_LATENCY * 1000)} ms"
CONFIGS = ("journal only", "no-op model", "rules model", f"{FAKE}, background", FAKE)


def run_all(sessions: list[list[list[dict[str, str]]]], runs: int, embedder: Embedder) -> dict[str, list[RunResult]]:
    out: dict[str, list[RunResult]] = {c: [] for c in CONFIGS}
    root = Path(tempfile.mkdtemp(prefix="tiermem-bench-capture-"))
    try:
        for run in range(runs):
            for config in CONFIGS:  # interleaved, so drifting machine load hits every config alike
                folder = root / f"{config.replace(' ', '-')}-{run}"
                result = asyncio.run(run_once(config, sessions, embedder, folder))
                out[config].append(result)
                print(
                    f"  run {run + 1}/{runs} {config:<16} capture {result.capture_tps:7.1f} turns/s, "
                    f"end-to-end {result.total_tps:7.1f} turns/s, deferred {result.deferred}",
                    file=sys.stderr,
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


# -- model usage by session length, configuration and session spacing -----------------------------

USAGE_LENGTHS = (5, 10, 20)
AIM_AMORTISED = 1.15
USAGE_CONFIGS: dict[str, dict[str, Any] | None] = {
    "default": None,
    "1-hour wait": {"batch_wait": timedelta(hours=1), "batch_turns": None},
    "encode at session end": {"encode": "session", "batch_wait": None},
}
"""default: the library's episodic options (no option passed). 1-hour wait: the previous default (only 4 episodes
or an hour's wait sent a batch). encode at session end: the default before that, each episode encoded by its own
call at ``end_session``, the consolidation job consolidating whatever is pending."""
GAPS = (timedelta(minutes=10), timedelta(hours=20))
"""Time between the end of a session and the start of the next: a user in a busy stretch, a user once a day."""


@dataclass(frozen=True, kw_only=True)
class UsageResult:
    """One (session length, configuration, gap) run of the fake LLM: the usage ledger per stage."""

    length: int
    config: str
    gap: timedelta
    turns: int
    usage: dict[str, dict[str, float]]
    facts: int
    pending: int

    def per_turn(self, stage: str | None, key: str) -> float:
        stages = [stage] if stage else list(self.usage)
        return sum(self.usage.get(s, {}).get(key, 0.0) for s in stages) / self.turns


class Ticks:
    """The scheduler's consolidation (every 15 minutes) and digest (hourly) jobs, run at their times as the
    frozen clock passes them (``jobs/_scheduler.py`` DEFAULT_INTERVALS)."""

    def __init__(self, mem: MemorySystem, clock: FrozenClock) -> None:
        self.mem, self.clock = mem, clock
        start = clock.now()
        self.next = {"consolidation": start, "digests": start}

    async def until(self, when: datetime) -> None:
        """Run every job due up to ``when`` in time order, then leave the clock at ``when``."""
        while (due := min(self.next.values())) <= when:
            self.clock.set(due)
            for name in [n for n, at in self.next.items() if at == due]:
                await JOBS[name](self.mem, due)
                self.next[name] = due + DEFAULT_INTERVALS[name]
        self.clock.set(when)

    def skip(self, when: datetime) -> None:
        """Move the clock to ``when`` without running the ticks before it (only when they would do nothing)."""
        for name, at in self.next.items():
            while at <= when:
                at += DEFAULT_INTERVALS[name]
            self.next[name] = at
        self.clock.set(when)


async def usage_once(
    *, length: int, config: str, gap: timedelta, turns: int, seed: int, embedder: Embedder, folder: Path
) -> UsageResult:
    """``turns`` turns in sessions of ``length`` turns one minute apart, each session ended (``end_session``) and
    the next starting ``gap`` later; consolidation and digests only by the scheduled jobs, at their intervals
    (the fake LLM, no latency: counts only). Ticks in a gap past what the batch wait can change are skipped."""
    clock = FrozenClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    fake = FunctionModel(function=fake_answer)
    options = USAGE_CONFIGS[config]
    mem: MemorySystem = system(
        model=fake.model, store=str(folder), embedder=embedder, clock=clock, semantic={"relations": True},
        episodic=True if options is None else options,  # True: the library's defaults
    )  # fmt: skip
    episodic = mem.capability.episodic
    assert episodic is not None
    # After the wait (and one job interval) every pending episode is consolidated, after one more hour digested.
    settle = (episodic.batch_wait or timedelta(0)) + DEFAULT_INTERVALS["consolidation"] + DEFAULT_INTERVALS["digests"]
    ticks = Ticks(mem, clock)
    user = MemoryContext(namespace=NAMESPACE, user_id="u-usage")
    for number, session in enumerate(conversation(max(turns // length, 1), length, seed)):
        ctx = user.model_copy(update={"session_id": f"s-{number:03d}"})
        for messages in session:
            await ticks.until(clock.now() + timedelta(minutes=1))
            await mem.capture(ctx, messages)
        await mem.end_session(ctx)
        ended = clock.now()
        await ticks.until(ended + min(gap, settle))
        ticks.skip(ended + gap)
    await ticks.until(clock.now() + settle)  # what is left, as the jobs would do it
    pending = len(await asyncio.to_thread(mem.tiers.episodes, user, statuses=["pending"]))
    result = UsageResult(
        length=length, config=config, gap=gap, turns=mem.store.count("turns"), usage=mem.usage(),
        facts=mem.store.count("facts"), pending=pending,
    )  # fmt: skip
    await mem.aclose()
    return result


def run_usage(lengths: Sequence[int], turns: int, seed: int, embedder: Embedder) -> list[UsageResult]:
    out: list[UsageResult] = []
    root = Path(tempfile.mkdtemp(prefix="tiermem-bench-usage-"))
    try:
        for length in lengths:
            for config in USAGE_CONFIGS:
                for gap in GAPS:
                    folder = root / f"{length}-{config.replace(' ', '-')}-{int(gap.total_seconds())}"
                    result = asyncio.run(
                        usage_once(
                            length=length, config=config, gap=gap, turns=turns, seed=seed, embedder=embedder,
                            folder=folder,
                        )
                    )  # fmt: skip
                    out.append(result)
                    print(
                        f"  usage: {length}-turn sessions, {config}, {_gap(gap)} apart: "
                        f"{result.per_turn(None, 'calls'):.3f} calls/turn",
                        file=sys.stderr,
                    )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def _gap(gap: timedelta) -> str:
    minutes = int(gap.total_seconds() // 60)
    return f"{minutes // 60} h" if minutes % 60 == 0 else f"{minutes} min"


def usage_report(results: Sequence[UsageResult], turns: int) -> list[str]:
    """The model-usage table by session length, configuration and session spacing, and the amortised aim."""
    stages = [s for s in STAGES if any(r.usage.get(s) for r in results)]
    lines = [
        "## Model usage by session length, configuration and session spacing (fake LLM)",
        "",
        f"{turns} captured turns per row, in sessions of 5, 10 or 20 turns one minute apart (synthetic, same"
        " generator); every session ended (`end_session`), the next starting 10 minutes or 20 hours later."
        " Consolidation and digests only by the scheduled jobs at their default intervals (`run_consolidation`"
        " every 15 minutes, `run_digests` hourly, `jobs/_scheduler.py`), on the frozen clock, and once the last"
        ' session settled. default: no episodic option (`encode="consolidation"`, `batch_turns` 20, `batch_wait`'
        " 3 days): `end_session` writes a provisional (extractive) episode without a call, the job waits for a"
        " full batch of 4 episodes, or pending episodes holding 20 turns, or for the oldest to have waited 3 days,"
        " and one `encode_consolidate` call per batch writes the summaries and the facts. 1-hour wait: `episodic="
        '{"batch_wait": timedelta(hours=1), "batch_turns": None}`, the previous default. encode at session end:'
        ' `episodic={"encode": "session", "batch_wait": None}`, the default before it: one `encode_episode` call'
        " per session at `end_session`, the job consolidating whatever is pending. The digest makes no call"
        " when the facts it was written from did not change. Cells: calls / prompt tokens per captured turn.",
        "",
        "| session turns | configuration | sessions apart | "
        + " | ".join(stages)
        + f" | all calls / turn | prompt tokens / turn | completion tokens / turn | facts | <= {AIM_AMORTISED} |",
        "| ---: | --- | --- | " + " | ".join("---:" for _ in stages) + " | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        cells = [
            f"{_fmt(r.per_turn(s, 'calls'), 3)} / {_fmt(r.per_turn(s, 'prompt_tokens'), 0)}" if r.usage.get(s) else "-"
            for s in stages
        ]
        calls = r.per_turn(None, "calls")
        lines.append(
            f"| {r.length} | {r.config} | {_gap(r.gap)} | "
            + " | ".join(cells)
            + f" | **{_fmt(calls, 3)}** | {_fmt(r.per_turn(None, 'prompt_tokens'), 0)}"
            f" | {_fmt(r.per_turn(None, 'completion_tokens'), 0)} | {r.facts}"
            f" | {'MET' if calls <= AIM_AMORTISED + 1e-9 else 'NOT MET'} |"
        )
    lines.append("")
    for gap in GAPS:
        rows = [r for r in results if r.config == "default" and r.gap == gap]
        worst = max(rows, key=lambda r: r.per_turn(None, "calls"), default=None)
        if worst is None:
            continue
        met = all(r.per_turn(None, "calls") <= AIM_AMORTISED + 1e-9 for r in rows)
        lines.append(
            f"- At most {AIM_AMORTISED} model calls per captured turn, amortised, at any session length >= 5, with"
            f" the default options and sessions {_gap(gap)} apart: **{'MET' if met else 'NOT MET'}** (worst"
            f" {_fmt(worst.per_turn(None, 'calls'), 3)} at {worst.length} turns)."
        )
    left = sum(r.pending for r in results)
    lines.append(f"- Episodes still pending once every run settled: {left}.")
    return lines


# -- report -------------------------------------------------------------------------------------


def _median(results: Sequence[RunResult], value: Callable[[RunResult], float]) -> float:
    return statistics.median(value(r) for r in results)


def _fmt(x: float, digits: int = 2) -> str:
    return f"{x:,.{digits}f}"


def report(
    results: dict[str, list[RunResult]],
    *,
    command: str,
    args: argparse.Namespace,
    embedder: Embedder,
    usage: Sequence[UsageResult] = (),
) -> str:
    runs = len(next(iter(results.values())))
    turns = next(iter(results.values()))[0].turns
    lines = [
        f"Command: `{command}`",
        "",
        "# Capture benchmark",
        "",
        f"Workload: {args.sessions} sessions x {args.turns} turns = {turns} turns per run"
        f" (synthetic, seed {args.seed}); after each session `end_session` + `consolidate` + `digest`."
        " Fresh LanceDB store in a temporary folder per run; relations on."
        f" Medians of {runs} runs (configurations interleaved run by run).",
        f"Embedder: {_embedder_label(embedder)}.",
        "Baseline (`journal only`): one `tiers.put_turns([turn])` per turn (embed the turn, merge-insert it into the"
        " `turns` table) in a worker thread, the first step of `capture`; no model and no later stages."
        " `no-op model`: the whole pipeline with a stage model that answers instantly and empty (library overhead)."
        f" `fake LLM`: `FunctionModel(latency={FAKE_LATENCY})` through real litellm, valid JSON for every stage.",
        "",
        "| configuration | capture turns/s | capture p50 ms | capture p95 ms | end-to-end turns/s |"
        " model calls / turn | observe calls / turn | prompt tokens / turn | facts stored |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for config, rs in results.items():
        model_row = config not in {"journal only"}
        calls = _median(rs, lambda r: r.per_turn(None, "calls"))
        observe = _median(rs, lambda r: r.per_turn("observe", "calls"))
        tokens = _median(rs, lambda r: r.per_turn(None, "prompt_tokens"))
        lines.append(
            f"| {config} | {_fmt(_median(rs, lambda r: r.capture_tps), 1)} "
            f"| {_fmt(_median(rs, lambda r: _pct(r.capture_latencies, 50) * 1000), 1)} "
            f"| {_fmt(_median(rs, lambda r: _pct(r.capture_latencies, 95) * 1000), 1)} "
            f"| {_fmt(_median(rs, lambda r: r.total_tps), 1) if model_row else 'n/a'} "
            f"| {_fmt(calls) if model_row else 'n/a'} | {_fmt(observe) if model_row else 'n/a'} "
            f"| {_fmt(tokens, 0) if model_row else 'n/a'} | {int(_median(rs, lambda r: r.facts))} |"
        )
    lines += [
        "",
        "The rules and no-op models are not model calls: the usage ledger stays empty for them (0 calls, 0 tokens).",
        "",
        "## Model usage per captured turn, per stage (fake LLM)",
        "",
        "| stage | calls / turn | retries / turn | prompt tokens / turn | completion tokens / turn"
        " | prompt tokens / call |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    fake = results[CONFIGS[-1]]
    for stage in [s for s in STAGES if any(r.usage.get(s) for r in fake)]:  # the stages the default encoding uses
        calls = _median(fake, lambda r, s=stage: r.per_turn(s, "calls"))  # type: ignore[misc]
        prompt = _median(fake, lambda r, s=stage: r.per_turn(s, "prompt_tokens"))  # type: ignore[misc]
        lines.append(
            f"| {stage} | {_fmt(calls)} | {_fmt(_median(fake, lambda r, s=stage: r.per_turn(s, 'retries')))} "  # type: ignore[misc]
            f"| {_fmt(prompt, 0)} | {_fmt(_median(fake, lambda r, s=stage: r.per_turn(s, 'completion_tokens')), 0)} "  # type: ignore[misc]
            f"| {_fmt(prompt / calls, 0) if calls else 'n/a'} |"
        )
    total_calls = _median(fake, lambda r: r.per_turn(None, "calls"))
    observe_calls = _median(fake, lambda r: r.per_turn("observe", "calls"))
    deferred = sum(r.deferred for rs in results.values() for r in rs)
    ok_observe = observe_calls <= AIM_OBSERVE_PER_TURN + 1e-9
    ok_total = total_calls <= AIM_CALLS_PER_TURN + 1e-9
    lines += [
        f"| **all** | **{_fmt(total_calls)}** | "
        f"| **{_fmt(_median(fake, lambda r: r.per_turn(None, 'prompt_tokens')), 0)}**"
        f" | **{_fmt(_median(fake, lambda r: r.per_turn(None, 'completion_tokens')), 0)}** | |",
        "",
        *(["", *usage_report(usage, args.usage_turns)] if usage else []),
        "",
        "## Aims",
        "",
        f"- At most one observer call per captured turn: **{'MET' if ok_observe else 'NOT MET'}** "
        f"({_fmt(observe_calls)} observe calls per turn with the fake LLM; a turn repeating the one before "
        "within the dedupe window is answered as a retry, without a call).",
        f"- At most {AIM_CALLS_PER_TURN} model calls per captured turn overall: **{'MET' if ok_total else 'NOT MET'}** "
        f"({_fmt(total_calls)} with the default encoding, `end_session` + `consolidate` + `digest` after every "
        f"{args.turns}-turn session; see the table by session length, encoding and cadence).",
        f"- Turns deferred (model failures) across all runs: {deferred}.",
        "",
        "## Machine",
        "",
        f"- CPU cores: {os.cpu_count()}; load average at start: {args.load_at_start}",
        f"- Python {platform.python_version()} on {platform.system()} {platform.release()}",
        f"- {_versions()}",
        "- The machine may be shared: absolute turns/s move with its load; the per-turn call and token counts do not.",
    ]
    background = results[f"{FAKE}, background"]
    visible = [v for r in background for v in r.visible]
    background_lines = [
        f"Capture off the response path (`capture(..., background=True)`, {FAKE}): the agent waits "
        f"p50 {_fmt(_median(background, lambda r: _pct(r.capture_latencies, 50) * 1000), 1)} ms / "
        f"p95 {_fmt(_median(background, lambda r: _pct(r.capture_latencies, 95) * 1000), 1)} ms per turn "
        f"(the journal write) instead of p50 {_fmt(_median(fake, lambda r: _pct(r.capture_latencies, 50) * 1000), 1)}"
        f" ms; a session's observations are all visible {_fmt(statistics.median(visible) * 1000, 0)} ms (median) "
        "after its last capture returned.",
        "",
    ]
    machine = lines.index("## Machine")
    lines[machine:machine] = background_lines
    return "\n".join(lines) + "\n"


def _pct(values: Sequence[float], q: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def _embedder_label(embedder: Embedder) -> str:
    if isinstance(embedder, HashingEmbedder):
        return f"HashingEmbedder({embedder.dimensions}) (`--embedder hashing`)"
    return (
        f"the default embedder `{embedder.id}` ({embedder.dimensions} dims; an int8 ONNX transformer, one text"
        " per run, about 5-12 ms of CPU per text on an AVX2 machine: bench/EMBEDDERS.md)"
    )


def _versions() -> str:
    names = ["lancedb", "litellm", "pyarrow", "numpy", "pydantic"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 sessions, prints the report only")
    parser.add_argument("--sessions", type=int, default=None, help="sessions per run (default 20, quick 2)")
    parser.add_argument("--turns", type=int, default=10, help="turns per session")
    parser.add_argument("--runs", type=int, default=3, help="runs per configuration (medians reported)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--embedder", choices=["default", "hashing"], default="default")
    parser.add_argument(
        "--usage-turns", type=int, default=None, help="turns per model-usage row (default 200, quick 40; 0: none)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="write the report here (full run default: bench/RESULTS-capture.md)"
    )
    args = parser.parse_args(argv)
    args.sessions = args.sessions or (2 if args.quick else 20)
    args.usage_turns = (40 if args.quick else 200) if args.usage_turns is None else args.usage_turns
    args.load_at_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    out = args.out or (None if args.quick else Path(__file__).resolve().parent / "RESULTS-capture.md")
    embedder = HashingEmbedder(256) if args.embedder == "hashing" else resolve_embedder(None)
    sessions = conversation(args.sessions, args.turns, args.seed)
    command = shlex.join(["python", "bench/capture.py", *(sys.argv[1:] if argv is None else argv)])
    print(f"capture benchmark: {args.sessions} sessions x {args.turns} turns, {args.runs} runs", file=sys.stderr)
    results = run_all(sessions, args.runs, embedder)
    usage = run_usage(USAGE_LENGTHS, args.usage_turns, args.seed, embedder) if args.usage_turns else []
    text = report(results, command=command, args=args, embedder=embedder, usage=usage)
    print(text)
    if out is not None:
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
