"""Digester prompt: a user's facts -> a narrative rollup of the primary user."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Edge, Fact
from tiermem.memory._stage import ChatMessages, Stage

from ._policy import policy_rules

VERSION = "digest-v4"


class Input(BaseModel):
    """What the digester sees."""

    model_config = ConfigDict(frozen=True)

    facts: list[Fact] = Field(description="The user's active facts, most confident first.")
    edges: list[Edge] = Field(default_factory=list, description="Current relations, when they are on.")
    user_names: list[str] = Field(default_factory=list, description="Display names of the primary user.")
    previous: str | None = Field(default=None, description="The previous digest, if any (may be out of date).")
    parts: list[str] = Field(
        default_factory=list,
        description="Digests of parts of the facts, most confident part first, for facts too many to show whole "
        "(the facts and relations are then not shown).",
    )
    policy: MemoryPolicy | None = Field(
        default=None, description="What to remember and what to leave out: the digest restates none of the latter."
    )


class Output(BaseModel):
    """The digest."""

    text: str = Field(min_length=1, max_length=6000, description="A short narrative about the primary user.")


TEXT = """\
Write a short narrative digest (one paragraph, at most 8 sentences) of the primary user
(display names: {user_names}) from the facts below. The digest is about the user. Other people
appear only in relation to the user ("his wife Moni, who is allergic to shellfish"); never fold
their facts into the user. Organisations appear through the user's link to them.
State only what the facts and relations below say holds now. The previous digest may be out of
date: keep nothing from it that the facts do not support. A past state may appear only as past
("previously worked at Acme"), never as current.
"""


def _render(inputs: Input) -> ChatMessages:
    system = TEXT.format(user_names=", ".join(inputs.user_names) or "unknown") + policy_rules(
        inputs.policy, labels=False
    )
    lines = "\n".join(f"- [{f.subject}] {f.text}" for f in inputs.facts) or "- (none)"
    rels = "\n".join(f"- {e.text}" for e in inputs.edges)
    body = f"Facts:\n{lines}"
    if rels:
        body += f"\n\nRelations:\n{rels}"
    if inputs.parts:  # facts too many to show whole, digested part by part: write the digest of them all
        parts = "\n".join(f"{i}. {text}" for i, text in enumerate(inputs.parts, start=1))
        body = f"The facts were too many to show whole. Digests of their parts, most confident first:\n{parts}"
    if inputs.previous:
        body += f"\n\nPrevious digest:\n{inputs.previous}"
    return [{"role": "system", "content": system}, {"role": "user", "content": body}]


STAGE = Stage(name="digest", version=VERSION, input=Input, output=Output, text=TEXT, renderer=_render)
"""The digest stage: the user's facts in, a narrative out."""
