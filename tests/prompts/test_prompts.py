"""One snapshot-style test per prompt module: key phrases of ``STAGE.render(...)`` for fixed inputs, the
VERSION, and a sample answer that the Output schema accepts (and one it refuses)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import tiermem.prompts as prompts
from tiermem import Edge, Episode, Fact, Message, RelationsOptions, Turn, WorkingEntry
from tiermem.memory._stage import Stage
from tiermem.prompts import (
    compact,
    consolidate,
    digest,
    encode_consolidate,
    encode_episode,
    observe,
    observe_window,
    redact,
)

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
LATER = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
SCOPE: dict[str, Any] = {"namespace": "default", "user_id": "u-1"}

USER_FACT = Fact(id="fact_u1", subject="user", text="The user is allergic to peanuts.",
                 created_at=NOW, updated_at=NOW, reinforced_at=NOW, **SCOPE)  # fmt: skip
MONI_FACT = Fact(id="fact_m1", subject="moni", text="Moni, the user's wife, is allergic to shellfish.",
                 created_at=NOW, updated_at=NOW, reinforced_at=NOW, **SCOPE)  # fmt: skip
EDGE = Edge(id="edge_1", source="user", relation="married to", target="moni", created_at=NOW, updated_at=NOW, **SCOPE)
EPISODE = Episode(id="ep_1", session_id="s-1", summary="The user said his wife Moni is allergic to shellfish.",
                  subjects=("user", "moni"), started_at=NOW, ended_at=LATER, created_at=LATER, updated_at=LATER,
                  **SCOPE)  # fmt: skip
TURN = Turn(id="turn_1", session_id="s-1", seq=0, created_at=NOW,
            messages=(Message(role="user", content="My wife Moni is allergic to shellfish."),
                      Message(role="assistant", content="I'll remember that.")), **SCOPE)  # fmt: skip
ENTRY = WorkingEntry(id="wm_1", session_id="s-1", subject="moni", text=MONI_FACT.text, created_at=NOW, updated_at=NOW,
                     status="overflow", **SCOPE)  # fmt: skip


def _render(module: ModuleType, **fields: Any) -> list[dict[str, str]]:
    """Render the way the pipelines do: through the stage's Input model (fields it defaults may be left out)."""
    stage: Stage[Any, Any] = module.STAGE
    return stage.render(stage.input(**fields))


def _text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


MODULES = [observe, observe_window, encode_episode, consolidate, encode_consolidate, digest, compact, redact]


def test_every_prompt_module_has_one_stage() -> None:
    assert set(prompts.__all__) == {"STAGES", "Stage", *(m.__name__.rsplit(".", 1)[1] for m in MODULES)}
    assert tuple(m.STAGE for m in MODULES) == prompts.STAGES
    assert {s.version for s in prompts.STAGES} == {
        "observe-v4",
        "observe-window-v3",
        "encode-episode-v2",
        "consolidate-v4",
        "encode-consolidate-v3",
        "digest-v4",
        "compact-v2",
        "redact-v1",
    }
    assert len({s.name for s in prompts.STAGES}) == len(prompts.STAGES)


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__.rsplit(".", 1)[1] for m in MODULES])
def test_stage_is_built_from_its_module(module: ModuleType) -> None:
    stage = module.STAGE
    assert isinstance(stage, Stage)
    assert stage.name == module.__name__.rsplit(".", 1)[1]
    assert (stage.version, stage.input, stage.text) == (module.VERSION, module.Input, module.TEXT)
    assert issubclass(stage.input, BaseModel) and issubclass(stage.output, BaseModel)
    assert module.TEXT.strip()
    assert not hasattr(module, "render"), "render through the stage: module.STAGE.render(module.Input(...))"


# -- observe ------------------------------------------------------------------------------------


def test_observe_render() -> None:
    messages = _render(
        observe, messages=list(TURN.messages), user_names=["Sam"], known_subjects=["user", "moni"], now=NOW
    )

    system, user = messages
    assert (system["role"], user["role"]) == ("system", "user")
    assert "exactly one subject" in system["content"]
    assert 'never file a fact about Moni under "user"' in system["content"]
    assert "display names: Sam" in system["content"]
    assert "Known subjects so far: user, moni." in system["content"]
    assert "2026-03-01T09:00:00+00:00" in system["content"]
    assert "write dates, never relative time words" in system["content"]  # issue 32 item 5, the model path
    assert '"We" is the user and whoever the turn says they are with' in system["content"]
    assert user["content"] == "Turn:\nuser: My wife Moni is allergic to shellfish.\nassistant: I'll remember that."


def test_observe_render_defaults_and_speaker_names() -> None:
    named = [Message(role="user", content="I moved to Lisbon.", name="Caroline")]

    text = _text(_render(observe, messages=named, user_names=[], known_subjects=[], now=NOW))

    assert "display names: unknown" in text
    assert "Known subjects so far: none." in text
    assert "Caroline: I moved to Lisbon." in text


