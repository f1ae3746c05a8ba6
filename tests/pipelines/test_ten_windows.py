"""Every model stage driven at ten times the model's window, through the real store: it completes, within the window.

The fake model has a window of :data:`WINDOW` tokens (litellm is told it) and refuses any larger prompt, as a
provider does; every request records its size. The fake answers with the tags it was shown (``T001`` for a
turn, ``F01`` for a fact, ``R0001`` for a row of a long message), so each result says what of the input
reached the model: a stage that dropped part of its input would lose tags.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import pytest

from tests.fakes import AnyCall, Messages
from tiermem import Fact, MemoryContext, MemorySystem, system
from tiermem.jobs import run_janitor
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, Where
from tiermem.pipelines._observer import MAX_PARTS
from tiermem.prompts import compact, consolidate, digest, encode_consolidate, encode_episode, observe

pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

WINDOW = 2000
TEN = 10 * WINDOW
TAG = re.compile(r"\b(?:T\d{3}|F\d{2}|R\d{4}|K\d{3})\b")
FILLER = "the export job wrote its records to the bucket and the checksum matched as expected"


def _tags(texts: Iterable[str]) -> list[str]:
    return sorted({t for text in texts for t in TAG.findall(text)})


def _said(text: str) -> str:
    """An observation of ``text``: the text itself when it is short enough, else the tags it holds."""
    return text if len(text) <= 1000 else " ".join(_tags([text]))[:1000]


def _reply(messages: Messages, call: AnyCall) -> dict[str, Any]:
    """Answers that carry the tags each call was shown."""
    inputs = call.inputs
    if isinstance(inputs, observe.Input):  # one observation per tagged paragraph
        said = [p for m in inputs.messages if m.role == "user" for p in m.content.split("\n") if TAG.search(p)]
        return {"observations": [{"subject": "user", "kind": "fact", "text": _said(t), "salience": 0.6} for t in said]}
    if isinstance(inputs, encode_episode.Input):
        shown = [*inputs.parts, *(e.text for e in inputs.entries), *(t.text for t in inputs.turns)]
        return {"summary": " ".join(_tags(shown)) or "The user chatted.", "subjects": ["user"], "salience": 0.5}
    if isinstance(inputs, consolidate.Input):  # one fact per tag observed: the facts say what was consolidated
        ops = [
            {"op": "add", "subject": "user", "text": f"The user mentioned {t}."}
            for t in _tags(o.text for o in inputs.observations)
        ]
        return {"operations": ops, "edges": []}
    if isinstance(inputs, encode_consolidate.Input):
        raise AssertionError("a batch at ten times the window cannot be shown in one combined call")
    if isinstance(inputs, digest.Input):
        shown = [*inputs.parts, *(f.text for f in inputs.facts)]
        return {"text": " ".join(_tags(shown)) or "Nothing is known."}
    if isinstance(inputs, compact.Input):  # merge the facts of one tag shown together
        by_tag: dict[str, list[str]] = {}
        for fact in inputs.facts:
            for tag in _tags([fact.text]):
                by_tag.setdefault(tag, []).append(fact.id)
        merges = [
            {"source_ids": ids, "text": f"The user keeps {tag} (merged)."}
            for tag, ids in by_tag.items()
            if len(ids) > 1
        ]
        return {"merges": merges}
    raise AssertionError(f"unexpected stage {call.stage.name}")


def _within_the_window(fake: FunctionModel, mem: MemorySystem, stage: str) -> list[int]:
    """The sizes of ``stage``'s requests, after checking that none exceeded the window (sent or refused before)."""
    assert fake.calls and not any(c.refused for c in fake.calls)
    assert max(c.input_tokens for c in fake.calls) <= WINDOW
    assert all(u["failures"] == 0 for u in mem.usage().values()), mem.usage()  # no prompt refused before sending
    return [c.input_tokens for c in fake.calls if c.stage_name == stage]


def _system(store_path: str, fake: FunctionModel, clock: FrozenClock, **options: Any) -> MemorySystem:
    return system(model=fake.model, store=store_path, embedder=HashingEmbedder(64), clock=clock, num_retries=0,
                  validation_retries=0, **options)  # fmt: skip


