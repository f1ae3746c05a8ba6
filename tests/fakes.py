"""Test helpers: a fake model that answers every pipeline stage, dispatched on the stage it is asked.

The fakes are reached through real litellm (``tiermem.memory.testing.FunctionModel``). Each request comes
with its :class:`StageCall` (the stage object, its typed input, the output schema), so a fake is keyed on
``observe.STAGE`` and friends and reads the typed input instead of parsing the prompt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tiermem import MemoryContext
from tiermem.memory._redaction import Forgotten
from tiermem.memory._stage import Stage
from tiermem.memory.testing import FunctionModel, RecordedCall, StageCall
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

__all__ = [
    "AnyCall",
    "Sequenced",
    "StageReply",
    "Switch",
    "calls_for",
    "default_reply",
    "messages_of",
    "session",
    "stage_model",
]

Messages = list[dict[str, Any]]
AnyCall = StageCall[Any, Any]
# A reply function may be async (it may wait, to let another call start), as FunctionModel allows.
StageReply = Callable[[Messages, AnyCall], "str | dict[str, Any] | Awaitable[str | dict[str, Any]]"]


def default_reply(call: AnyCall) -> dict[str, Any]:
    """A valid, content-preserving answer for each stage (every fact filed under "user")."""
    inputs = call.inputs
    if isinstance(inputs, observe.Input):
        said = [m.content for m in inputs.messages if (m.name or m.role) == "user" and m.content]
        return {"observations": [{"subject": "user", "kind": "fact", "text": text, "salience": 0.6} for text in said]}
    if isinstance(inputs, observe_window.Input):  # each turn as the observe answer above, numbered by its turn
        numbered = [
            (n, m.content) for n, t in enumerate(inputs.turns, 1) for m in t.messages if (m.name or m.role) == "user"
        ]
        observations = [{"subject": "user", "kind": "fact", "text": text, "salience": 0.6, "turn": n}
                        for n, text in numbered if text]  # fmt: skip
        return {"observations": observations}
    if isinstance(inputs, encode_episode.Input):
        summary = " ".join(e.text for e in inputs.entries) or "The user chatted."
        subjects = sorted({e.subject for e in inputs.entries} | {"user"})
        return {"summary": summary, "subjects": subjects, "salience": 0.6}
    if isinstance(inputs, encode_consolidate.Input):  # each provisional episode summarised, then as consolidate
        episodes = [
            {"id": e.id, "summary": " ".join(o.text for o in inputs.observations if o.session_id == e.session_id)
             or "The user chatted.", "subjects": ["user"], "salience": 0.6}
            for e in inputs.episodes if e.id in inputs.encode
        ]  # fmt: skip
        operations = [{"op": "add", "subject": "user", "text": e.summary} for e in inputs.episodes]
        return {"episodes": episodes, "operations": operations, "edges": []}
    if isinstance(inputs, consolidate.Input):
        operations = [{"op": "add", "subject": "user", "text": e.summary} for e in inputs.episodes]
        return {"operations": operations, "edges": []}
    if isinstance(inputs, digest.Input):
        return {"text": " ".join(f.text for f in inputs.facts) or "The user has no facts yet."}
    if isinstance(inputs, compact.Input):
        return {"merges": []}
    if isinstance(inputs, redact.Input):  # the sentences that say none of the forgotten terms
        forgotten = Forgotten(texts=tuple(inputs.forgotten), terms=frozenset(inputs.terms))
        return {"text": forgotten.redact(inputs.text)}
    raise AssertionError(f"unknown stage {call.stage!r}")


@dataclass
class Switch:
    """A flag a test flips to make a fake model misbehave, then behave again."""

    broken: bool = True


def stage_model(
    replies: Mapping[Stage[Any, Any], StageReply | str | dict[str, Any]] | None = None, *, latency: float = 0.0
) -> FunctionModel:
    """A fake model answering every stage: ``replies[stage]`` when given, else :func:`default_reply`.

    A reply may be a fixed dict or string, or a function of the messages and the stage call. An import's
    ``observe_window`` call is answered turn by turn as ``observe`` calls (``FunctionModel.split_windows``)
    unless ``replies`` names ``observe_window.STAGE``.
    """
    chosen = dict(replies or {})

    def answer(messages: Messages, call: AnyCall) -> str | dict[str, Any] | Awaitable[str | dict[str, Any]]:
        reply = chosen.get(call.stage)
        if reply is None:
            return default_reply(call)
        return reply(messages, call) if callable(reply) else reply

    return FunctionModel(function=answer, latency=latency, split_windows=observe_window.STAGE not in chosen)


def calls_for(model: FunctionModel, stage: Stage[Any, Any]) -> list[RecordedCall]:
    """The requests one stage sent to the fake model."""
    return [c for c in model.calls if c.call is not None and c.call.stage is stage]


def messages_of(*texts: str) -> list[dict[str, str]]:
    """A turn: alternating user and assistant messages."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


@dataclass
class Sequenced:
    """Replies in order, then the last one forever (handy for "invalid twice, then valid")."""

    replies: list[str | dict[str, Any]]
    served: int = field(default=0)

    def __call__(self, messages: Messages, call: AnyCall) -> str | dict[str, Any]:
        reply = self.replies[min(self.served, len(self.replies) - 1)]
        self.served += 1
        return reply


def session(ctx: MemoryContext, session_id: str) -> MemoryContext:
    """The same user in another session."""
    return ctx.model_copy(update={"session_id": session_id})
