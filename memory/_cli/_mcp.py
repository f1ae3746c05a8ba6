"""``tiermem mcp``: one user's memory served to an MCP host (Claude Desktop, Cursor, an agent SDK).

The only module that imports the MCP SDK (``pip install 'tiermem[mcp]'``). It is built on the
SDK's low-level ``Server`` so that the tools are tiermem's own :class:`MemoryTool` objects: the
same JSON schemas, the same argument validation (``extra="forbid"``, so an argument the schema
does not list is refused, never ignored) and the same error envelopes as the in-process tools.

Authority: the user, the namespace and the options come from the server's configuration only
(command-line arguments, ``TIERMEM_*`` environment variables, or on HTTP a request header the
operator's proxy sets, ``--user-header``: exactly one value, or the request is refused). No tool or
resource takes a user or a namespace, so a client can neither read nor write another user's memory.

Tools: the tool table's (:data:`~tiermem.memory._tools.TOOLS`) under their MCP names: ``recall``;
``connect`` when relations are on; ``remember`` and ``forget`` (by the id ``recall`` returns) with
``--allow-writes``, the same write tools as ``MemorySystem.tools(ctx, write=True)``
(memory/_write/_write_tools.py: canonical subjects only, never a user id, agent-written metadata,
only the user's own ids), each annotated read-only or destructive as its table entry says.
Resources: ``tiermem://digest`` (the user's narrative digest) and ``tiermem://facts`` (their active
facts). The store is opened with the embedder it was written with; the server calls no model (a
digest that ``forget`` must rewrite is rewritten by the offline rules model, and the next digest job
with the real model rewrites it again).

This module is below the composition root, so the write side comes in as a callable: the CLI
opens ``system(model="rules")`` and hands its ``forget`` to :func:`build_server`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from .._blocking import run_blocking
from .._errors import ConfigurationError
from .._read import MemoryCapability, create_memory_capability
from .._records import MemoryContext
from .._text import loggable
from .._tools import MemoryTool, ToolSpec, error_envelope, tool_spec
from .._write import Forget, ForgetArguments, RememberArguments, agent_tools

__all__ = [
    "ForgetArguments",
    "McpConfig",
    "RememberArguments",
    "build_server",
    "capability_options",
    "config_from",
    "serve",
]

log = logging.getLogger("tiermem.mcp")

Transport = Literal["stdio", "http"]
DIGEST_URI = "tiermem://digest"
FACTS_URI = "tiermem://facts"


@dataclass(frozen=True, kw_only=True)
class McpConfig:
    """Everything the server serves, fixed by the operator when it starts."""

    store: str | None
    """LanceDB folder or URI (None: ``$TIERMEM_STORE`` or ``~/.tiermem/store``)."""
    user_id: str | None
    """The one user served; None only with ``user_header`` (the user comes with each HTTP request)."""
    namespace: str = "default"
    """Application or tenant."""
    embedder: str | None = None
    """The embedder the store was written with (None: the shipped default)."""
    embedder_dimensions: int | None = None
    """Dimensions, for a litellm embedding model."""
    relations: bool = False
    """Serve the relations graph (the ``connect`` tool)."""
    allow_writes: bool = False
    """Offer the write tools ``remember`` and ``forget`` (:func:`build_server` then needs the write side's forget)."""
    user_header: str | None = None
    """On HTTP: the request header that names the user (set by the operator's proxy, never by the client)."""
    read_scopes: tuple[str, ...] = ()
    """Shared scopes recalled with the user's own (each needs the operator's grant in the store)."""
    write_scope: str | None = None
    """The shared scope the ``remember`` tool writes to with ``scope="shared"`` (needs a write grant)."""
    agent_id: str | None = None
    """The agent served: ``remember`` with ``scope="agent"`` writes to ``agent:<id>`` (needs a write grant)."""


def _scoped(config: McpConfig, user_id: str) -> MemoryContext:
    """``user_id``'s context with the configured shared scopes (checked against the grants when used)."""
    return MemoryContext(
        namespace=config.namespace, user_id=user_id, read_scopes=config.read_scopes,
        write_scope=config.write_scope, agent_id=config.agent_id,
    )  # fmt: skip


def capability_options(config: McpConfig) -> dict[str, Any]:
    """The options the store is opened with, for ``create_memory_capability`` or ``system``."""
    return {
        "store": config.store,
        "embedder": config.embedder,
        "embedder_dimensions": config.embedder_dimensions,
        "semantic": {"relations": True} if config.relations else True,
    }


def _result(envelope: dict[str, object]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(envelope, ensure_ascii=False))],
        structured_content=envelope,
        is_error=not envelope["ok"],
    )


