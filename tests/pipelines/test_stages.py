"""The typed stage boundary: both stage models are keyed on the prompt modules' ``STAGE`` objects, and a
fake model receives the stage call (stage, typed input, output schema) beside the messages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from tests.fakes import AnyCall, default_reply
from tiermem import LLM, Edge, Episode, Fact, MemoryContext, Message, ModelError, RelationsOptions, Turn, WorkingEntry
from tiermem.memory._stage import Stage
from tiermem.memory.testing import FunctionModel, ScriptedModel
from tiermem.pipelines import LLMStages, RulesStages, observe_turn
from tiermem.prompts import (
    STAGES,
    compact,
    consolidate,
    digest,
    encode_consolidate,
    encode_episode,
    observe,
    observe_window,
    redact,
)

# litellm builds a pydantic adapter for a TypedDict with ReadOnly items on its first completion.
pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CTX = MemoryContext(user_id="u-1", session_id="s-1")
TURN = Turn(id="turn_1", namespace="default", user_id="u-1", session_id="s-1", seq=0, created_at=NOW,
            messages=(Message(role="user", content="My wife Moni is allergic to shellfish."),))  # fmt: skip
FACT = Fact.new(CTX, subject="moni", text="Moni, the user's wife, is allergic to shellfish.", now=NOW)
OTHER = Fact.new(CTX, subject="moni", text="Moni, the user's wife, is allergic to shellfish!", now=NOW)
EPISODE = Episode(id="ep_1", namespace="default", user_id="u-1", session_id="s-1", summary=FACT.text,
                  subjects=("user", "moni"), started_at=NOW, ended_at=NOW, created_at=NOW, updated_at=NOW)  # fmt: skip
ENTRY = WorkingEntry(id="wm_1", namespace="default", user_id="u-1", session_id="s-1", subject="moni", text=FACT.text,
                     created_at=NOW, updated_at=NOW)  # fmt: skip
EDGE = Edge(id="edge_1", namespace="default", user_id="u-1", source="user", relation="married to", target="moni",
            created_at=NOW, updated_at=NOW)  # fmt: skip

INPUTS: dict[str, tuple[Stage[Any, Any], BaseModel]] = {
    "observe": (observe.STAGE, observe.Input(messages=list(TURN.messages), now=NOW)),
    "observe_window": (
        observe_window.STAGE,
        observe_window.Input(turns=[observe_window.WindowTurn(messages=list(TURN.messages), now=NOW)] * 2),
    ),
    "encode_episode": (
        encode_episode.STAGE,
        encode_episode.Input(entries=[ENTRY], turns=[TURN], started_at=NOW, ended_at=NOW),
    ),
    "consolidate": (consolidate.STAGE, consolidate.Input(episodes=[EPISODE], existing=[], now=NOW)),
    "consolidate-relations": (
        consolidate.STAGE,
        consolidate.Input(episodes=[EPISODE], existing=[], relations=RelationsOptions(), now=NOW),
    ),
    "encode_consolidate": (
        encode_consolidate.STAGE,
        encode_consolidate.Input(
            episodes=[EPISODE], observations=[ENTRY], existing=[], now=NOW, encode=[EPISODE.id], turns=[TURN]
        ),
    ),
    "encode_consolidate-relations": (
        encode_consolidate.STAGE,
        encode_consolidate.Input(
            episodes=[EPISODE], existing=[], relations=RelationsOptions(), now=NOW, encode=[EPISODE.id], turns=[TURN]
        ),
    ),
    "digest": (digest.STAGE, digest.Input(facts=[FACT], edges=[EDGE])),
    "compact": (compact.STAGE, compact.Input(subject="moni", facts=[FACT, OTHER])),
    "redact": (
        redact.STAGE,
        redact.Input(
            text=FACT.text + " Tom plays the cello.", forgotten=["Tom plays the cello."], terms=["tom", "play", "cello"]
        ),
    ),
}


def test_every_stage_is_covered() -> None:
    assert {stage for stage, _ in INPUTS.values()} == set(STAGES)


@pytest.mark.parametrize("case", list(INPUTS), ids=list(INPUTS))
async def test_rules_model_answers_every_stage_with_its_output(case: str) -> None:
    stage, inputs = INPUTS[case]

    output = await RulesStages().run(stage, inputs)

    assert type(output) is stage.output_for(inputs)


async def test_rules_model_refuses_a_stage_it_does_not_know() -> None:
    unknown = Stage(name="translate", version="translate-v1", input=observe.Input, output=observe.Output,
                    text="Translate.", renderer=lambda inputs: [])  # fmt: skip

    with pytest.raises(ModelError, match="no 'translate' stage"):
        await RulesStages().run(unknown, observe.Input(messages=list(TURN.messages), now=NOW))


@pytest.mark.parametrize("case", list(INPUTS), ids=list(INPUTS))
async def test_fake_model_receives_the_stage_call(case: str) -> None:
    stage, inputs = INPUTS[case]
    seen: list[AnyCall] = []

    def answer(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
        seen.append(call)
        return default_reply(call)

    fake = FunctionModel(answer, split_windows=False)  # the window call itself, not its turns' observe calls

    output = await LLMStages(LLM(fake.model)).run(stage, inputs)

    (call,) = seen
    assert (call.stage, call.inputs, call.output) == (stage, inputs, stage.output_for(inputs))
    assert call.output_schema == stage.output_for(inputs).model_json_schema()
    assert fake.calls[0].messages[: len(stage.render(inputs))] == stage.render(inputs)
    assert fake.calls[0].stage_name == stage.name
    assert type(output) is stage.output_for(inputs)


async def test_a_scripted_model_answers_whatever_it_is_asked() -> None:
    reply = {"observations": [{"subject": "moni", "kind": "fact", "text": FACT.text, "salience": 0.9}]}
    scripted = ScriptedModel([reply])

    observed = await observe_turn(
        LLMStages(LLM(scripted.model)), turn=TURN, user_names=[], aliases={}, known_subjects=[]
    )

    assert [e.text for e in observed.entries] == [FACT.text]
    assert scripted.calls[0].call is not None and scripted.calls[0].call.stage is observe.STAGE
    assert scripted.remaining == 0


@pytest.mark.parametrize("model", ["rules", "fake"], ids=["rules", "fake"])
async def test_records_are_stamped_with_the_stage_version(model: str) -> None:
    fake = FunctionModel(lambda messages, call: default_reply(call))
    stages = RulesStages() if model == "rules" else LLMStages(LLM(fake.model))

    observed = await observe_turn(stages, turn=TURN, user_names=[], aliases={}, known_subjects=[])

    assert observed.entries
    assert {e.metadata["prompt_version"] for e in observed.entries} == {observe.STAGE.version}
