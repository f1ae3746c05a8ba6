"""Episode encoder prompt: a session's observations and turns -> one episode."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Turn, WorkingEntry
from tiermem.memory._stage import ChatMessages, Stage

from ._policy import policy_rules

VERSION = "encode-episode-v2"


class Input(BaseModel):
    """What the encoder sees."""

    model_config = ConfigDict(frozen=True)

    entries: list[WorkingEntry] = Field(description="Every observation of the session, overflow included.")
    turns: list[Turn] = Field(description="The session's journaled turns.")
    parts: list[str] = Field(
        default_factory=list,
        description="Summaries of the session's consecutive parts, in order, for a session too long to show whole.",
    )
    user_names: list[str] = Field(default_factory=list, description="Display names of the primary user.")
    started_at: datetime = Field(description="First turn time.")
    ended_at: datetime = Field(description="Last turn time.")
    policy: MemoryPolicy | None = Field(default=None, description="What to remember and what to leave out.")


class Output(BaseModel):
    """The episode."""

    summary: str = Field(min_length=1, max_length=4000, description="What happened, 2-6 sentences, third person.")
    subjects: list[str] = Field(default_factory=list, description="Canonical subjects the episode involves.")
    salience: float = Field(default=0.5, ge=0.0, le=1.0, description="How much the session matters later.")


TEXT = """\
You write episodic memories. Summarise one past conversation in 2-6 sentences, third person,
concrete (names, places, dates, decisions, feelings). Refer to the primary user as "the user"
(display names: {user_names}); other people by first name and their relation to the user
("his wife Moni"). List every subject involved: "user", lowercase first names, or
lowercase-hyphenated organisation names. The session ran from {started_at} to {ended_at}.
"""


def _render(inputs: Input) -> ChatMessages:
    system = TEXT.format(
        user_names=", ".join(inputs.user_names) or "unknown",
        started_at=inputs.started_at.isoformat(),
        ended_at=inputs.ended_at.isoformat(),
    ) + policy_rules(inputs.policy, labels=False)
    observed = "\n".join(f"- [{e.subject}] {e.text}" for e in inputs.entries) or "- (none)"
    transcript = "\n".join(t.text for t in inputs.turns)
    content = f"Observations:\n{observed}\n\nTranscript:\n{transcript}"
    if inputs.parts:  # a session too long to show whole, summarised part by part: summarise the whole
        parts = "\n".join(f"{i}. {text}" for i, text in enumerate(inputs.parts, start=1))
        content = f"The session was too long to show whole. Summaries of its parts, in order:\n{parts}"
    return [{"role": "system", "content": system}, {"role": "user", "content": content}]


STAGE = Stage(name="encode_episode", version=VERSION, input=Input, output=Output, text=TEXT, renderer=_render)
"""The episode encoder stage: a session's observations and turns in, one episode out."""