class _Memory:
    """The request handlers: every call resolves its user from the configuration, then runs tiermem's tool."""

    def __init__(self, *, config: McpConfig, capability: MemoryCapability, forget: Forget | None) -> None:
        self.config = config
        self.capability = capability
        self.forget = forget

    def context(self, request: ServerRequestContext[object, object] | None) -> MemoryContext:
        """Whose memory this request reads: the configured user, or the operator's header on HTTP."""
        header = self.config.user_header
        if header is None:
            assert self.config.user_id is not None
            return _scoped(self.config, self.config.user_id)
        http = getattr(request, "request", None) if request is not None else None
        headers = getattr(http, "headers", None)
        # Every value the request carries: a proxy that appends its header behind the client's makes two,
        # or one comma-joined (RFC 9110 folds repeated fields so); taking either one would trust the client.
        values: list[str] = list(headers.getlist(header)) if headers is not None else []
        if not values:
            raise MCPError(types.INVALID_REQUEST, f"this server needs the {header} header to know the user")
        if len(values) > 1 or "," in values[0]:
            raise MCPError(types.INVALID_REQUEST, f"the {header} header must name exactly one user, once")
        value = values[0]
        if not value.strip():
            raise MCPError(types.INVALID_REQUEST, f"the {header} header is empty")
        try:
            return _scoped(self.config, value)
        except ValidationError:
            raise MCPError(types.INVALID_REQUEST, f"the {header} header is not a valid user id") from None

    def tools(self, ctx: MemoryContext) -> dict[str, tuple[ToolSpec[BaseModel], MemoryTool]]:
        """The tools bound to ``ctx`` by their MCP name (``recall``, ``connect``, ``remember``, ``forget``),
        each with its table entry."""
        # forget is given exactly when the configuration allows writes
        specs = [(tool_spec(tool.name), tool) for tool in agent_tools(self.capability, ctx, forget=self.forget)]
        return {spec.mcp_name: (spec, tool.renamed(spec.mcp_name)) for spec, tool in specs}

    async def list_tools(
        self, request: ServerRequestContext[object, object], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        listing = MemoryContext(namespace=self.config.namespace, user_id=self.config.user_id or "listing")
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=name,
                    description=tool.description,
                    input_schema=tool.parameters,
                    annotations=types.ToolAnnotations(
                        read_only_hint=spec.access == "read", destructive_hint=spec.destructive, open_world_hint=False
                    ),
                )
                for name, (spec, tool) in self.tools(listing).items()
            ]
        )

    async def call_tool(
        self, request: ServerRequestContext[object, object], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        ctx = self.context(request)  # no user: a protocol error, as for a resource
        try:
            served = self.tools(ctx).get(params.name)
            if served is None:
                envelope = error_envelope(f"unknown tool {params.name[:80]!r}")
            else:
                envelope = await served[1].call(params.arguments)  # never raises; bounds size and depth
        except Exception:  # building the tools failed: still an envelope, never a crashed request
            log.exception("tool %s failed", loggable(params.name))
            envelope = error_envelope(f"{params.name[:80]} failed: internal error (logged); try again later")
        if not envelope["ok"]:
            log.info("tool %s refused: %s", loggable(params.name), loggable(envelope["error"]))
        return _result(envelope)

    async def list_resources(
        self, request: ServerRequestContext[object, object], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name="digest",
                    uri=DIGEST_URI,
                    description="A narrative summary of what is known about the user.",
                    mime_type="text/plain",
                ),
                types.Resource(
                    name="facts",
                    uri=FACTS_URI,
                    description="The user's active facts (id, subject, date, text), oldest first.",
                    mime_type="application/json",
                ),
            ]
        )

    async def read_resource(
        self, request: ServerRequestContext[object, object], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        ctx = await run_blocking(self.capability.access.check, self.context(request))  # AccessDeniedError
        uri = str(params.uri)
        if uri == DIGEST_URI:
            digest = await self.capability.latest_digest(ctx)
            body, mime = (digest.text if digest else ""), "text/plain"
        elif uri == FACTS_URI:
            facts = await self.capability.facts(ctx)
            rows = [
                {
                    "id": f.id,
                    "subject": f.subject,
                    "date": (f.valid_from or f.created_at).date().isoformat(),
                    "text": f.text,
                }
                for f in facts
            ]
            body, mime = json.dumps(rows, ensure_ascii=False), "application/json"
        else:
            known = f"{DIGEST_URI} and {FACTS_URI}"
            raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri!r}; this server has {known}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=body)])