@pytest.mark.parametrize(
    ("sample", "valid"),
    [
        (
            {"observations": [{"subject": "moni", "kind": "relationship", "text": MONI_FACT.text, "salience": 0.9}]},
            True,
        ),
        ({}, True),
        ({"observations": [{"subject": "moni", "kind": "gossip", "text": "x", "salience": 0.9}]}, False),
        ({"observations": [{"subject": "moni", "kind": "fact", "text": "x", "salience": 1.5}]}, False),
        ({"observations": [{"subject": "moni", "kind": "fact", "text": "", "salience": 0.5}]}, False),
    ],
    ids=["valid", "empty", "unknown-kind", "salience-above-one", "empty-text"],
)
def test_observe_output_schema(sample: dict[str, Any], valid: bool) -> None:
    _check(observe.Output, sample, valid)


# -- observe_window -----------------------------------------------------------------------------


def test_observe_window_render() -> None:
    turns = [
        observe_window.WindowTurn(messages=list(TURN.messages), now=NOW),
        observe_window.WindowTurn(messages=[Message(role="user", content="She loves Lisbon.", name="Sam")], now=LATER),
    ]

    system, user = _render(observe_window, turns=turns, user_names=["Sam"], known_subjects=["user", "moni"])

    assert 'never file a fact about Moni under "user"' in system["content"]
    assert "write dates, never relative time words" in system["content"]
    assert "display names: Sam" in system["content"] and "Known subjects so far: user, moni." in system["content"]
    assert (
        '"turn": 2 for\nTurn 2' in system["content"]
        and "never name a turn that is not in the window" in system["content"]
    )
    assert user["content"] == (
        "Turn 1 (at 2026-03-01T09:00:00+00:00):\nuser: My wife Moni is allergic to shellfish.\n"
        "assistant: I'll remember that.\n\nTurn 2 (at 2026-03-01T09:30:00+00:00):\nSam: She loves Lisbon."
    )


def _window_obs(turn: int, text: str = MONI_FACT.text) -> dict[str, Any]:
    return {"subject": "moni", "kind": "fact", "text": text, "salience": 0.9, "turn": turn}


@pytest.mark.parametrize(
    ("sample", "valid"),
    [
        ({"observations": [_window_obs(1), _window_obs(2)]}, True),
        ({}, True),
        ({"observations": [_window_obs(3)]}, False),
        ({"observations": [_window_obs(0)]}, False),
        ({"observations": [{**_window_obs(1), "turn": None}]}, False),
        ({"observations": [_window_obs(1, f"Fact {i}.") for i in range(observe_window.MAX_PER_TURN + 1)]}, False),
    ],
    ids=["valid", "empty", "turn-past-the-window", "turn-zero", "no-turn", "too-many-for-one-turn"],
)
def test_observe_window_output_is_checked_against_its_window(sample: dict[str, Any], valid: bool) -> None:
    inputs = observe_window.Input(turns=[observe_window.WindowTurn(messages=list(TURN.messages), now=NOW)] * 2)

    output = observe_window.STAGE.output_for(inputs)

    assert output is observe_window.sized(2) and issubclass(output, observe_window.Output)
    assert output.model_json_schema()["$defs"]["Observation2"]["properties"]["turn"]["maximum"] == 2
    _check(output, sample, valid)


# -- encode_episode -----------------------------------------------------------------------------


def test_encode_episode_render() -> None:
    messages = _render(
        encode_episode, entries=[ENTRY], turns=[TURN], user_names=["Sam"], started_at=NOW, ended_at=LATER
    )

    system, user = messages
    assert "Summarise one past conversation in 2-6 sentences" in system["content"]
    assert '("his wife Moni")' in system["content"]
    assert "from 2026-03-01T09:00:00+00:00 to 2026-03-01T09:30:00+00:00" in system["content"]
    assert "Observations:\n- [moni] Moni, the user's wife, is allergic to shellfish." in user["content"]
    assert (
        "Transcript:\nuser: My wife Moni is allergic to shellfish.\nassistant: I'll remember that." in user["content"]
    )


@pytest.mark.parametrize(
    ("sample", "valid"),
    [
        ({"summary": EPISODE.summary, "subjects": ["user", "moni"], "salience": 0.7}, True),
        ({"summary": EPISODE.summary}, True),
        ({"summary": ""}, False),
        ({"summary": "ok", "salience": -0.1}, False),
    ],
    ids=["valid", "defaults", "empty-summary", "negative-salience"],
)
def test_encode_episode_output_schema(sample: dict[str, Any], valid: bool) -> None:
    _check(encode_episode.Output, sample, valid)


