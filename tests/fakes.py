"""Test helpers: a fake model that answers every pipeline stage, dispatched on the prompt it is sent.

The fakes are reached through real litellm (``tiermem.memory.testing.FunctionModel``); the stage is told
from the system prompt, whose fixed opening differs per prompt module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tiermem import MemoryContext
from tiermem.memory.testing import FunctionModel, RecordedCall
from tiermem.pipelines import PROMPTS

__all__ = [
    "STAGE_OPENINGS",
    "Sequenced",
    "StageReply",
    "Switch",
    "calls_for",
    "default_reply",
    "messages_of",
    "session",
    "stage_model",
    "stage_of",
    "user_body",
]

Messages = list[dict[str, Any]]
StageReply = Callable[[Messages], "str | dict[str, Any]"]


def _opening(text: str) -> str:
    """The fixed start of a prompt text: its first line, cut before the first placeholder."""
    return text.splitlines()[0].split("{")[0].strip()


STAGE_OPENINGS: dict[str, str] = {stage: _opening(module.TEXT) for stage, module in PROMPTS.items()}


def stage_of(messages: Messages) -> str:
    """Which pipeline stage sent these messages (from the first, system, message)."""
    first = str(messages[0].get("content", ""))
    for stage, opening in STAGE_OPENINGS.items():
        if first.startswith(opening):
            return stage
    raise AssertionError(f"no stage prompt starts the messages: {first[:80]!r}")


def user_body(messages: Messages) -> str:
    """The content of the first user message (where every prompt puts its data)."""
    return next(str(m["content"]) for m in messages if m.get("role") == "user")


def _section(body: str, title: str) -> list[str]:
    """Top-level bullet lines ("- ...") of one titled section of a prompt body ("New episodes ...:")."""
    lines: list[str] = []
    inside = False
    for line in body.splitlines():
        if not inside and line.startswith(title) and line.rstrip().endswith(":"):
            inside = True
        elif inside and line.startswith("- "):
            lines.append(line[2:])
        elif inside and line.strip() and not line[0].isspace():
            break  # nested bullets (indented) belong to the line above; a new title ends the section
    return lines


_BRACKET = re.compile(r"^\[(?P<subject>[^\]]+)\]\s*(?P<text>.*)$")
_EPISODE = re.compile(r"^id=\S+ \([0-9-]+\) (?P<text>.*)$")


def default_reply(stage: str, messages: Messages) -> dict[str, Any]:
    """A valid, content-preserving answer for each stage (every fact filed under "user")."""
    body = user_body(messages)
    if stage == "observe":
        turn = body.split("Turn:\n", 1)[-1]
        said = [line.split(": ", 1)[1] for line in turn.splitlines() if line.startswith("user: ")]
        observations = [{"subject": "user", "kind": "fact", "text": text, "salience": 0.6} for text in said if text]
        return {"observations": observations}
    if stage == "encode_episode":
        found = [m for m in (_BRACKET.match(x) for x in _section(body, "Observations")) if m]
        summary = " ".join(m["text"] for m in found) or "The user chatted."
        subjects = sorted({m["subject"] for m in found} | {"user"})
        return {"summary": summary, "subjects": subjects, "salience": 0.6}
    if stage == "consolidate":
        episodes = [m["text"] for m in (_EPISODE.match(x) for x in _section(body, "New episodes")) if m]
        return {"operations": [{"op": "add", "subject": "user", "text": text} for text in episodes], "edges": []}
    if stage == "digest":
        facts = [m["text"] for m in (_BRACKET.match(x) for x in _section(body, "Facts")) if m]
        return {"text": " ".join(facts) or "The user has no facts yet."}
    if stage == "compact":
        return {"merges": []}
    raise AssertionError(f"unknown stage {stage!r}")


@dataclass
class Switch:
    """A flag a test flips to make a fake model misbehave, then behave again."""

    broken: bool = True


def stage_model(
    replies: Mapping[str, StageReply | str | dict[str, Any]] | None = None, *, latency: float = 0.0
) -> FunctionModel:
    """A fake model answering every stage: ``replies[stage]`` when given, else :func:`default_reply`.

    A reply may be a fixed dict or string, or a function of the messages.
    """
    chosen = dict(replies or {})

    def answer(messages: Messages) -> str | dict[str, Any]:
        stage = stage_of(messages)
        reply = chosen.get(stage)
        if reply is None:
            return default_reply(stage, messages)
        return reply(messages) if callable(reply) else reply

    return FunctionModel(function=answer, latency=latency)


def calls_for(model: FunctionModel, stage: str) -> list[RecordedCall]:
    """The requests one stage sent to the fake model."""
    return [c for c in model.calls if stage_of(c.messages) == stage]


def messages_of(*texts: str) -> list[dict[str, str]]:
    """A turn: alternating user and assistant messages."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


@dataclass
class Sequenced:
    """Replies in order, then the last one forever (handy for "invalid twice, then valid")."""

    replies: list[str | dict[str, Any]]
    served: int = field(default=0)

    def __call__(self, messages: Messages) -> str | dict[str, Any]:
        reply = self.replies[min(self.served, len(self.replies) - 1)]
        self.served += 1
        return reply


def session(ctx: MemoryContext, session_id: str) -> MemoryContext:
    """The same user in another session."""
    return ctx.model_copy(update={"session_id": session_id})