def build_server(
    config: McpConfig, *, capability: MemoryCapability | None = None, forget: Forget | None = None
) -> Server[object]:
    """The MCP server for ``config``: the capability is opened from it unless given; ``forget`` is the write side's."""
    if (config.user_id is None) == (config.user_header is None):
        raise ConfigurationError(
            "the MCP server serves one user: give --user-id (or $TIERMEM_USER_ID), or on HTTP --user-header, not both"
        )
    if config.user_id is not None:
        _scoped(config, config.user_id)  # validates the ids and the scopes
    if capability is None:  # a server without the write tools never writes: not even a missing table
        capability = create_memory_capability(**capability_options(config), create=config.allow_writes)
    if config.allow_writes and forget is None:
        raise ConfigurationError(
            "the write tools need the write side: pass forget (MemorySystem.forget), as `tiermem mcp` does"
        )
    memory = _Memory(config=config, capability=capability, forget=forget if config.allow_writes else None)
    who = f"user {config.user_id!r}" if config.user_header is None else f"the user named by {config.user_header}"
    return Server(
        "tiermem",
        instructions=(
            f"Long-term memory of {who}. Call recall before answering questions about the user, their "
            "people, plans and past conversations."
            + (
                " Call remember (or forget) when the user asks you to remember (or forget) something."
                if config.allow_writes
                else ""
            )
        ),
        on_list_tools=memory.list_tools,
        on_call_tool=memory.call_tool,
        on_list_resources=memory.list_resources,
        on_read_resource=memory.read_resource,
    )


async def serve(
    config: McpConfig,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    capability: MemoryCapability | None = None,
    forget: Forget | None = None,
) -> None:
    """Serve until the client disconnects (stdio) or the process is stopped (HTTP, at ``/mcp``)."""
    if config.user_header is not None and transport != "http":
        raise ConfigurationError("--user-header needs --transport http")
    server = build_server(config, capability=capability, forget=forget)
    if transport == "stdio":
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    import uvicorn

    app = server.streamable_http_app(host=host, streamable_http_path="/mcp")
    log.info("tiermem mcp serving on http://%s:%d/mcp", host, port)
    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()


def config_from(values: Mapping[str, object], environ: Mapping[str, str]) -> McpConfig:
    """The configuration from parsed CLI values, each falling back to its ``TIERMEM_*`` variable."""

    def pick(key: str, env: str) -> Any:
        value = values.get(key)
        return value if value not in (None, "") else (environ.get(env) or None)

    dims = pick("embedder_dimensions", "TIERMEM_EMBEDDER_DIMENSIONS")
    return McpConfig(
        store=pick("store", "TIERMEM_STORE"),
        user_id=pick("user_id", "TIERMEM_USER_ID"),
        namespace=pick("namespace", "TIERMEM_NAMESPACE") or "default",
        embedder=pick("embedder", "TIERMEM_EMBEDDER"),
        embedder_dimensions=int(dims) if dims is not None else None,
        relations=bool(values.get("relations")),
        allow_writes=bool(values.get("allow_writes")),
        user_header=pick("user_header", "TIERMEM_USER_HEADER"),
        read_scopes=tuple(str(v) for v in cast(Sequence[object], values.get("read_scopes") or ())),
        write_scope=pick("write_scope", "TIERMEM_WRITE_SCOPE"),
        agent_id=pick("agent_id", "TIERMEM_AGENT_ID"),
    )
