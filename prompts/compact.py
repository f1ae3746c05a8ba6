"""Compaction prompt: many facts about ONE subject -> fewer, merged facts."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Fact
from tiermem.memory._stage import ChatMessages, Stage

from ._policy import policy_rules

VERSION = "compact-v2"
MAX_TEXT = 1000
"""Characters a merged fact may have: a longer fact cannot be merged without losing detail."""


class Input(BaseModel):
    """What the compactor sees: facts of a single subject."""

    model_config = ConfigDict(frozen=True)

    subject: str = Field(description="The one subject every fact is about.")
    facts: list[Fact] = Field(description="Active facts of that subject, with ids.")
    policy: MemoryPolicy | None = Field(
        default=None, description="What to remember and what to leave out: a merged fact says none of the latter."
    )


class Merge(BaseModel):
    """Several facts said as one."""

    source_ids: list[str] = Field(min_length=2, description="Ids of the facts merged (all of the same subject).")
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="The merged fact, one or two sentences.")


class Output(BaseModel):
    """The compactor's answer; facts not named in any merge stay as they are."""

    merges: list[Merge] = Field(default_factory=list, max_length=100)


TEXT = """\
You compact the semantic memory of one subject ("{subject}"). Merge facts that repeat or
overlap into one fact that keeps every detail (names, dates, numbers). Do not merge facts that
are unrelated, do not invent anything, and keep the subject: every merged fact is about
"{subject}". Facts you do not merge stay unchanged.
"""


def _render(inputs: Input) -> ChatMessages:
    lines = "\n".join(f"- id={f.id} {f.text}" for f in inputs.facts)
    return [
        {"role": "system", "content": TEXT.format(subject=inputs.subject) + policy_rules(inputs.policy, labels=False)},
        {"role": "user", "content": f"Facts:\n{lines}"},
    ]


STAGE = Stage(name="compact", version=VERSION, input=Input, output=Output, text=TEXT, renderer=_render)
"""The compaction stage: one subject's facts in, merges out."""
