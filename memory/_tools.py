"""Agent tools: the one table of them, and tools bound to a MemoryContext (OpenAI-style schemas, async
``call``, error envelopes).

:data:`TOOLS` is the table: per tool its name (and its MCP name), description, whether it reads or
writes, the option that enables it, whether it deletes, and its argument model. It is data only; the
folders that implement a tool bind its handler with :meth:`ToolSpec.bind` (the read tools in ``_read``
and ``_relations``, the write tools in ``_write``), and every consumer reads the table: the capability's
and the system's ``tools()`` through :func:`offer`, the presets (:class:`CapabilityPreset` accepts only
its read tools), the MCP server's tool list and dispatch, and the REST server's recall (which runs the
tool with :meth:`MemoryTool.run`, its errors raised for their HTTP status).

Authority comes from the bound context only: arguments are validated with ``extra="forbid"``,
so no argument can name another namespace, user or session.

Results are compact by default (:func:`compact_item`: id, tier, subject, date, text), since every
character of a tool result is a token the model reads; a tool whose arguments have a ``verbose``
field returns the full :class:`MemoryItem` (confidence, scores, provenance, metadata) when it is set.

A tool call never raises into the agent loop: arguments larger than :data:`MAX_ARGUMENT_BYTES` or
nested deeper than :data:`MAX_ARGUMENT_DEPTH` are refused before they are validated, a
:class:`TiermemError` comes back as its message, and anything else as a generic internal error
(logged with its traceback on the ``tiermem.tools`` logger), each in the same error envelope.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypedDict, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._errors import ConfigurationError, TiermemError
from ._items import MemoryItem
from ._text import loggable
from ._tool_arguments import (
    MAX_ARGUMENT_BYTES,
    MAX_ARGUMENT_DEPTH,
    ConnectArguments,
    ForgetArguments,
    RecallArguments,
    RememberArguments,
    parse_arguments,
)

__all__ = [
    "CONNECT",
    "FORGET",
    "MAX_ARGUMENT_BYTES",
    "MAX_ARGUMENT_DEPTH",
    "RECALL",
    "REMEMBER",
    "TOOLS",
    "ConnectArguments",
    "ForgetArguments",
    "MemoryTool",
    "RecallArguments",
    "RememberArguments",
    "ToolAccess",
    "ToolEnvelope",
    "ToolOption",
    "ToolSchema",
    "ToolSpec",
    "Toolset",
    "offer",
    "parse_arguments",
    "tool_spec",
]

log = logging.getLogger("tiermem.tools")

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_ERROR_CHARS = 1000
"""An error message is cut here: the model reads every character of it."""

ToolAccess = Literal["read", "write"]
"""A read tool is the read side's (a capability offers it); a write tool only the write side's, when asked."""
ToolOption = Literal["semantic", "relations"]
"""The option a tool needs on: the semantic tier, or relations within it."""

A_co = TypeVar("A_co", bound=BaseModel, covariant=True)
Handler = Callable[[BaseModel], Awaitable[Sequence[MemoryItem]]]


# -- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ToolSpec(Generic[A_co]):
    """One entry of the tool table: what a tool is, without how it runs (its folder binds that)."""

    name: str
    """Its name for the model (``memory_recall``)."""
    mcp_name: str
    """Its name on the MCP server, where the server itself says it is memory (``recall``)."""
    description: str
    access: ToolAccess
    option: ToolOption | None
    """The option that must be on for the tool to be offered; None: always offered."""
    arguments: type[A_co]
    destructive: bool = False
    """It deletes (an MCP host may ask the user first)."""

    def bind(
        self, handler: Callable[[A_co], Awaitable[Sequence[MemoryItem]]], arguments: type[BaseModel] | None = None
    ) -> MemoryTool:
        """This tool, running ``handler`` (bound to one context) on arguments its model validated; ``arguments``
        is a narrower subclass of the table's model to validate and offer (recall's categories by vocabulary)."""
        base, offered = self.arguments, arguments or self.arguments
        if not issubclass(offered, base):
            raise ConfigurationError(f"{self.name}'s arguments must be a {base.__name__}, not {offered.__name__}")

        async def run(args: BaseModel) -> Sequence[MemoryItem]:
            if not isinstance(args, base):  # MemoryTool validates with a subclass of it: never, barring a bug
                raise TypeError(f"{self.name} got {type(args).__name__}, not {base.__name__}")
            return await handler(args)

        return MemoryTool(name=self.name, description=self.description, arguments=offered, handler=run)


RECALL = ToolSpec(
    name="memory_recall",
    mcp_name="recall",
    description=(
        "Search long-term memory about the user and the people and organisations in their life. "
        "Returns memories ranked by relevance, each with its id, tier, subject, date and text "
        "(verbose: also confidence, scores, provenance and metadata)."
    ),
    access="read",
    option=None,
    arguments=RecallArguments,
)
CONNECT = ToolSpec(
    name="memory_connect",
    mcp_name="connect",
    description=(
        "Explore how people and organisations in the user's life are related. With 'from' alone, list "
        "everything connected to it; with 'from' and 'to', return the chain of relations between them. "
        "Only relations that hold now, unless 'as_of' (a past date) or 'include_history' is given."
    ),
    access="read",
    option="relations",
    arguments=ConnectArguments,
)
REMEMBER = ToolSpec(
    name="memory_remember",
    mcp_name="remember",
    description=(
        "Store one fact in the user's long-term memory, when they ask you to remember something or tell "
        "you something lasting about themselves. One sentence; 'subject' says whom it is about: 'user' "
        "(the default), a lowercase first name or a lowercase-hyphenated organisation. Returns the memory."
    ),
    access="write",
    option="semantic",
    arguments=RememberArguments,
)
FORGET = ToolSpec(
    name="memory_forget",
    mcp_name="forget",
    description=(
        "Delete one memory, by the id the recall tool returned, when the user asks you to forget it. "
        "Memories derived only from it go too. Returns what was deleted."
    ),
    access="write",
    option=None,
    arguments=ForgetArguments,
    destructive=True,
)
TOOLS: tuple[ToolSpec[BaseModel], ...] = (RECALL, CONNECT, REMEMBER, FORGET)
"""Every agent tool, in the order they are offered."""


def tool_spec(name: str) -> ToolSpec[BaseModel]:
    """The table's entry for a tool name (or MCP name); ConfigurationError for a name it does not have."""
    for spec in TOOLS:
        if name in (spec.name, spec.mcp_name):
            return spec
    raise ConfigurationError(f"unknown tool {name[:80]!r}; the tools are {[s.name for s in TOOLS]}")


