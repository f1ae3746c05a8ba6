"""``tiermem ui``: a web inspector of a store, server-rendered pages over the operations the CLI and REST use.

Read-only unless built with ``allow_writes``: then pin/unpin, forget, erase (after typing the user id)
and export are offered, each calling the same ``MemorySystem`` method as ``tiermem pin`` or ``DELETE
/v1/memories/{id}``. Who may reach it is :mod:`._guard`'s business. Pages load nothing from the network:
the graph is laid out by a small force simulation in ``static/graph.js``.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Annotated, Any, get_args

from fastapi import FastAPI, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError

from .._errors import AccessDeniedError, InvalidArgumentError, MemoryNotFoundError, TiermemError
from .._paging import decode_cursor
from .._read import graph_data
from .._records import Fact, MemoryContext
from .._subjects import MAX_SUBJECT_LENGTH
from .._write import MemorySystem
from ._guard import InspectorGuard
from ._pager import Pager, offset_pager, page_pager
from ._statuses import status_of

__all__ = ["PAGE_LIMIT", "build_inspector"]

log = logging.getLogger("tiermem.ui")

FILES = Path(__file__).with_name("_ui")
PAGE_LIMIT = 200
"""Most items a list on a page shows; links lead to the pages before and after."""
HTML = HTMLResponse
FACT_STATUSES: tuple[str, ...] = get_args(Fact.model_fields["status"].annotation)
Cursor = Annotated[str, Query(max_length=4096)]
"""Where a list of memories stands: a cursor ``list()`` returned; empty for its first page."""


def _who(namespace: str, user_id: str) -> MemoryContext:
    try:
        return MemoryContext(namespace=namespace, user_id=user_id)
    except ValidationError as exc:
        raise InvalidArgumentError(f"not a user: {exc.errors()[0]['msg']}") from None


def build_inspector(mem: MemorySystem, *, allow_writes: bool = False, token: str | None = None,
                    loopback: bool = True) -> FastAPI:  # fmt: skip
    """The inspector over ``mem``; ``token``: required of every request; ``loopback``: served on 127.0.0.1."""
    app = FastAPI(title="tiermem ui", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(InspectorGuard, token=token, loopback=loopback)
    app.mount("/static", StaticFiles(directory=FILES / "static"), name="static")
    pages = Jinja2Templates(directory=FILES)
    pages.env.globals["writes"] = allow_writes

    def page(request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        return pages.TemplateResponse(request, name, values, status_code=status)

    @app.exception_handler(TiermemError)
    async def refused(request: Request, exc: TiermemError) -> HTMLResponse:
        status = status_of(exc)
        status = 400 if status == 422 else status  # the page's query or form did not hold: a Bad Request
        log.log(logging.ERROR if status >= 500 else logging.INFO, "%s %s: %s", request.method, request.url.path,
                type(exc).__name__)  # fmt: skip
        return page(request, "error.html", status, error=type(exc).__name__, message=str(exc))

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, exc: RequestValidationError) -> HTMLResponse:
        where = ", ".join(f"{'.'.join(map(str, e['loc'][1:]))}: {e['msg']}" for e in exc.errors())
        log.info("%s %s: a malformed request", request.method, request.url.path)
        return page(request, "error.html", 400, error="Bad request", message=where)

    def known(namespace: str, user_id: str) -> MemoryContext:
        who = _who(namespace, user_id)
        if who not in mem.tiers.users():
            raise MemoryNotFoundError(f"the store holds nothing of {user_id!r} in namespace {namespace!r}")
        return who

    def writable() -> None:
        if not allow_writes:
            raise AccessDeniedError("this inspector is read-only: start it with `tiermem ui --allow-writes`")

    async def listed(who: MemoryContext, **filters: Any) -> tuple[list[Any], bool]:
        found = await mem.list(who, limit=PAGE_LIMIT, **filters)
        return list(found.items), found.next_cursor is not None

    async def paged(request: Request, who: MemoryContext, param: str, cursor: str,
                    **filters: Any) -> tuple[list[Any], Pager]:  # fmt: skip
        """A page of the list whose place the query holds as ``param``."""
        if cursor:  # refused here naming the list, not as list()'s own argument
            try:
                decode_cursor(cursor)
            except InvalidArgumentError:
                raise InvalidArgumentError(
                    f"{param}={cursor[:40]!r} is no place in the list: follow its links"
                ) from None
        found = await mem.list(who, limit=PAGE_LIMIT, cursor=cursor or None, **filters)
        return list(found.items), page_pager(request, param, found, PAGE_LIMIT)

    @app.get("/", response_class=HTML)
    async def index(request: Request, users: Annotated[int, Query(ge=0, le=10**9)] = 0) -> HTMLResponse:
        everyone = mem.tiers.users()  # sorted by namespace, then user id
        shown = everyone[users : users + PAGE_LIMIT]
        spaces: dict[str, list[str]] = {}
        for who in shown:
            spaces.setdefault(who.namespace, []).append(who.user_id)
        pager = offset_pager(request, "users", users, len(shown), len(everyone), PAGE_LIMIT)
        return page(request, "index.html", spaces=spaces, store=mem.store.uri, pager=pager)

    @app.get("/u/{namespace}/{user_id}", response_class=HTML)
    async def user(request: Request, namespace: str, user_id: str, facts: Cursor = "", episodes: Cursor = "",
                   parked: Cursor = "", working: Cursor = "",
                   subject: Annotated[str, Query(max_length=MAX_SUBJECT_LENGTH)] = "",
                   status: Annotated[str, Query(max_length=20)] = "") -> HTMLResponse:  # fmt: skip
        who = known(namespace, user_id)
        if status and status not in FACT_STATUSES:
            raise InvalidArgumentError(f"status must be one of {', '.join(FACT_STATUSES)}, not {status!r}")
        about = {"subject": subject or None, "status": status or None}
        lists = {
            "facts": await paged(request, who, "facts", facts, tier="semantic", **about),
            "episodes": await paged(request, who, "episodes", episodes, tier="episodic"),
            "parked": await paged(request, who, "parked", parked, tier="episodic", status=["parked", "failed"]),
            "working": await paged(request, who, "working", working, tier="working"),
        }
        digests, _ = await listed(who, tier="digest")
        return page(
            request, "user.html", who=who, stats=await mem.stats(who), digest=digests[-1] if digests else None,
            items={name: found for name, (found, _) in lists.items()},
            pagers={name: pager for name, (_, pager) in lists.items()},
            filters={"subject": subject, "status": status}, statuses=FACT_STATUSES,
            places={"episodes": episodes, "parked": parked, "working": working},
        )  # fmt: skip

    @app.get("/u/{namespace}/{user_id}/memory/{memory_id}", response_class=HTML)
    async def memory(request: Request, namespace: str, user_id: str, memory_id: str,
                     turns: Annotated[int, Query(ge=0, le=10**9)] = 0) -> HTMLResponse:  # fmt: skip
        who = known(namespace, user_id)
        item = await mem.get(who, memory_id)
        versions = await mem.history(who, memory_id)
        most = max((len(v.turns) for v in versions), default=0)  # each version's turns, a page of them at a time
        shown = len(range(most)[turns : turns + PAGE_LIMIT])
        pager = offset_pager(request, "turns", turns, shown, most, PAGE_LIMIT)
        return page(request, "memory.html", who=who, item=item, versions=versions, pager=pager, start=turns,
                    size=PAGE_LIMIT)  # fmt: skip

    @app.get("/u/{namespace}/{user_id}/search", response_class=HTML)
    async def search(request: Request, namespace: str, user_id: str,
                     q: Annotated[str, Query(max_length=2000)] = "") -> HTMLResponse:  # fmt: skip
        who = known(namespace, user_id)
        results = await mem.recall(who, q, limit=20) if q.strip() else []
        return page(request, "search.html", who=who, query=q, results=results)

    @app.get("/u/{namespace}/{user_id}/graph", response_class=HTML)
    async def graph(request: Request, namespace: str, user_id: str) -> HTMLResponse:
        return page(request, "graph.html", who=known(namespace, user_id))

    @app.get("/u/{namespace}/{user_id}/graph.json")
    async def graph_json(namespace: str, user_id: str) -> dict[str, object]:
        who = known(namespace, user_id)
        edges, _ = await listed(who, tier="relation")
        return graph_data(await mem.subjects(who), edges)

    # -- governance: each only with allow_writes ----------------------------------------------------

    def back(who: MemoryContext, memory_id: str | None = None) -> RedirectResponse:
        path = f"/u/{who.namespace}/{who.user_id}" + (f"/memory/{memory_id}" if memory_id else "")
        return RedirectResponse(path, status_code=303)

    @app.post("/u/{namespace}/{user_id}/memory/{memory_id}/pin")
    async def pin(namespace: str, user_id: str, memory_id: str,
                  pinned: Annotated[bool, Form()]) -> RedirectResponse:  # fmt: skip
        writable()
        who = known(namespace, user_id)
        await (mem.pin if pinned else mem.unpin)(who, memory_id)
        return back(who, memory_id)

    @app.post("/u/{namespace}/{user_id}/memory/{memory_id}/forget", response_class=HTML)
    async def forget(request: Request, namespace: str, user_id: str, memory_id: str) -> HTMLResponse:
        writable()
        who = known(namespace, user_id)
        report = await mem.forget(who, memory_id)
        return page(request, "done.html", who=who, what=f"Forgot {memory_id}", report=report.model_dump())

    @app.get("/u/{namespace}/{user_id}/erase", response_class=HTML)
    async def erase_form(request: Request, namespace: str, user_id: str) -> HTMLResponse:
        writable()
        return page(request, "erase.html", who=known(namespace, user_id))

    @app.post("/u/{namespace}/{user_id}/erase", response_class=HTML)
    async def erase(request: Request, namespace: str, user_id: str,
                    confirm: Annotated[str, Form()] = "") -> HTMLResponse:  # fmt: skip
        writable()
        who = known(namespace, user_id)
        if confirm != who.user_id:
            raise InvalidArgumentError(f"erase deletes all of {who.user_id!r} for good: type the user id to confirm")
        report = await mem.erase_user(who)
        return page(request, "done.html", who=None, what=f"Erased {who.user_id}", report=report.model_dump())

    @app.get("/u/{namespace}/{user_id}/export")
    async def export(namespace: str, user_id: str) -> Response:
        writable()  # an export carries everything of the user out of the store
        who = known(namespace, user_id)
        lines = io.StringIO()
        await mem.export(who, lines)
        name = f"tiermem-{who.namespace}-{who.user_id}.jsonl"
        disposition = {"Content-Disposition": f'attachment; filename="{name}"'}
        return Response(lines.getvalue(), media_type="application/x-ndjson", headers=disposition)

    return app
