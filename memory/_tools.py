"""Agent tools bound to a MemoryContext: OpenAI-style schemas, async ``call``, error envelopes.

Authority comes from the bound context only: arguments are validated with ``extra="forbid"``,
so no argument can name another namespace, user or session.

Results are compact by default (:func:`compact_item`: id, tier, subject, date, text), since every
character of a tool result is a token the model reads; a tool whose arguments have a ``verbose``
field returns the full :class:`MemoryItem` (confidence, scores, provenance, metadata) when it is set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._errors import ConfigurationError, TiermemError
from ._records import MemoryItem

__all__ = ["MemoryTool", "RecallArguments", "ToolEnvelope", "Toolset"]

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class RecallArguments(BaseModel):
    """Arguments of ``memory_recall``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1, max_length=2000, description="What to look for, in natural language.")
    limit: int = Field(default=10, ge=1, le=50, description="How many memories to return.")
    tiers: list[Literal["working", "episodic", "semantic", "digest"]] | None = Field(
        default=None, description="Only these tiers; all enabled tiers when omitted."
    )
    subject: str | None = Field(
        default=None, max_length=64, description="Only memories about this subject ('user', 'moni', 'acme-corp')."
    )
    verbose: bool = Field(
        default=False, description="Return every field (confidence, scores, provenance, metadata), not just the text."
    )


class ToolEnvelope(BaseModel):
    """What every memory tool returns: ``ok``, the results, or a recoverable error."""

    model_config = ConfigDict(frozen=True)

    ok: bool = Field(description="False when the call could not be served; the agent may retry.")
    results: list[dict[str, Any]] = Field(
        default_factory=list, description="Memory items as JSON objects, compact unless asked for verbose."
    )
    error: str | None = Field(default=None, description="What went wrong, for the model to read.")


Handler = Callable[[BaseModel], Awaitable[Sequence[MemoryItem]]]


def _date(item: MemoryItem) -> str:
    """The day a memory is about: a fact's validity start, a session's first turn, else its creation."""
    for key in ("valid_from", "started_at"):
        value = item.metadata.get(key)
        if isinstance(value, str) and len(value) >= 10:
            return value[:10]
    return item.created_at.date().isoformat()


def compact_item(item: MemoryItem) -> dict[str, Any]:
    """What a model needs to use a memory: its id (to refer back to it), tier, subject, date and text."""
    return {"id": item.id, "tier": item.tier, "subject": item.subject, "date": _date(item), "text": item.text}


class MemoryTool:
    """One tool: a name, a JSON schema, and an async ``call`` that never raises into the agent loop.

    When ``arguments`` has a ``verbose`` field, results are :func:`compact_item` views unless the
    call sets it; other tools return full items.
    """

    def __init__(self, *, name: str, description: str, arguments: type[BaseModel], handler: Handler) -> None:
        if not TOOL_NAME.match(name):
            raise ConfigurationError(f"tool name {name!r} must match {TOOL_NAME.pattern}")
        self.name = name
        self.description = description
        self.arguments = arguments
        self._handler = handler

    def renamed(self, name: str) -> MemoryTool:
        """The same tool under another name (an MCP server's ``recall`` for ``memory_recall``)."""
        return MemoryTool(name=name, description=self.description, arguments=self.arguments, handler=self._handler)

    @property
    def parameters(self) -> dict[str, Any]:
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema["additionalProperties"] = False
        return schema

    def schema(self) -> dict[str, Any]:
        """The OpenAI-style tool definition, ready for litellm's ``tools=``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    async def call(self, arguments: str | dict[str, Any] | None) -> dict[str, Any]:
        """Run the tool; bad arguments or a failing store give ``ok: False``, never an exception."""
        try:
            raw = json.loads(arguments) if isinstance(arguments, str) else (arguments or {})
            if not isinstance(raw, dict):
                raise ValueError("arguments must be a JSON object")
            parsed = self.arguments.model_validate(raw)
        except (ValueError, ValidationError) as exc:
            return ToolEnvelope(ok=False, error=f"invalid arguments for {self.name}: {_brief(exc)}").model_dump()
        try:
            items = await self._handler(parsed)
        except TiermemError as exc:
            return ToolEnvelope(ok=False, error=f"{self.name} failed: {exc}").model_dump()
        if getattr(parsed, "verbose", True):
            results = [i.model_dump(mode="json") for i in items]
        else:
            results = [compact_item(i) for i in items]
        return ToolEnvelope(ok=True, results=results).model_dump()


def _brief(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
    return str(exc)


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


class Toolset(Sequence[MemoryTool]):
    """The tools bound to one context, with helpers for litellm-style tool calling."""

    def __init__(self, tools: Sequence[MemoryTool]) -> None:
        self._tools = list(tools)
        self._by_name = {t.name: t for t in self._tools}

    def __getitem__(self, index: Any) -> Any:
        return self._tools[index]

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[MemoryTool]:
        return iter(self._tools)

    def get(self, name: str) -> MemoryTool | None:
        return self._by_name.get(name)

    def schemas(self) -> list[dict[str, Any]]:
        """All tool definitions, for ``litellm.completion(tools=...)``."""
        return [t.schema() for t in self._tools]

    async def execute(self, message: Any) -> list[dict[str, Any]]:
        """Run the tool calls of an assistant message; returns the ``role: tool`` messages to append."""
        out: list[dict[str, Any]] = []
        for call in _get(message, "tool_calls") or []:
            function = _get(call, "function")
            name = _get(function, "name")
            tool = self._by_name.get(name) if isinstance(name, str) else None
            if tool is None:
                envelope = ToolEnvelope(ok=False, error=f"unknown tool {name!r}").model_dump()
            else:
                envelope = await tool.call(_get(function, "arguments"))
            out.append(
                {"role": "tool", "tool_call_id": _get(call, "id"), "name": name, "content": json.dumps(envelope)}
            )
        return out
