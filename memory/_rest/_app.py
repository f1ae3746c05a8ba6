"""The REST server's routes: each calls the operation the CLI and the MCP server call, for the key's user.

Authority: the namespace and the user come from the request's API key alone (:class:`~._keys.ApiKeys`,
the operator's keys file). ``Authorization`` must come exactly once, as ``Bearer KEY``: missing or
unknown is 401; given twice, or with a comma (RFC 9110 folds repeated fields so), is 400, since taking
either value would trust whoever added it. No body or query names a user or a namespace, and every
body and query forbids fields it does not list, so a request reaches its key's user's memory only.

Operations: recall runs the recall tool's handler (its argument model is the request body: the same
validation, the same compact or verbose results as the agent and MCP get); the rest call
``MemorySystem``'s methods, as the ``tiermem`` commands do. A :class:`TiermemError` is answered with its
status (:mod:`._statuses`) and ``{error, message}``; a request that does not validate is refused before
anything is written. Bodies over ``max_body_bytes``, or without a length, are refused unread.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from importlib import metadata
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request, Response, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._context import MAX_ID_LENGTH
from .._errors import InvalidArgumentError, TiermemError
from .._govern import EraseReport, ForgetReport, ImportReport, MemoryPage, MemoryStats, MemoryVersion
from .._items import MemoryItem
from .._read import read_tools
from .._records import Episode, Fact, MemoryContext
from .._text import loggable
from .._tools import RECALL, RecallArguments
from .._write import MemorySystem
from ._bodies import (
    CaptureReply,
    CaptureRequest,
    ContextReply,
    ContextRequest,
    EraseRequest,
    ForgetQuery,
    Identity,
    ListQuery,
    RecallReply,
    UpdateRequest,
)
from ._keys import ApiKeys
from ._statuses import ErrorBody, error_body, status_of

__all__ = ["MAX_BODY_BYTES", "build_app"]

log = logging.getLogger("tiermem.rest")

MAX_BODY_BYTES = 32 * 1024 * 1024
"""Largest request body read, by default: an import is a user's whole export."""
NDJSON = "application/x-ndjson"
REFUSALS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what}
    for status, what in {
        400: "Ambiguous authorization: the header given twice",
        401: "No API key, or one not on file",
        403: "The key's context names a shared scope its user holds no grant for",
        404: "No such memory of this user",
        409: "Conflicting writes, or the user was erased meanwhile",
        411: "A body without a Content-Length: refused unread",
        413: "A body larger than the server reads: refused unread",
        422: "The request does not validate; nothing was written",
        500: "The server or its store failed",
        502: "The language model refused or answered badly",
        503: "The store or the model is unavailable for now",
    }.items()
}
MemoryId = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH, description="A memory's id, as listed.")]


def refused(status: int, error: str, message: str) -> HTTPException:
    """A request refused before any operation runs (authentication, query), answered ``{error, message}``."""
    challenge = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return HTTPException(status, detail=error_body(error, message), headers=challenge)


BEARER = HTTPBearer(auto_error=False, description="An API key from the operator's keys file.")


async def _caller(
    request: Request, schema: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]
) -> MemoryContext:
    """The request's user, from its one ``Authorization: Bearer KEY`` header and the app's keys.

    ``schema`` only declares the bearer scheme in the OpenAPI schema: it reads the first value alone."""
    values = request.headers.getlist("authorization")
    if not values:
        raise refused(401, "Unauthorized", "this server needs an API key: Authorization: Bearer KEY")
    if len(values) > 1 or "," in values[0]:
        raise refused(400, "AmbiguousAuthorization", "the Authorization header must carry one key, once")
    scheme, _, key = values[0].strip().partition(" ")
    keys: ApiKeys = request.app.state.keys
    ctx = keys.context(key.strip()) if scheme.lower() == "bearer" and key.strip() else None
    if ctx is None:  # the key is never quoted, logged or told apart from a malformed one
        raise refused(401, "Unauthorized", "unknown API key")
    return ctx


User = Annotated[MemoryContext, Depends(_caller)]
"""A route's user: whom the request's key acts as."""


def _no_query(request: Request, ctx: User) -> None:  # after the key: a stranger learns nothing of routes
    """A route without query parameters refuses any: an ignored parameter would look obeyed."""
    if request.query_params:
        names = ", ".join(sorted(request.query_params))[:200]
        raise refused(422, "InvalidArgumentError", f"this route takes no query parameters: {names}")


