"""A Pydantic AI toolset of tiermem's tools, with instructions that recall and a capture of a run's messages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset

from .._errors import InvalidArgumentError
from .._records import MemoryContext
from .._tools import MemoryTool
from .._write import CaptureResult, MemorySystem

__all__ = ["TiermemToolset"]


def _tool(tool: MemoryTool) -> Tool[Any]:
    schema = tool.schema()["function"]

    async def call(**arguments: Any) -> dict[str, Any]:
        return await tool.call(json.dumps(arguments))  # an error envelope, never an exception

    return Tool.from_schema(
        call, name=schema["name"], description=schema["description"], json_schema=schema["parameters"]
    )


def _text(content: object) -> str:
    """A user prompt's text: the string, or the string parts of a multimodal prompt."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(p for p in content if isinstance(p, str))
    return ""


def chat_messages(messages: Sequence[ModelMessage]) -> list[dict[str, str]]:
    """The user's prompts and the model's text answers, as chat messages; tool calls and returns stay out."""
    out: list[dict[str, str]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            said = [_text(p.content) for p in message.parts if isinstance(p, UserPromptPart)]
            out += [{"role": "user", "content": s} for s in said if s.strip()]
        elif isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            if text.strip():
                out.append({"role": "assistant", "content": text})
    return out


class TiermemToolset(FunctionToolset[Any]):
    """``Agent(toolsets=[memory])``, then ``await memory.capture(result.new_messages())``.

    The tools are tiermem's (``memory_recall``; with ``write=True`` also remember and forget), bound to
    ``ctx``'s user; the toolset's instructions (:meth:`recalled`) are the memory block recalled for the run's
    prompt; :meth:`capture` records a run's new messages as turns (``ctx`` needs a ``session_id``).
    """

    def __init__(self, memory: MemorySystem, ctx: MemoryContext, *, write: bool = False) -> None:
        super().__init__([_tool(t) for t in memory.tools(ctx, write=write)], id="tiermem")
        self.memory = memory
        self.ctx = ctx
        self.instructions(self.recalled)  # the toolset's own instructions, asked before each model request

    async def recalled(self, run: RunContext[Any]) -> str:
        """The memory block for this run's prompt (recalled without a cue when the prompt has no text)."""
        prompt = _text(run.prompt) if run.prompt is not None else ""
        return await self.memory.format_context(self.ctx, prompt)

    async def capture(self, messages: Sequence[ModelMessage]) -> list[CaptureResult]:
        """A run's messages (``result.new_messages()``) as turns, a new turn at each user prompt."""
        if self.ctx.session_id is None:
            raise InvalidArgumentError("capture needs a MemoryContext with a session_id")
        said = chat_messages(messages)
        return await self.memory.capture_from_items(self.ctx, said) if said else []
