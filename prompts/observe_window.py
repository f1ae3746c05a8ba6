"""Window observer prompt: consecutive past turns of one session -> observations, each naming its turn.

Used by ``import_conversations`` only (capture observes one turn per call with :mod:`tiermem.prompts.observe`):
one call reads a window of consecutive turns, so a history costs a fraction of the calls and the system
prompt is sent once per window instead of once per turn. Each observation says which turn of the window it
comes from (``turn``, numbered from 1 as the prompt numbers them), so its entry is dated and attributed to
that turn as if the turn had been observed alone. An observation naming a turn not in the window does not
validate (the model is asked again).
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Message
from tiermem.memory._retrieval_keys import MAX_KEYS
from tiermem.memory._stage import ChatMessages, Stage

from . import observe
from ._policy import labelled_item, policy_rules

VERSION = "observe-window-v3"
MAX_PER_TURN = 20
"""At most this many observations of one turn (as :class:`observe.Output` allows for a turn alone)."""


class WindowTurn(BaseModel):
    """One turn of the window."""

    model_config = ConfigDict(frozen=True)

    messages: list[Message] = Field(description="The turn's messages, in order.")
    now: datetime = Field(description="When the turn happened.")


class Input(BaseModel):
    """What the window observer sees."""

    model_config = ConfigDict(frozen=True)

    turns: list[WindowTurn] = Field(min_length=1, description="Consecutive turns of one session, in order.")
    user_names: list[str] = Field(default_factory=list, description="Display names of the primary user.")
    known_subjects: list[str] = Field(default_factory=list, description="Subjects already known for this user.")
    policy: MemoryPolicy | None = Field(default=None, description="What to remember and what to leave out.")


class Observation(observe.Observation):
    """One thing worth remembering, and the turn that says it."""

    turn: int = Field(ge=1, description="The number of the turn it comes from, as given ('Turn 2' -> 2).")


class Output(BaseModel):
    """The window observer's answer (a call's answer is checked against its window's size, see ``output_for``)."""

    observations: list[Observation] = Field(default_factory=list)

    @model_validator(mode="after")
    def _per_turn(self) -> Output:
        counts: dict[int, int] = {}
        for obs in self.observations:
            counts[obs.turn] = counts.get(obs.turn, 0) + 1
        crowded = sorted(t for t, n in counts.items() if n > MAX_PER_TURN)
        if crowded:
            raise ValueError(f"at most {MAX_PER_TURN} observations per turn; turn(s) {crowded} have more")
        return self


def sized(turns: int, labels: tuple[str, ...] = ()) -> type[Output]:
    """The answer for a window of ``turns`` turns: every observation's ``turn`` between 1 and ``turns`` (and
    its categories among a policy's ``labels``, when it has some).

    One class per size (cached), so the schema a model is sent says the bound too.
    """
    return _sized(turns, labels)


@functools.cache
def _sized(turns: int, labels: tuple[str, ...]) -> type[Output]:
    bounded: Any = create_model(
        f"Observation{turns}",
        __base__=Observation,
        turn=(int, Field(ge=1, le=turns, description=f"The number of the turn it comes from, 1 to {turns}.")),
    )
    if labels:
        bounded = labelled_item(bounded, labels)
    limit: Any = Field(default_factory=list, max_length=MAX_PER_TURN * turns)
    model: Any = create_model(f"Output{turns}", __base__=Output, observations=(list[bounded], limit))  # type: ignore[valid-type]
    return cast(type[Output], model)


TEXT = (
    """\
You are the observer of a long-term memory system. Read a window of consecutive turns of one past
conversation and write down what is worth remembering about the people in it, one self-contained
sentence per observation. Give every observation the number of the turn that says it ("turn": 2 for
Turn 2). Earlier turns are context for later ones (who "she" is, what "it" refers to), but each
observation belongs to the one turn that says it: do not repeat in a later turn what an earlier
turn already said, and never name a turn that is not in the window.

"""
    + observe.OBSERVATION_RULES
    + """\
Use the speaker's name when it is given. Each turn says when it happened.
"""
)


def turn_block(number: int, turn: WindowTurn) -> str:
    """How one turn is shown: its number, its time and its messages (also what a turn's size is counted on)."""
    said = "\n".join(f"{m.name or m.role}: {m.content}" for m in turn.messages)
    return f"Turn {number} (at {turn.now.isoformat()}):\n{said}"


def _render(inputs: Input) -> ChatMessages:
    system = TEXT.format(
        user_names=", ".join(inputs.user_names) or "unknown",
        known_subjects=", ".join(inputs.known_subjects) or "none",
        max_keys=MAX_KEYS,
    ) + policy_rules(inputs.policy)
    turns = "\n\n".join(turn_block(n, t) for n, t in enumerate(inputs.turns, start=1))
    return [{"role": "system", "content": system}, {"role": "user", "content": turns}]


def _output_for(inputs: Input) -> type[Output]:
    return sized(len(inputs.turns), inputs.policy.labels if inputs.policy is not None else ())


STAGE = Stage(
    name="observe_window",
    version=VERSION,
    input=Input,
    output=Output,
    text=TEXT,
    renderer=_render,
    narrow=_output_for,
)
"""The window observer stage: consecutive turns in, observations naming their turn out."""