def _in_session(ctx: MemoryContext, session_id: str | None) -> MemoryContext:
    try:
        return MemoryContext.model_validate({**ctx.model_dump(), "session_id": session_id})
    except ValidationError as exc:
        raise InvalidArgumentError(f"session_id: {exc.errors()[0]['msg']}") from None


class BodyLimit:
    """Refuse a body larger than ``max_bytes`` (413) or of unknown length (411) before it is read.

    The server (h11) holds a body to its declared length, so the header bounds what is read."""

    def __init__(self, app: Callable[..., Awaitable[None]], max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            length = headers.get(b"content-length")
            refusal: tuple[int, str, str] | None = None
            if length is None and b"transfer-encoding" in headers:
                refusal = (411, "LengthRequired", "send the body with a Content-Length")
            elif length is not None and (not length.isdigit() or int(length) > self.max_bytes):
                refusal = (413, "BodyTooLarge", f"the body is larger than {self.max_bytes} bytes")
            if refusal is not None:
                response = JSONResponse(error_body(*refusal[1:]), status_code=refusal[0])
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _validation_message(exc: RequestValidationError) -> str:
    """Where and what, never the input (it may be long, or a secret)."""
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "the request does not validate"


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(TiermemError)
    async def tiermem_error(request: Request, exc: TiermemError) -> JSONResponse:
        status = status_of(exc)
        if status >= 500:
            log.error("%s %s failed: %s", request.method, request.url.path, loggable(exc), exc_info=exc)
        else:
            log.info("%s %s refused: %s", request.method, request.url.path, loggable(exc))
        return JSONResponse(error_body(type(exc).__name__, str(exc)), status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(error_body("InvalidArgumentError", _validation_message(exc)), status_code=422)

    @app.exception_handler(StarletteHTTPException)  # refused()'s, and no such route or method
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        body = exc.detail if isinstance(exc.detail, dict) else error_body("HTTPError", str(exc.detail))
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:  # a bug: the client gets no internals
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return JSONResponse(error_body("InternalError", "internal error (logged)"), status_code=500)


def _version() -> str:
    try:
        return metadata.version("tiermem")
    except metadata.PackageNotFoundError:
        return "0"


def build_app(mem: MemorySystem, keys: ApiKeys, *, max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """The REST server over ``mem``, each request acting as the user its API key maps to in ``keys``."""
    app = FastAPI(
        title="tiermem",
        version=_version(),
        description="Tiered memory for LLM agents: capture, recall and govern one user's memory per API key.",
        docs_url=None,  # the docs pages load scripts from a CDN: the schema is at /openapi.json
        redoc_url=None,
        responses=REFUSALS,
    )
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    _handlers(app)
    app.state.keys = keys
    plain = [Depends(_no_query)]

    @app.get("/v1/me", operation_id="whoami", tags=["memory"], dependencies=plain)
    async def whoami(ctx: User) -> Identity:
        """Whose memory this key reaches."""
        return Identity(namespace=ctx.namespace, user_id=ctx.user_id)

    @app.post("/v1/capture", operation_id="capture", tags=["memory"], dependencies=plain)
    async def capture(ctx: User, body: CaptureRequest) -> CaptureReply:
        """Journal one turn exactly once, then observe it (one model call); a failed observation is deferred."""
        result = await mem.capture(
            _in_session(ctx, body.session_id), body.messages, metadata=body.metadata, at=body.at,
            idempotency_key=body.idempotency_key,
        )  # fmt: skip
        return CaptureReply(
            turn=result.turn, entries=result.entries, deferred=result.deferred, duplicate=result.duplicate,
            error=result.error,
        )  # fmt: skip

    @app.post("/v1/recall", operation_id="recall", tags=["memory"], dependencies=plain)
    async def recall(ctx: User, body: RecallArguments) -> RecallReply:
        """Memories ranked for the query, as the recall tool returns them to an agent."""
        return RecallReply(results=await read_tools(mem.capability, ctx)[RECALL.name].run(body))

    @app.post("/v1/context", operation_id="format_context", tags=["memory"], dependencies=plain)
    async def format_context(ctx: User, body: ContextRequest) -> ContextReply:
        """The per-turn <memory> block for the input, a section per tier, within the token budget."""
        block = await mem.format_context(_in_session(ctx, body.session_id), body.input, max_tokens=body.max_tokens)
        return ContextReply(context=block)

    @app.get("/v1/memories", operation_id="list_memories", tags=["govern"])
    async def list_memories(ctx: User, query: Annotated[ListQuery, Query()]) -> MemoryPage:
        """The user's memories oldest first, a page at a time: pass next_cursor (prev_cursor) back as cursor."""
        return await mem.list(ctx, **query.model_dump())

    @app.get("/v1/memories/{memory_id}", operation_id="get_memory", tags=["govern"], dependencies=plain)
    async def get_memory(ctx: User, memory_id: MemoryId) -> MemoryItem:
        """One memory (or captured turn) by id."""
        return await mem.get(ctx, memory_id)

    @app.get("/v1/memories/{memory_id}/history", operation_id="history", tags=["govern"], dependencies=plain)
    async def history(ctx: User, memory_id: MemoryId) -> list[MemoryVersion]:
        """Every version of a memory, oldest first, with its validity and the turns behind it."""
        return await mem.history(ctx, memory_id)

    @app.patch("/v1/memories/{memory_id}", operation_id="update_memory", tags=["govern"], dependencies=plain)
    async def update_memory(ctx: User, memory_id: MemoryId, body: UpdateRequest) -> Fact:
        """Correct a fact: the new version supersedes it, the old one stays as history."""
        return await mem.update(ctx, memory_id, text=body.text, subject=body.subject)

    @app.put("/v1/memories/{memory_id}/pin", operation_id="pin", tags=["govern"], dependencies=plain)
    async def pin(ctx: User, memory_id: MemoryId) -> Fact | Episode:
        """Pin a fact or episode: it never decays, is never archived or compacted away."""
        return await mem.pin(ctx, memory_id)

    @app.delete("/v1/memories/{memory_id}/pin", operation_id="unpin", tags=["govern"], dependencies=plain)
    async def unpin(ctx: User, memory_id: MemoryId) -> Fact | Episode:
        """Unpin a fact or episode: it decays again from its last reinforcement."""
        return await mem.unpin(ctx, memory_id)

    @app.delete("/v1/memories/{memory_id}", operation_id="forget", tags=["govern"])
    async def forget(ctx: User, memory_id: MemoryId, query: Annotated[ForgetQuery, Query()]) -> ForgetReport:
        """Delete one memory and what was derived only from it; texts derived from it are rewritten."""
        return await mem.forget(ctx, memory_id, include_turns=query.include_turns)

    @app.post("/v1/erase", operation_id="erase", tags=["govern"], dependencies=plain)
    async def erase(ctx: User, body: EraseRequest) -> EraseReport:
        """Erase every record of the user from every table, old versions purged from disk."""
        if body.confirm is not True:
            raise InvalidArgumentError(f"erase deletes all of {ctx.user_id!r} for good: send confirm: true")
        return await mem.erase_user(ctx)

    export_body: dict[int | str, dict[str, Any]] = {
        200: {"content": {NDJSON: {"schema": {"type": "string"}}}, "description": "The export."}
    }

    @app.get(
        "/v1/export", operation_id="export", tags=["govern"], dependencies=plain, response_class=Response,
        responses=export_body,
    )  # fmt: skip
    async def export(ctx: User) -> Response:
        """The user's memory as JSON Lines: a header, then every record (what import takes)."""
        lines = io.StringIO()
        await mem.export(ctx, lines)
        return Response(lines.getvalue(), media_type=NDJSON)

    import_body = {"requestBody": {"required": True, "content": {NDJSON: {"schema": {"type": "string"}}}}}

    @app.post("/v1/import", operation_id="import_memories", tags=["govern"], dependencies=plain,
              openapi_extra=import_body)  # fmt: skip
    async def import_memories(ctx: User, request: Request) -> ImportReport:
        """Read an export into the user's memory (checked whole first); importing twice changes nothing."""
        try:
            text = (await request.body()).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(f"the export is not UTF-8: {exc.reason} at byte {exc.start}") from None
        return await mem.import_(ctx, text.splitlines(keepends=True))

    @app.get("/v1/stats", operation_id="stats", tags=["govern"], dependencies=plain)
    async def stats(ctx: User) -> MemoryStats:
        """Counts per tier and status, pending work, and the store's bytes on disk."""
        return await mem.stats(ctx)

    return app