# -- consolidate --------------------------------------------------------------------------------


def _consolidate(relations: RelationsOptions | None) -> str:
    return _text(
        _render(
            consolidate,
            episodes=[EPISODE],
            existing=[USER_FACT, MONI_FACT],
            user_names=["Sam"],
            relations=relations,
            now=LATER,
        )
    )


def test_consolidate_render() -> None:
    text = _consolidate(None)

    assert "Never delete." in text
    assert "never merge facts of different subjects" in text
    assert 'a fact about Moni stays under "moni" even when the user said it' in text
    assert "display names: Sam" in text
    assert "- id=fact_u1 [user] The user is allergic to peanuts." in text
    assert "- id=fact_m1 [moni] Moni, the user's wife, is allergic to shellfish." in text
    assert "- id=ep_1 (2026-03-01) The user said his wife Moni is allergic to shellfish." in text
    assert "New episodes" in text
    assert "Now: 2026-03-01T09:30:00+00:00" in text


def test_consolidate_render_without_existing_facts() -> None:
    text = _text(_render(consolidate, episodes=[EPISODE], existing=[], user_names=[], relations=None, now=LATER))

    assert "Existing facts:\n- (none)" in text
    assert "display names: unknown" in text


@pytest.mark.parametrize(
    ("relations", "edges", "phrase"),
    [
        (None, False, None),
        (RelationsOptions(enabled=False), False, None),
        (RelationsOptions(), True, "Relation types are short lowercase phrases."),
        (
            RelationsOptions(vocabulary=("married to", "works at")),
            True,
            "Use only these relation types: married to, works at.",
        ),
    ],
    ids=["none", "disabled", "free-vocabulary", "fixed-vocabulary"],
)
def test_consolidate_mentions_edges_only_when_relations_are_on(
    relations: RelationsOptions | None, edges: bool, phrase: str | None
) -> None:
    text = _consolidate(relations)

    assert ("Also extract typed relations between subjects as edges" in text) is edges
    assert ('"relation": "married to"' in text) is edges
    assert phrase is None or phrase in text


@pytest.mark.parametrize(
    ("sample", "valid"),
    [
        (
            {
                "operations": [
                    {"op": "add", "subject": "moni", "text": MONI_FACT.text},
                    {
                        "op": "update",
                        "subject": "user",
                        "target_id": "fact_u1",
                        "text": "The user is allergic to nuts.",
                    },
                    {"op": "reinforce", "subject": "user", "target_id": "fact_u1"},
                    {"op": "noop", "subject": "user"},
                ],
                "edges": [{"source": "user", "relation": "married to", "target": "moni"}],
            },
            True,
        ),
        ({}, True),
        ({"operations": [{"op": "delete", "subject": "user", "target_id": "fact_u1"}]}, False),
        ({"operations": [{"op": "add", "subject": "user", "text": "x", "confidence": 2}]}, False),
        ({"edges": [{"source": "user", "relation": "", "target": "moni"}]}, False),
    ],
    ids=["valid", "empty", "no-delete-op", "confidence-above-one", "empty-relation"],
)
def test_consolidate_output_schema(sample: dict[str, Any], valid: bool) -> None:
    _check(consolidate.Output, sample, valid)


def test_consolidate_schema_offers_edges_only_with_relations() -> None:
    """With relations off the model is asked for the facts-only shape: no word of edges reaches it."""
    assert "edges" not in consolidate.FactsOutput.model_json_schema()["properties"]
    assert "edges" in consolidate.Output.model_json_schema()["properties"]


# -- digest -------------------------------------------------------------------------------------


def test_digest_render() -> None:
    messages = _render(
        digest, facts=[USER_FACT, MONI_FACT], edges=[EDGE], user_names=["Sam"], previous="Sam likes tea."
    )

    system, user = messages
    assert "The digest is about the user." in system["content"]
    assert '("his wife Moni, who is allergic to shellfish")' in system["content"]
    assert "never fold\ntheir facts into the user" in system["content"]
    assert "display names: Sam" in system["content"]
    assert "Facts:\n- [user] The user is allergic to peanuts.\n- [moni] Moni, the user's wife," in user["content"]
    assert "Relations:\n- user --married to--> moni" in user["content"]
    assert "Previous digest:\nSam likes tea." in user["content"]


def test_digest_render_without_edges_or_previous() -> None:
    text = _text(_render(digest, facts=[USER_FACT], edges=[], user_names=[], previous=None))

    assert "Relations:" not in text
    assert "Previous digest:" not in text


@pytest.mark.parametrize(
    ("sample", "valid"),
    [({"text": "Sam's wife Moni is allergic to shellfish."}, True), ({"text": ""}, False), ({}, False)],
    ids=["valid", "empty-text", "missing-text"],
)
def test_digest_output_schema(sample: dict[str, Any], valid: bool) -> None:
    _check(digest.Output, sample, valid)


