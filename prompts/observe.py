"""Observer prompt: one captured turn -> working-memory observations with subjects."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Message
from tiermem.memory._retrieval_keys import MAX_KEYS, ModelKeys
from tiermem.memory._stage import ChatMessages, Stage

from ._policy import Categories, categories_field, labelled, policy_rules

VERSION = "observe-v4"
Kind = Literal["fact", "preference", "event", "plan", "relationship", "other"]


class Input(BaseModel):
    """What the observer sees."""

    model_config = ConfigDict(frozen=True)

    messages: list[Message] = Field(description="The turn's messages, in order.")
    user_names: list[str] = Field(default_factory=list, description="Display names of the primary user.")
    known_subjects: list[str] = Field(default_factory=list, description="Subjects already known for this user.")
    now: datetime = Field(description="When the turn happened.")
    policy: MemoryPolicy | None = Field(default=None, description="What to remember and what to leave out.")


class Observation(BaseModel):
    """One thing worth remembering from the turn."""

    subject: str = Field(description="'user', a lowercase first name ('moni') or an org ('acme-corp').")
    kind: Kind = Field(description="What sort of observation it is.")
    text: str = Field(min_length=1, max_length=1000, description="One self-contained sentence.")
    salience: float = Field(ge=0.0, le=1.0, description="How much it matters later, 0..1.")
    keys: ModelKeys = Field(default_factory=list)
    categories: Categories = categories_field()


class Output(BaseModel):
    """The observer's answer."""

    observations: list[Observation] = Field(default_factory=list, max_length=20)


OBSERVATION_RULES = """\
Subject attribution: every observation has exactly one subject.
- "user" is the primary user (also called by their display names: {user_names}).
- Another person is their lowercase first name: "My wife Moni is allergic to shellfish."
  -> subject "moni", text "Moni, the user's wife, is allergic to shellfish." Keep the relation to
  the user in the text; never file a fact about Moni under "user".
- An organisation is its lowercase-hyphenated name: "I work at Acme Corp" -> subject "user"
  (it is the user's job), and "Acme Corp is moving to Berlin" -> subject "acme-corp".
Known subjects so far: {known_subjects}.

Retrieval keys: give each observation up to {max_keys} "keys", short lowercase broader terms and
synonyms a later question may use instead of its words, never words already in the text:
"The user is allergic to peanuts." -> keys ["nuts", "food allergy", "health"]; "Moni does
kickboxing." -> keys ["martial arts", "sport", "exercise"]. Keys are searched, never shown.

Time and company: write dates, never relative time words. "Last week", "yesterday", "two days ago"
become the date or period they name, counted from when the turn happened ("we moved there last
week" said on 2026-03-09 -> "in the week of 2 March 2026"); drop a relative word you cannot date.
"We" is the user and whoever the turn says they are with ("My wife Moni is allergic to shellfish, so
we never order paella." -> "The user and Moni never order paella."), else "the user and others".

Salience: 0.9 for lasting facts (health, family, work, strong preferences), 0.6 for plans and
events, 0.3 for small talk. Skip greetings, thanks and the assistant's own suggestions.
"""
"""How observations are attributed, keyed and weighed: shared with the window observer (``observe_window``)."""

TEXT = (
    """\
You are the observer of a long-term memory system. Read one conversation turn and write down
what is worth remembering about the people in it, one self-contained sentence per observation.

"""
    + OBSERVATION_RULES
    + """\
Use the speaker's name when it is given. The turn happened at {now}.
"""
)


def _render(inputs: Input) -> ChatMessages:
    system = TEXT.format(
        user_names=", ".join(inputs.user_names) or "unknown",
        known_subjects=", ".join(inputs.known_subjects) or "none",
        now=inputs.now.isoformat(),
        max_keys=MAX_KEYS,
    ) + policy_rules(inputs.policy)
    turn = "\n".join(f"{m.name or m.role}: {m.content}" for m in inputs.messages)
    return [{"role": "system", "content": system}, {"role": "user", "content": f"Turn:\n{turn}"}]


def _output_for(inputs: Input) -> type[Output]:
    """With a policy's labels, each observation's categories are among them."""
    labels = inputs.policy.labels if inputs.policy is not None else ()
    return labelled(Output, "observations", Observation, labels)


STAGE = Stage(
    name="observe", version=VERSION, input=Input, output=Output, text=TEXT, renderer=_render, narrow=_output_for
)
"""The observer stage: one turn in, observations (labelled, under a policy with labels) out."""