def _turn_text(n: int, paragraphs: int = 4) -> str:
    """A user message of ``paragraphs`` paragraphs of ~220 tokens, each tagged with its turn."""
    return "\n".join(f"T{n:03d} " + " ".join(f"{FILLER} ({p}.{i})." for i in range(12)) for p in range(paragraphs))


SHORT_TURNS = 90  # 90 turns of ~220 tokens, imported: ten windows of turns
TURNS = 24  # 24 turns of ~900 tokens, 96 observations of ~220 tokens: ten windows of session, ten of observations


async def _session(mem: MemorySystem, ctx: MemoryContext, clock: FrozenClock) -> None:
    for n in range(TURNS):
        clock.advance(minutes=1)
        await mem.capture(ctx, [{"role": "user", "content": _turn_text(n)}, {"role": "assistant", "content": "Ok."}])


def _every_turn() -> list[str]:
    return [f"T{n:03d}" for n in range(TURNS)]


# -- the stages ------------------------------------------------------------------------------------


async def test_observe_a_turn_of_ten_windows(store_path: str, clock: FrozenClock, ctx: MemoryContext) -> None:
    fake = FunctionModel(_reply, context_window=WINDOW)
    mem = _system(store_path, fake, clock)
    rows = " ".join(f"R{i:04d} {FILLER}." for i in range(1200))  # ~20,000 tokens in one message

    result = await mem.capture(ctx, [{"role": "user", "content": rows}, {"role": "assistant", "content": "Ok."}])

    sizes = _within_the_window(fake, mem, "observe")
    assert not result.deferred and len(sizes) == MAX_PARTS  # the turn's start and end, the middle marked [...]
    seen = _tags(e.text for e in mem.store.query("working", Where(eq={"user_id": ctx.user_id})))
    assert seen[0] == "R0000" and seen[-1] == "R1199"


async def test_import_observes_ten_windows_of_turns(store_path: str, clock: FrozenClock, ctx: MemoryContext) -> None:
    fake = FunctionModel(_reply, context_window=WINDOW)
    mem = _system(store_path, fake, clock)
    start = clock.now() - timedelta(days=30)
    history = [{"session_id": "past", "turns": [
        {"at": start + timedelta(minutes=n), "messages": [{"role": "user", "content": _turn_text(n, 1)}]}
        for n in range(SHORT_TURNS)
    ]}]  # fmt: skip

    report = await mem.import_conversations(ctx, history, consolidate=False)

    sizes = _within_the_window(fake, mem, "observe_window")
    assert report.turns == SHORT_TURNS and 15 <= len(sizes) < SHORT_TURNS  # windows of several turns
    entries = mem.store.query("working", Where(eq={"user_id": ctx.user_id}))
    assert _tags(e.text for e in entries) == [f"T{n:03d}" for n in range(SHORT_TURNS)]


async def test_encode_a_session_of_ten_windows(store_path: str, clock: FrozenClock, ctx: MemoryContext) -> None:
    fake = FunctionModel(_reply, context_window=WINDOW)
    mem = _system(store_path, fake, clock, episodic={"encode": "session"})
    await _session(mem, ctx, clock)

    ended = await mem.end_session(ctx)

    sizes = _within_the_window(fake, mem, "encode_episode")
    assert ended.episode is not None and not ended.deferred
    assert ended.episode.metadata["summary_calls"] == len(sizes) > 20  # parts, then merges of their summaries
    assert _tags([ended.episode.summary]) == _every_turn()


@pytest.mark.parametrize("encode", ["session", "consolidation"], ids=["consolidate", "encode-and-consolidate"])
async def test_consolidate_ten_windows_of_observations(
    store_path: str, clock: FrozenClock, ctx: MemoryContext, encode: str
) -> None:
    fake = FunctionModel(_reply, context_window=WINDOW)
    mem = _system(store_path, fake, clock, episodic={"encode": encode})
    await _session(mem, ctx, clock)
    await mem.end_session(ctx)

    result = await mem.consolidate(ctx)

    sizes = _within_the_window(fake, mem, "consolidate")
    assert not result.deferred and result.episodes == 1 and len(sizes) > 5
    assert _tags(f.text for f in await mem.facts(ctx)) == _every_turn()
    episode = mem.store.query("episodes", Where(eq={"user_id": ctx.user_id}))[0]
    assert _tags([episode.summary]) == _every_turn()