# -- compact ------------------------------------------------------------------------------------


def test_compact_render() -> None:
    other = USER_FACT.model_copy(update={"id": "fact_u2", "text": "The user avoids peanut butter."})

    system, user = _render(compact, subject="user", facts=[USER_FACT, other])

    assert 'semantic memory of one subject ("user")' in system["content"]
    assert "keeps every detail (names, dates, numbers)" in system["content"]
    assert 'every merged fact is about\n"user"' in system["content"]
    assert (
        user["content"]
        == "Facts:\n- id=fact_u1 The user is allergic to peanuts.\n- id=fact_u2 The user avoids peanut butter."
    )


@pytest.mark.parametrize(
    ("sample", "valid"),
    [
        ({"merges": [{"source_ids": ["fact_u1", "fact_u2"], "text": "The user is allergic to peanuts."}]}, True),
        ({}, True),
        ({"merges": [{"source_ids": ["fact_u1"], "text": "x"}]}, False),
        ({"merges": [{"source_ids": ["fact_u1", "fact_u2"], "text": ""}]}, False),
    ],
    ids=["valid", "empty", "single-source", "empty-text"],
)
def test_compact_output_schema(sample: dict[str, Any], valid: bool) -> None:
    _check(compact.Output, sample, valid)


# -- inputs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "fields", "output"),
    [
        (
            observe,
            {"messages": list(TURN.messages), "user_names": ["Sam"], "known_subjects": ["user"], "now": NOW},
            observe.Output,
        ),
        (
            encode_episode,
            {"entries": [ENTRY], "turns": [TURN], "user_names": [], "started_at": NOW, "ended_at": LATER},
            encode_episode.Output,
        ),
        (consolidate, {"episodes": [EPISODE], "existing": [USER_FACT], "now": NOW}, consolidate.FactsOutput),
        (
            consolidate,
            {"episodes": [EPISODE], "existing": [USER_FACT], "relations": RelationsOptions(), "now": NOW},
            consolidate.Output,
        ),
        (
            consolidate,
            {"episodes": [EPISODE], "existing": [USER_FACT], "relations": RelationsOptions(enabled=False), "now": NOW},
            consolidate.FactsOutput,
        ),
        (digest, {"facts": [USER_FACT], "edges": [EDGE], "user_names": [], "previous": None}, digest.Output),
        (compact, {"subject": "user", "facts": [USER_FACT]}, compact.Output),
    ],
    ids=[
        "observe",
        "encode_episode",
        "consolidate-no-relations",
        "consolidate-relations",
        "consolidate-relations-disabled",
        "digest",
        "compact",
    ],
)
def test_stage_call_carries_input_and_output_schema(
    module: ModuleType, fields: dict[str, Any], output: type[BaseModel]
) -> None:
    stage: Stage[Any, Any] = module.STAGE
    inputs = stage.input(**fields)

    call = stage.call(inputs)

    assert (call.stage, call.inputs, call.output) == (stage, inputs, output)
    assert issubclass(call.output, stage.output)
    assert call.output_schema == output.model_json_schema()
    assert [m["role"] for m in stage.render(inputs)] == ["system", "user"]


def _check(output: type[BaseModel], sample: dict[str, Any], valid: bool) -> None:
    if valid:
        output.model_validate(sample)
    else:
        with pytest.raises(ValidationError):
            output.model_validate(sample)


# -- redact -------------------------------------------------------------------------------------

REDACT = redact.Input(
    text="Tom plays the cello in a quartet. The user bakes sourdough.",
    forgotten=["Tom, Moni's brother, plays the cello in a string quartet."],
    terms=["cello", "quartet", "tom"],
)


def test_redact_render() -> None:
    system, user = redact.STAGE.render(REDACT)

    assert "use any of these words or their forms: cello, quartet, tom." in system["content"]
    assert "Forgotten memories:\n- Tom, Moni's brother, plays the cello in a string quartet." in user["content"]
    assert user["content"].endswith("Text:\nTom plays the cello in a quartet. The user bakes sourdough.")


@pytest.mark.parametrize(
    ("sample", "valid"),
    [
        ({"text": "The user bakes sourdough."}, True),
        ({"text": ""}, True),
        ({"text": "The user bakes sourdough. Her brother plays the Cellos."}, False),
        ({"text": "The user bakes sourdough; Tom's band plays on."}, False),
    ],
    ids=["redacted", "nothing-left", "a-forgotten-word-inflected", "a-forgotten-name"],
)
def test_redact_output_refuses_a_forgotten_term(sample: dict[str, Any], valid: bool) -> None:
    _check(redact.STAGE.output_for(REDACT), sample, valid)
    _check(redact.Output, sample, True)  # the base schema knows no terms: the call's narrowed one does
