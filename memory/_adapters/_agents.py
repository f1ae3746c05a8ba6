"""An OpenAI Agents SDK ``Session`` that captures each turn into tiermem, and recall for the agent.

The SDK replays a session's items verbatim (tool calls, reasoning, ids), which tiermem's turn log does not
keep, so the items live in an inner session (``SQLiteSession`` in memory unless one is given) and tiermem
gets the conversation as turns: the user's and the assistant's text, captured once the assistant answered.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper, SQLiteSession, Tool
from agents.items import TResponseInputItem
from agents.memory import Session, SessionSettings
from agents.tool_context import ToolContext

from .._errors import InvalidArgumentError
from .._records import MemoryContext
from .._tools import MemoryTool
from .._write import MemorySystem

__all__ = ["TiermemSession"]

Instructions = Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str]]


def _message(item: object) -> dict[str, str] | None:
    """A user or assistant message's text as a chat message; tool calls, their outputs and reasoning: None."""
    if not isinstance(item, Mapping) or item.get("role") not in {"user", "assistant"}:
        return None
    if item.get("type", "message") != "message":
        return None
    content = item.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(str(p["text"]) for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    else:
        return None
    return {"role": str(item["role"]), "content": text} if text.strip() else None


def _function_tool(tool: MemoryTool) -> FunctionTool:
    schema = tool.schema()["function"]

    async def invoke(_: ToolContext[Any], arguments: str) -> str:
        return json.dumps(await tool.call(arguments))  # an error envelope, never an exception

    return FunctionTool(
        name=schema["name"],
        description=schema["description"],
        params_json_schema=dict(schema["parameters"]),
        on_invoke_tool=invoke,
        strict_json_schema=False,  # optional arguments (limit, tiers, ...) are not strict mode's all-required
    )


class TiermemSession:
    """The Agents SDK's session protocol (``get_items``, ``add_items``, ``pop_item``, ``clear_session``).

    ``ctx`` names the user and the session (``session_id`` required). Each turn, the user's messages and
    the assistant's answer to them, is captured once ``add_items`` has seen the answer; ``clear_session``
    ends the tiermem session (its turns become an episode) and empties the replayed history. Recall reaches
    the agent by :meth:`tools` (``memory_recall``, and the write tools with ``write=True``) and by
    :meth:`instructions` (the memory block for the latest user message, below the agent's own prompt).
    """

    session_settings: SessionSettings | None = None  # the SDK's defaults (no history limit)

    def __init__(self, memory: MemorySystem, ctx: MemoryContext, *, history: Session | None = None) -> None:
        if ctx.session_id is None:
            raise InvalidArgumentError("TiermemSession needs a MemoryContext with a session_id")
        self.memory = memory
        self.ctx = ctx
        self.session_id: str = ctx.session_id
        self.history: Session = history if history is not None else SQLiteSession(ctx.session_id)
        self._pending: list[dict[str, str]] = []  # this turn's messages, until the assistant has answered

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        return await self.history.get_items(limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Keep the items for replay, and capture each turn the assistant has answered."""
        await self.history.add_items(items)
        for message in filter(None, map(_message, items)):
            if message["role"] == "user" and any(m["role"] == "assistant" for m in self._pending):
                await self._capture()
            self._pending.append(message)
        if self._pending and self._pending[-1]["role"] == "assistant":
            await self._capture()

    async def _capture(self) -> None:
        turn, self._pending = self._pending, []
        await self.memory.capture(self.ctx, turn, metadata={"source": "openai-agents"})

    async def pop_item(self) -> TResponseInputItem | None:
        """The latest item, out of the replayed history (and out of the turn not captured yet, if there)."""
        item = await self.history.pop_item()
        message = _message(item)
        if message is not None and self._pending and self._pending[-1] == message:
            self._pending.pop()
        return item

    async def clear_session(self) -> None:
        """Capture what is pending, end the tiermem session, and empty the replayed history."""
        if self._pending:
            await self._capture()
        await self.history.clear_session()
        await self.memory.end_session(self.ctx)

    def tools(self, *, write: bool = False) -> list[Tool]:
        """tiermem's tools bound to this user, as the SDK's function tools."""
        return [_function_tool(t) for t in self.memory.tools(self.ctx, write=write)]

    def instructions(self, base: str) -> Instructions:
        """``Agent(instructions=...)``: ``base``, then the memory block recalled for the latest user message."""

        async def render(_: RunContextWrapper[Any], __: Agent[Any]) -> str:
            latest = next(
                (m for m in map(_message, reversed(await self.history.get_items())) if m and m["role"] == "user"),
                None,
            )
            if latest is None:
                return base
            return f"{base}\n\n{await self.memory.format_context(self.ctx, latest['content'])}"

        return render