def offer(
    bound: Mapping[str, MemoryTool], *, chosen: Collection[str], write: bool, options: Collection[ToolOption]
) -> Toolset:
    """The tools an agent is offered, in the table's order, from those ``bound`` to its context by name.

    A read tool when ``chosen`` names it (a preset's tools), a write tool when ``write``; either only
    while its option is among ``options``.
    """
    offered = [
        spec
        for spec in TOOLS
        if (write if spec.access == "write" else spec.name in chosen)
        and (spec.option is None or spec.option in options)
    ]
    return Toolset([bound[spec.name] for spec in offered])


# -- arguments and results ----------------------------------------------------------------------


class ToolEnvelope(BaseModel):
    """What every memory tool returns: ``ok``, the results, or a recoverable error."""

    model_config = ConfigDict(frozen=True)

    ok: bool = Field(description="False when the call could not be served; the agent may retry.")
    results: list[dict[str, object]] = Field(
        default_factory=list, description="Memory items as JSON objects, compact unless asked for verbose."
    )
    error: str | None = Field(default=None, description="What went wrong, for the model to read.")


class FunctionSchema(TypedDict):
    name: str
    description: str
    parameters: dict[str, Any]  # a JSON Schema: open-ended JSON that callers index into


class ToolSchema(TypedDict):
    """An OpenAI-style tool definition, as litellm's ``tools=`` takes it."""

    type: Literal["function"]
    function: FunctionSchema


def _date(item: MemoryItem) -> str:
    """The day a memory is about: a fact's validity start, a session's first turn, else its creation."""
    for key in ("valid_from", "started_at"):
        value = item.metadata.get(key)
        if isinstance(value, str) and len(value) >= 10:
            return value[:10]
    return item.created_at.date().isoformat()


