"""Inputs too large for the model: fitted to its input budget (litellm's context window), never blocking.

The fake model has a real window: litellm is told it (``litellm.get_model_info``) and the fake refuses any
larger prompt with litellm's ``ContextWindowExceededError``, as a provider does. Every request records its
size, so "no call exceeded the window" is checked on what was actually sent.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes import AnyCall, Messages, default_reply
from tiermem import LLM, Episode, Fact, MemoryContext, Message, ModelContextWindowError, Turn, WorkingEntry, system
from tiermem.memory._llm._client import DEFAULT_MAX_INPUT_TOKENS, INPUT_SHARE, message_tokens
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder
from tiermem.pipelines import (
    Budget,
    LLMStages,
    RulesStages,
    consolidate_episodes,
    consolidation_parts,
    encode_session,
    observe_turn,
    session_parts,
    turn_parts,
)
from tiermem.pipelines._observer import MAX_PARTS
from tiermem.prompts import consolidate, encode_episode, observe

pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

WINDOW = 2000
NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CTX = MemoryContext(user_id="u-1", session_id="s-1")
SENTENCE = "Row {i}: the nightly export wrote 1,024 records to bucket eu-west and checksum {i:08x} matched. "
MEGABYTE = "".join(SENTENCE.format(i=i) for i in range(11_000))  # about 1 MB, about 250,000 tokens


def _count(text: str) -> int:
    return LLM("tiermem-fake/counter").count_tokens(text)


BUDGET = Budget(tokens=1000, count=_count)


def _short(text: str, limit: int) -> str:
    return " ".join(text.split())[:limit].strip() or "something"


def _reply(messages: Messages, call: AnyCall) -> str | dict[str, Any]:
    """Valid, short answers that keep a trace of what each call was shown."""
    inputs = call.inputs
    if isinstance(inputs, observe.Input):
        said = [m.content for m in inputs.messages if m.role == "user" and m.content.strip()]
        return {
            "observations": [{"subject": "user", "kind": "fact", "text": _short(t, 200), "salience": 0.6} for t in said]
        }
    if isinstance(inputs, encode_episode.Input):
        shown = inputs.parts or [e.text for e in inputs.entries] or [t.text for t in inputs.turns]
        return {"summary": _short(" / ".join(s[:80] for s in shown), 600), "subjects": ["user"], "salience": 0.5}
    if isinstance(inputs, consolidate.Input):
        ops = [{"op": "add", "subject": "user", "text": _short(e.summary, 200)} for e in inputs.episodes]
        return {"operations": ops, "edges": []}
    return default_reply(call)


def _fake(window: int = WINDOW, declared: int | None = None) -> FunctionModel:
    return FunctionModel(_reply, context_window=window, declared_window=declared)


def _turn(seq: int, *texts: str) -> Turn:
    messages = tuple(Message(role="user" if i % 2 == 0 else "assistant", content=t) for i, t in enumerate(texts))
    return Turn(id=f"turn_{seq}", namespace="default", user_id="u-1", session_id="s-1", seq=seq, messages=messages,
                created_at=NOW + timedelta(minutes=seq))  # fmt: skip


def _entry(turn: Turn, index: int, text: str) -> WorkingEntry:
    return WorkingEntry(id=f"wm_{turn.seq}_{index}", namespace="default", user_id="u-1", session_id="s-1",
                        subject="user", text=text, seq=turn.seq, created_at=turn.created_at,
                        updated_at=turn.created_at, provenance=(turn.id,))  # fmt: skip


# -- the budget ------------------------------------------------------------------------------------


def test_split_keeps_the_start_and_the_end_of_a_megabyte_within_the_limit() -> None:
    pieces = BUDGET.split(MEGABYTE, 500, limit=8)

    assert len(pieces) == 8
    assert all(_count(p) <= 500 for p in pieces)
    assert MEGABYTE.startswith("".join(pieces[:4]))
    assert pieces[4].startswith("[...] ") and MEGABYTE.endswith("".join(pieces[4:]).removeprefix("[...] "))


def test_split_covers_a_text_that_needs_few_pieces() -> None:
    text = MEGABYTE[:9000]

    pieces = BUDGET.split(text, 500, limit=8)

    assert 2 < len(pieces) <= 8 and "".join(pieces) == text
    assert all(_count(p) <= 500 for p in pieces)


def test_clip_fits_and_marks_the_gap() -> None:
    clipped = BUDGET.clip(MEGABYTE, 300)

    assert _count(clipped) <= 310 and " [...] " in clipped
    assert BUDGET.clip("short", 300) == "short"


def test_pack_groups_consecutive_items_within_the_room() -> None:
    assert BUDGET.pack([3, 3, 3, 9, 1], 6) == [[0, 1], [2], [3], [4]]


def test_halved_budget_and_unlimited_budget() -> None:
    assert BUDGET.halved().tokens == 500
    unlimited = Budget(tokens=None)
    assert unlimited.fits([{"role": "user", "content": MEGABYTE}])
    assert unlimited.halved().tokens is not None


@pytest.mark.parametrize(
    ("model", "window"),
    [("openai/gpt-4o-mini", 128_000), ("tiermem-fake/unknown-to-litellm", DEFAULT_MAX_INPUT_TOKENS)],
    ids=["litellm-knows-it", "unknown-model-default"],
)
def test_an_llm_budget_is_a_share_of_litellms_window_less_the_schema(model: str, window: int) -> None:
    llm = LLM(model)
    budget = LLMStages(llm).input_budget(observe.STAGE)

    assert budget.tokens is not None and 0 < window * INPUT_SHARE - budget.tokens < 400
    assert llm.context_window == (None if model.startswith("tiermem-fake") else window)


def test_a_fake_window_is_known_to_litellm_and_the_rules_model_has_none() -> None:
    fake = _fake()

    assert LLM(fake.model).context_window == WINDOW
    assert LLM(fake.model, max_input_tokens=500).context_window == 500
    assert RulesStages().input_budget(observe.STAGE).tokens is None


async def test_a_prompt_beyond_the_known_window_is_refused_without_being_sent() -> None:
    fake = _fake()
    llm = LLM(fake.model)

    with pytest.raises(ModelContextWindowError, match="not sent"):
        await llm.structured(stage="observe", messages=[{"role": "user", "content": MEGABYTE}], output=observe.Output)

    assert fake.calls == []


# -- fitting each stage ----------------------------------------------------------------------------


def test_turn_parts_fit_the_budget_and_are_at_most_max_parts() -> None:
    inputs = observe.Input(messages=list(_turn(0, "Here is the log.", MEGABYTE, "Thanks!").messages), now=NOW)

    parts = turn_parts(BUDGET, inputs)

    assert len(parts) == MAX_PARTS
    assert all(BUDGET.fits(observe.STAGE.render(p)) for p in parts)
    assert parts[0].messages[0].content == "Here is the log." and parts[-1].messages[-1].content == "Thanks!"


async def test_an_oversized_turn_is_observed_in_parts_with_distinct_stable_ids() -> None:
    fake = _fake()
    turn = _turn(0, MEGABYTE, "That is a lot of rows.")

    first = await observe_turn(LLMStages(LLM(fake.model)), turn=turn, user_names=[], aliases={}, known_subjects=[])
    again = await observe_turn(LLMStages(LLM(fake.model)), turn=turn, user_names=[], aliases={}, known_subjects=[])

    assert 1 < first.parts <= MAX_PARTS and len(fake.calls) == 2 * first.parts
    assert len({e.id for e in first.entries}) == len(first.entries) > 1
    assert [e.id for e in first.entries] == [e.id for e in again.entries]
    assert max(c.input_tokens for c in fake.calls) <= WINDOW


async def test_a_provider_smaller_than_litellm_believes_is_retried_once_with_half_the_budget() -> None:
    fake = _fake(declared=2 * WINDOW)  # litellm is told 4,000 tokens; the provider takes 2,000
    turn = _turn(0, MEGABYTE[:40_000])

    observed = await observe_turn(LLMStages(LLM(fake.model)), turn=turn, user_names=[], aliases={}, known_subjects=[])

    assert observed.entries and [c.refused for c in fake.calls].count(True) == 1
    assert max(c.input_tokens for c in fake.calls if not c.refused) <= WINDOW


def test_session_parts_fit_and_keep_every_turn_and_observation_in_order() -> None:
    turns = [_turn(i, f"Turn {i}: " + MEGABYTE[i * 1500 : (i + 1) * 1500]) for i in range(12)]
    entries = [_entry(t, 0, f"Observation of turn {t.seq}.") for t in turns]
    inputs = encode_episode.Input(entries=entries, turns=turns, started_at=NOW, ended_at=NOW)

    parts = session_parts(BUDGET, inputs)

    assert len(parts) > 2 and all(BUDGET.fits(encode_episode.STAGE.render(p)) for p in parts)
    assert [t.id for p in parts for t in p.turns] == [t.id for t in turns]
    assert [e.id for p in parts for e in p.entries] == [e.id for e in entries]


async def test_a_long_session_is_summarised_hierarchically_within_the_window() -> None:
    fake = _fake()
    turns = [_turn(i, f"Turn {i}: " + MEGABYTE[i * 2000 : (i + 1) * 2000], "Noted.") for i in range(40)]
    turns.append(_turn(40, MEGABYTE))
    entries = [_entry(t, 0, f"The user shared export batch {t.seq}.") for t in turns]

    episode = await encode_session(LLMStages(LLM(fake.model)), ctx=CTX, session_id="s-1", entries=entries,
                                   turns=turns, user_names=[], aliases={}, now=NOW)  # fmt: skip

    assert episode.summary and episode.provenance == tuple(t.id for t in turns)
    assert episode.metadata["summary_calls"] == len(fake.calls) > 3
    assert any(c.call is not None and c.call.inputs.parts for c in fake.calls)
    assert max(c.input_tokens for c in fake.calls) <= WINDOW


def test_consolidation_parts_fit_and_cover_every_episode() -> None:
    episodes = [Episode(id=f"ep_{i}", namespace="default", user_id="u-1", session_id=f"s-{i}",
                        summary=MEGABYTE[i * 1200 : (i + 1) * 1200], started_at=NOW, ended_at=NOW, created_at=NOW,
                        updated_at=NOW) for i in range(6)]  # fmt: skip
    facts = [Fact.new(CTX, subject="user", text=f"The user keeps export {i} in bucket eu-west.", now=NOW)
             for i in range(200)]  # fmt: skip
    inputs = consolidate.Input(episodes=episodes, existing=facts, now=NOW)

    parts = consolidation_parts(BUDGET, inputs)

    assert len(parts) > 1 and all(BUDGET.fits(consolidate.STAGE.render(p)) for p in parts)
    assert [e.id for p in parts for e in p.episodes] == [e.id for e in episodes]
    assert all(p.existing for p in parts)


# -- the whole pipeline ----------------------------------------------------------------------------


async def test_a_megabyte_turn_does_not_block_its_session(store_path: str) -> None:
    fake = _fake()
    mem = system(model=fake.model, store=store_path, embedder=HashingEmbedder(64), clock=FrozenClock(NOW))
    said = [f"I moved my export job number {i} to the Lisbon region." for i in range(10)]

    results = [await mem.capture(CTX, [{"role": "user", "content": text}]) for text in said[:5]]
    results.append(
        await mem.capture(CTX, [{"role": "user", "content": MEGABYTE}, {"role": "assistant", "content": "Got it."}])
    )
    results += [await mem.capture(CTX, [{"role": "user", "content": text}]) for text in said[5:]]
    ended = await mem.end_session(CTX)
    consolidated = await mem.consolidate(CTX)
    retried = await mem.retry_pending()

    assert [r.deferred for r in results] == [False] * 11
    assert ended.episode is not None and not ended.deferred
    assert set(ended.episode.provenance) == {r.turn.id for r in results}
    assert not consolidated.deferred and consolidated.episodes == 1
    facts = await mem.facts(CTX)
    assert facts and any("Lisbon" in f.text for f in facts)
    assert (retried.turns, retried.episodes) == (0, 0)
    assert not any(c.refused for c in fake.calls)
    assert max(c.input_tokens for c in fake.calls) <= WINDOW
    megabyte = message_tokens(fake.model, [{"role": "user", "content": MEGABYTE}])
    assert sum(c.input_tokens for c in fake.calls) < megabyte / 5  # never sent whole, nor all of it in pieces


async def test_a_batch_cut_into_parts_keeps_each_parts_in_batch_updates() -> None:
    """Each part's answer numbers its own operations ("#1" is its first): joined, each update still changes
    the fact its own part added, and that fact is kept as history."""

    def reply(messages: Messages, call: AnyCall) -> dict[str, Any]:
        ops: list[dict[str, Any]] = []
        for e in call.inputs.episodes:
            ops.append({"op": "add", "subject": "user", "text": f"Export {e.id} lives in bucket A."})
            ops.append({"op": "update", "subject": "user", "target_id": f"#{len(ops)}",
                        "text": f"Export {e.id} lives in bucket B.", "source_episode_ids": [e.id]})  # fmt: skip
        return {"operations": ops}

    fake = FunctionModel(reply, context_window=WINDOW)
    episodes = [Episode(id=f"ep_{i}", namespace="default", user_id="u-1", session_id=f"s-{i}",
                        summary=MEGABYTE[i * 1200 : (i + 1) * 1200], started_at=NOW, ended_at=NOW, created_at=NOW,
                        updated_at=NOW) for i in range(6)]  # fmt: skip

    plan = await consolidate_episodes(
        LLMStages(LLM(fake.model)), ctx=CTX, episodes=episodes, existing=[], user_names=[], aliases={},
        relations=None, now=NOW,
    )  # fmt: skip

    assert len(fake.calls) > 1 and not plan.refused
    facts = {f.text: f for f in plan.facts.values()}
    for e in episodes:
        old, new = facts[f"Export {e.id} lives in bucket A."], facts[f"Export {e.id} lives in bucket B."]
        assert (old.status, old.superseded_by, new.status) == ("superseded", new.id, "active")