async def test_digest_of_facts_of_ten_windows(store_path: str, clock: FrozenClock, ctx: MemoryContext) -> None:
    fake = FunctionModel(_reply, context_window=WINDOW)
    mem = _system(store_path, fake, clock, digest=True)
    long = [f"F{i:02d} " + " ".join(f"{FILLER} ({i}.{j})." for j in range(90)) for i in range(12)]
    for text in long:  # twelve facts of up to 8,000 characters, each accepted by remember: ~24,000 tokens
        await mem.remember(ctx, text[:8000])

    first = await mem.digest(ctx)
    clock.advance(hours=1)
    await mem.remember(ctx, "F12 the user also keeps a short note.")
    second = await mem.digest(ctx)

    sizes = _within_the_window(fake, mem, "digest")
    assert first.digest is not None and second.digest is not None and not second.deferred
    assert _tags([first.digest.text]) == [f"F{i:02d}" for i in range(12)]
    assert _tags([second.digest.text]) == [f"F{i:02d}" for i in range(13)]
    meta = first.digest.metadata
    assert meta["parts"] > 10 and meta["calls"] > meta["parts"] and meta["facts_left_out"] == 0  # no fact clipped
    assert len(sizes) == meta["calls"] + second.digest.metadata["calls"]
    final = fake.calls[-1]
    assert final.call is not None and final.call.inputs.parts and final.call.inputs.previous == first.digest.text


async def test_compaction_of_facts_of_ten_windows(store_path: str, clock: FrozenClock, ctx: MemoryContext) -> None:
    fake = FunctionModel(_reply, context_window=WINDOW)
    mem = _system(store_path, fake, clock, semantic={"max_facts": 10})
    pairs = 60  # 120 facts of ~170 tokens, shuffled: pairs of one tag apart in the store
    facts = [
        Fact.new(ctx, subject="user", text=f"K{k:03d} {side} " + " ".join(f"{FILLER} {j}" for j in range(7)) + ".",
                 now=clock.now())
        for side in ("first", "second") for k in range(pairs)
    ]  # fmt: skip
    mem.tiers.put_facts(facts)

    report = await run_janitor(mem, clock.advance(hours=1))

    sizes = _within_the_window(fake, mem, "compact")
    shown = [f.id for c in fake.calls if c.call is not None for f in c.call.inputs.facts]
    assert sorted(shown) == sorted(f.id for f in facts)  # every fact shown once, none left out
    assert len(sizes) > 10 and report.compaction_failed == 0 and report.compaction_refused == 0
    # Facts of one tag share a part, unless a part's end falls between them: at most one pair per boundary.
    active = await mem.facts(ctx)
    merged = [f for f in active if f.metadata.get("merged_from")]
    assert pairs - (len(sizes) - 1) <= len(merged) <= pairs and report.facts_merged == 2 * len(merged)
    assert len(active) == 2 * pairs - report.facts_merged + len(merged)
    assert _tags(f.text for f in active) == [f"K{k:03d}" for k in range(pairs)]


# -- the rules model: no window, the same inputs -------------------------------------------------


async def test_the_rules_model_digests_and_compacts_ten_windows(
    store_path: str, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = system(model="rules", store=store_path, embedder=HashingEmbedder(64), clock=clock, digest=True,
                 semantic={"max_facts": 10})  # fmt: skip
    for i in range(12):
        await mem.remember(
            ctx, (f"The user wrote note F{i:02d}: " + " ".join(f"{FILLER} ({j})." for j in range(90)))[:8000]
        )
    ordinary = [Fact.new(ctx, subject="user", text=f"The user keeps export job {i} in bucket eu-west-{i % 7}.",
                         now=clock.now()) for i in range(2010)]  # fmt: skip
    mem.tiers.put_facts(ordinary)

    written = await mem.digest(ctx)
    report = await run_janitor(mem, clock.advance(hours=1))

    assert written.digest is not None and not written.deferred and "F00" in written.digest.text
    assert report.compaction_failed == 0 and report.facts_merged > 0