def compact_item(item: MemoryItem) -> dict[str, str]:
    """What a model needs to use a memory: its id (to refer back to it), tier, subject, date and text;
    ``categories`` (comma-separated) when it has labels; ``past`` ("(past, until 2026-03-16)",
    :meth:`MemoryItem.past_mark`) on what no longer holds."""
    out = {"id": item.id, "tier": item.tier, "subject": item.subject, "date": _date(item), "text": item.text}
    if past := item.past_mark():
        out["past"] = past
    labels = item.metadata.get("categories")
    if isinstance(labels, list) and labels:  # the policy's labels, when the observer assigned some
        out["categories"] = ", ".join(str(label) for label in labels)
    return out


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
        """The arguments' JSON Schema (a JSON document callers index into, hence ``Any`` values)."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema["additionalProperties"] = False
        return schema

    def schema(self) -> ToolSchema:
        """The OpenAI-style tool definition, ready for litellm's ``tools=``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    async def run(self, arguments: BaseModel) -> list[dict[str, Any]]:
        """Run the tool on arguments its model validated; the results as JSON objects (compact unless
        ``verbose``). Raises what the tool raises: the REST server maps it to a status, and :meth:`call`
        wraps this in the agent's never-raising envelope."""
        items = await self._handler(arguments)
        if getattr(arguments, "verbose", True):
            return [i.model_dump(mode="json") for i in items]
        return [compact_item(i) for i in items]

    async def call(self, arguments: object) -> dict[str, Any]:
        """Run the tool on the arguments as the model sent them; any failure gives ``ok: False``, never raises.

        The :class:`ToolEnvelope` as a JSON object (its results are JSON the caller indexes into).
        """
        try:
            parsed = self.arguments.model_validate(parse_arguments(arguments))
        except ValueError as exc:  # pydantic's ValidationError and JSONDecodeError are ValueErrors
            return error_envelope(f"invalid arguments for {self.name}: {_brief(exc)}")
        except Exception:
            log.exception("tool %s: reading its arguments failed", self.name)
            return error_envelope(f"invalid arguments for {self.name}: they could not be read")
        try:
            results = await self.run(parsed)
        except TiermemError as exc:
            return error_envelope(f"{self.name} failed: {exc}")
        except Exception:  # a bug or an engine error we did not map: the model gets no internals
            log.exception("tool %s failed", self.name)
            return error_envelope(f"{self.name} failed: internal error (logged); try again later")
        return ToolEnvelope(ok=True, results=results).model_dump()


def error_envelope(message: str) -> dict[str, Any]:
    """The ``ok: False`` envelope, its message cut to :data:`MAX_ERROR_CHARS`."""
    if len(message) > MAX_ERROR_CHARS:
        message = message[: MAX_ERROR_CHARS - 3] + "..."
    return ToolEnvelope(ok=False, error=message).model_dump()


def _brief(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
    return str(exc)


def _get(obj: object, key: str) -> object:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


class Toolset(Sequence[MemoryTool]):
    """The tools bound to one context, with helpers for litellm-style tool calling."""

    def __init__(self, tools: Sequence[MemoryTool]) -> None:
        self._tools = list(tools)
        self._by_name = {t.name: t for t in self._tools}

    @overload
    def __getitem__(self, index: int) -> MemoryTool: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[MemoryTool]: ...
    def __getitem__(self, index: int | slice) -> MemoryTool | Sequence[MemoryTool]:
        return self._tools[index]

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[MemoryTool]:
        return iter(self._tools)

    def get(self, name: str) -> MemoryTool | None:
        return self._by_name.get(name)

    def schemas(self) -> list[ToolSchema]:
        """All tool definitions, for ``litellm.completion(tools=...)``."""
        return [t.schema() for t in self._tools]

    async def execute(self, message: object) -> list[dict[str, Any]]:
        """Run the tool calls of an assistant message; returns the ``role: tool`` messages to append.

        Plain dicts: they join the caller's message list, typed however the caller types it.

        Never raises: each call is answered, with an error envelope when it cannot be served; a
        message whose ``tool_calls`` is not a list has no call to answer.
        """
        try:
            calls = _get(message, "tool_calls")
        except Exception:
            log.exception("tool calls could not be read from the message")
            return []
        if not isinstance(calls, (list, tuple)):
            if calls:
                log.warning("tool_calls is a %s, not a list: no call answered", type(calls).__name__)
            return []
        return [await self._answer(call) for call in calls]

    async def _answer(self, call: object) -> dict[str, object]:
        name: object = None
        call_id: object = None
        try:
            call_id = _get(call, "id")
            function = _get(call, "function")
            name = _get(function, "name")
            tool = self._by_name.get(name) if isinstance(name, str) else None
            if tool is None:
                shown = name[:80] if isinstance(name, str) else name
                envelope = error_envelope(f"unknown tool {shown!r}; this agent has {sorted(self._by_name)}")
            else:
                envelope = await tool.call(_get(function, "arguments"))
        except Exception:
            log.exception("tool call %s could not be read", loggable(call_id))
            envelope = error_envelope("the tool call could not be read")
        return {"role": "tool", "tool_call_id": call_id, "name": name, "content": json.dumps(envelope)}
