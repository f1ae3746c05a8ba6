"""Shared scopes are reached only with the operator's grant (issue 37): every read and write path, through
the API, the agent's tools, the MCP handlers and the REST routes, for a caller reading only its own memory,
one granted, one never granted, one whose grant was revoked and one of another namespace. A shared scope's
text reaches exactly the callers granted it; a denied caller gets AccessDeniedError (403 over REST, an error
envelope over MCP) and nothing is written."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from mcp import types

from tests.prebuilt import prebuilt
from tiermem import (
    AccessDeniedError,
    InvalidArgumentError,
    MemoryContext,
    MemoryNotFoundError,
    MemorySystem,
    MemoryTool,
    Toolset,
    system,
)
from tiermem.memory._cli._main import cli
from tiermem.memory._cli._mcp import McpConfig, _Memory, build_server, config_from
from tiermem.memory._rest import build_app
from tiermem.memory._rest._keys import ApiKeys, KeyGrant
from tiermem.memory._store import USER_TABLES
from tiermem.memory.testing import FrozenClock, HashingEmbedder

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TEAM, AGENT = "team:eng", "agent:helper"
SECRET = "Kestrel"  # in the team's memory of the default namespace only
AGENT_SECRET = "Osprey"  # in the agent's memory of the default namespace only
OTHER = "other"


@dataclass(frozen=True)
class Caller:
    name: str
    ctx: MemoryContext
    sees: bool  # may read the default namespace's team and agent memory
    denied: bool  # asks for a scope it holds no grant for


def _ctx(user: str, namespace: str = "default", **scopes: Any) -> MemoryContext:
    return MemoryContext(namespace=namespace, user_id=user, session_id="s-1", **scopes)


SHARED: dict[str, Any] = {"read_scopes": (TEAM,), "write_scope": TEAM, "agent_id": "helper"}
CALLERS = [
    Caller("own", _ctx("olga"), sees=False, denied=False),
    Caller("granted", _ctx("gina", **SHARED), sees=True, denied=False),
    Caller("not-granted", _ctx("nick", **SHARED), sees=False, denied=True),
    Caller("revoked", _ctx("rita", **SHARED), sees=False, denied=True),
    Caller("other-namespace", _ctx("gina", OTHER, **SHARED), sees=False, denied=False),
]


def make(path: Path) -> MemorySystem:
    return system(model="rules", store=str(path), embedder=HashingEmbedder(256), clock=FrozenClock(START))


def write_store(folder: Path) -> None:
    async def write() -> None:
        mem = make(folder)
        for ns in ("default", OTHER):
            await mem.grant(ns, "gina", TEAM, "write")
            await mem.grant(ns, "gina", AGENT, "write")
        for scope in (TEAM, AGENT):
            await mem.grant("default", "rita", scope, "write")
            await mem.revoke("default", "rita", scope)
        for caller in CALLERS:  # each user's own fact, to share
            await mem.remember(MemoryContext(namespace=caller.ctx.namespace, user_id=caller.ctx.user_id),
                               f"{caller.ctx.user_id} drinks green tea at work.")  # fmt: skip
        gina = CALLERS[1].ctx
        tools = mem.tools(gina, write=True)  # written straight to the scopes: none of it is gina's own memory
        for text, scope in ((f"Releases are code-named {SECRET} in the deploy channel.", "shared"),
                            (f"Run the {AGENT_SECRET} linter before a deploy.", "agent")):  # fmt: skip
            reply = await _named(tools, "memory_remember").call({"text": text, "scope": scope})
            assert reply["ok"], reply
        other = await mem.remember(_ctx("gina", OTHER), "Releases are code-named Heron in the other namespace.")
        await mem.share(_ctx("gina", OTHER, **SHARED), other.id, TEAM)

    asyncio.run(write())


@pytest.fixture
def mem(tmp_path_factory: pytest.TempPathFactory) -> MemorySystem:
    return make(prebuilt(tmp_path_factory, "shared-scopes", write_store))


def rows(mem: MemorySystem, namespace: str = "default") -> dict[str, list[dict[str, Any]]]:
    """Every row of the namespace's shared scopes, every column, per table, in id order."""
    found: dict[str, list[dict[str, Any]]] = {}
    for table in USER_TABLES:
        every = mem.store.table(table).to_arrow().to_pylist()
        mine = (r for r in every if r["namespace"] == namespace and r["user_id"] in (TEAM, AGENT))
        found[table] = sorted(mine, key=lambda r: str(r["id"]))
    return found


def team_fact(mem: MemorySystem) -> str:
    return str(next(r["id"] for r in rows(mem)["facts"] if SECRET in r["text"]))


def _named(tools: Toolset, name: str) -> MemoryTool:
    tool = tools.get(name)
    assert tool is not None
    return tool


async def _tool_call(tools: Toolset, name: str, arguments: dict[str, Any]) -> str:
    reply = await _named(tools, name).call(arguments)
    if not reply["ok"] and "grant" in str(reply["error"]):
        raise AccessDeniedError(str(reply["error"]))
    return _json(reply)


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


# -- read paths: each returns what the caller got, as text -------------------------------------------------


async def _export(mem: MemorySystem, ctx: MemoryContext) -> str:
    out = io.StringIO()
    await mem.export(ctx, out)
    return out.getvalue()


async def _mcp(mem: MemorySystem, ctx: MemoryContext, name: str, arguments: dict[str, Any]) -> str:
    config = McpConfig(
        store=None, user_id=ctx.user_id, namespace=ctx.namespace, allow_writes=True,
        read_scopes=tuple(ctx.read_scopes), write_scope=ctx.write_scope, agent_id=ctx.agent_id,
    )  # fmt: skip
    server = _Memory(config=config, capability=mem.capability, forget=mem.forget)
    params = types.CallToolRequestParams(name=name, arguments=arguments)
    result = await server.call_tool(None, params)  # type: ignore[arg-type]
    envelope = result.structured_content or {}
    if not envelope.get("ok") and "grant" in str(envelope.get("error")):
        raise AccessDeniedError(str(envelope["error"]))
    return _json(envelope)


async def _mcp_facts(mem: MemorySystem, ctx: MemoryContext) -> str:
    config = McpConfig(store=None, user_id=ctx.user_id, namespace=ctx.namespace, read_scopes=tuple(ctx.read_scopes))
    server = _Memory(config=config, capability=mem.capability, forget=None)
    params = types.ReadResourceRequestParams(uri="tiermem://facts")  # type: ignore[arg-type]
    return _json((await server.read_resource(None, params)).model_dump())  # type: ignore[arg-type]


async def _rest(mem: MemorySystem, ctx: MemoryContext, method: str, url: str, **kwargs: Any) -> str:
    key = "k" * 40
    grant = KeyGrant(key=key, namespace=ctx.namespace, user_id=ctx.user_id, read_scopes=tuple(ctx.read_scopes),
                     write_scope=ctx.write_scope, agent_id=ctx.agent_id)  # fmt: skip
    app = build_app(mem, ApiKeys([grant]))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tiermem") as client:
        response = await client.request(method, url, headers={"Authorization": f"Bearer {key}"}, **kwargs)
    if response.status_code == 403:
        raise AccessDeniedError(response.text)
    if response.status_code == 404:
        raise MemoryNotFoundError(response.text)
    assert response.status_code == 200, response.text
    return response.text


Read = Callable[[MemorySystem, MemoryContext, str], Awaitable[str]]
READS: dict[str, Read] = {
    "recall": lambda m, c, i: _text(m.recall(c, "release code name deploy")),
    "recall-sync": lambda m, c, i: asyncio.to_thread(
        lambda: _json([x.model_dump() for x in m.recall_sync(c, "deploy")])
    ),
    "context-block": lambda m, c, i: m.format_context(c, "what are releases code-named? deploy linter"),
    "list": lambda m, c, i: _text(m.list(c, scope=TEAM if c.read_scopes else None)),
    "list-agent": lambda m, c, i: _text(m.list(c, scope=AGENT if c.agent_id else None)),
    "get": lambda m, c, i: _text(m.get(c, i)),
    "history": lambda m, c, i: _text(m.history(c, i)),
    "export": lambda m, c, i: _export(m, c),
    "stats": lambda m, c, i: _text(m.stats(c)),
    "tool-recall": lambda m, c, i: _tool_call(m.tools(c), "memory_recall", {"query": "release code name"}),
    "mcp-recall": lambda m, c, i: _mcp(m, c, "recall", {"query": "release code name deploy"}),
    "mcp-facts": lambda m, c, i: _mcp_facts(m, c),
    "facts": lambda m, c, i: _text(m.facts(c)),
    "working-memory": lambda m, c, i: _text(m.working_memory(c)),
    "rest-recall": lambda m, c, i: _rest(m, c, "POST", "/v1/recall", json={"query": "release code name"}),
    "rest-context": lambda m, c, i: _rest(m, c, "POST", "/v1/context", json={"input": "release code name"}),
    "rest-list": lambda m, c, i: _rest(m, c, "GET", "/v1/memories", params={"scope": TEAM} if c.read_scopes else {}),
    "rest-get": lambda m, c, i: _rest(m, c, "GET", f"/v1/memories/{i}"),
    "rest-history": lambda m, c, i: _rest(m, c, "GET", f"/v1/memories/{i}/history"),
    "rest-export": lambda m, c, i: _rest(m, c, "GET", "/v1/export"),
}
# the user's own memory only, whatever they are granted
NOT_SHARED_READS = {"export", "stats", "rest-export", "mcp-facts", "facts", "working-memory"}


async def _text(result: Awaitable[Any]) -> str:
    value = await result
    dumped = (
        value.model_dump()
        if hasattr(value, "model_dump")
        else [getattr(v, "model_dump", lambda v=v: v)() for v in value]
    )
    return _json(dumped)


@pytest.mark.parametrize("caller", CALLERS, ids=[c.name for c in CALLERS])
@pytest.mark.parametrize("path", sorted(READS), ids=sorted(READS))
async def test_a_read_reaches_a_shared_scope_only_with_a_grant(mem: MemorySystem, path: str, caller: Caller) -> None:
    before = rows(mem)
    try:
        seen, denied = await READS[path](mem, caller.ctx, team_fact(mem)), False
    except AccessDeniedError:
        seen, denied = "", True
    except MemoryNotFoundError:  # get and history of the team's fact, for a caller not reading the team
        seen, denied = "", False
    assert denied == caller.denied
    leaked = SECRET in seen or AGENT_SECRET in seen
    if path in NOT_SHARED_READS:
        assert not leaked
    elif path == "list-agent":
        assert (AGENT_SECRET in seen) == caller.sees
    elif path == "list" or path == "rest-list" or path.endswith(("get", "history")):
        assert (SECRET in seen) == caller.sees
    else:
        assert (SECRET in seen) == caller.sees, seen[:2000]
    assert rows(mem) == before


async def test_recall_merges_scopes_under_one_ranking_and_shows_each(mem: MemorySystem) -> None:
    found = await mem.recall(CALLERS[1].ctx, "release code name, deploy linter, green tea", limit=20)
    scopes = {item.metadata["scope"] for item in found}
    assert scopes == {"user", TEAM, AGENT}
    assert [item.score for item in found] == sorted((item.score for item in found), reverse=True)
    block = await mem.format_context(CALLERS[1].ctx, "what are releases code-named?")
    assert f"[{TEAM} / user] Releases are code-named {SECRET}" in block
    assert 'tier="procedures"' in block and AGENT_SECRET in block


async def test_own_recall_is_unlabelled_and_unchanged(mem: MemorySystem) -> None:
    found = await mem.recall(CALLERS[0].ctx, "green tea")
    assert found and all("scope" not in item.metadata for item in found)


# -- write paths -------------------------------------------------------------------------------------------

Write = Callable[[MemorySystem, MemoryContext], Awaitable[Any]]


async def _share(mem: MemorySystem, ctx: MemoryContext) -> Any:
    own = await mem.facts(MemoryContext(namespace=ctx.namespace, user_id=ctx.user_id))
    return await mem.share(ctx, next(f.id for f in own if "green tea" in f.text), TEAM)


async def _tool(mem: MemorySystem, ctx: MemoryContext, scope: str) -> Any:
    return await _tool_call(
        mem.tools(ctx, write=True), "memory_remember", {"text": "Tag every release.", "scope": scope}
    )


WRITES: dict[str, Write] = {
    "share": _share,
    "tool-remember-shared": lambda m, c: _tool(m, c, "shared"),
    "tool-remember-agent": lambda m, c: _tool(m, c, "agent"),
    "mcp-remember-shared": lambda m, c: _mcp(m, c, "remember", {"text": "Tag every release.", "scope": "shared"}),
    "capture": lambda m, c: m.capture(c, [{"role": "user", "content": "We tag every release."}]),
    "rest-capture": lambda m, c: _rest(
        m,
        c,
        "POST",
        "/v1/capture",
        json={"session_id": "s-1", "messages": [{"role": "user", "content": "We tag every release."}]},
    ),
    "remember": lambda m, c: m.remember(c, "We tag every release."),
    "add-working-memory": lambda m, c: m.add_working_memory(c, "Tag every release."),
    "forget-team-fact": lambda m, c: m.forget(c, team_fact(m)),
    "update-team-fact": lambda m, c: m.update(c, team_fact(m), text="Releases have no code name."),
    "erase-user": lambda m, c: m.erase_user(c),
}
SHARED_WRITES = {"share", "tool-remember-shared", "tool-remember-agent", "mcp-remember-shared"}


@pytest.mark.parametrize("caller", CALLERS, ids=[c.name for c in CALLERS])
@pytest.mark.parametrize("path", sorted(WRITES), ids=sorted(WRITES))
async def test_a_write_reaches_a_shared_scope_only_with_a_write_grant(
    mem: MemorySystem, path: str, caller: Caller
) -> None:
    before, other_before = rows(mem), rows(mem, OTHER)
    denied = False
    try:
        await WRITES[path](mem, caller.ctx)
    except AccessDeniedError:
        denied = True
    except (MemoryNotFoundError, InvalidArgumentError):  # the team's fact is not the user's own
        assert path in {"forget-team-fact", "update-team-fact"}
    own_denied = caller.name == "own" and path in SHARED_WRITES  # names no shared scope to write
    assert denied == (caller.denied or own_denied)
    changed = rows(mem) != before
    assert changed == (caller.name == "granted" and path in {*SHARED_WRITES, "erase-user"})  # erase: anonymised
    if caller.name != "other-namespace" or path not in {*SHARED_WRITES, "erase-user"}:  # its own team
        assert rows(mem, OTHER) == other_before


async def test_a_tool_argument_cannot_name_a_scope(mem: MemorySystem) -> None:
    reply = await _named(mem.tools(CALLERS[1].ctx, write=True), "memory_remember").call(
        {"text": "x.", "scope": "team:ops"}
    )
    assert not reply["ok"]
    reply = await _named(mem.tools(CALLERS[1].ctx), "memory_recall").call({"query": "x", "scope": "team:ops"})
    assert not reply["ok"]


def test_a_context_cannot_act_as_a_scope() -> None:
    with pytest.raises(ValueError, match="names a shared scope"):
        MemoryContext(user_id=TEAM)
    with pytest.raises(ValueError, match="shared scope is"):
        MemoryContext(user_id="gina", read_scopes=("eng",))


async def test_a_copied_context_naming_a_scope_as_its_user_is_denied(mem: MemorySystem) -> None:
    forged = MemoryContext(user_id="nick").model_copy(update={"user_id": TEAM})  # model_copy skips validation
    with pytest.raises(AccessDeniedError):
        await mem.recall(forged, "release")


# -- grants, erasure ---------------------------------------------------------------------------------------


async def test_grants_are_listed_granted_and_revoked(mem: MemorySystem) -> None:
    assert {(g.user_id, g.scope, g.right) for g in await mem.grants("default")} == {
        ("gina", TEAM, "write"), ("gina", AGENT, "write")
    }  # fmt: skip
    await mem.grant("default", "nick", TEAM)
    assert await mem.recall(CALLERS[2].ctx.model_copy(update={"write_scope": None, "agent_id": None}), "release")
    with pytest.raises(AccessDeniedError):  # read is not write
        await mem.recall(CALLERS[2].ctx, "release")
    assert await mem.revoke("default", "nick", TEAM) is True
    assert await mem.revoke("default", "nick", TEAM) is False
    with pytest.raises(InvalidArgumentError):
        await mem.grant("default", "nick", "eng")


async def test_erasing_a_user_keeps_what_they_shared_anonymised(mem: MemorySystem) -> None:
    await mem.erase_user(_ctx("gina"))
    shared = next(r for r in rows(mem)["facts"] if SECRET in r["text"])
    assert "gina" not in json.dumps(shared, default=str)
    assert await mem.grants("default") == []
    assert [g.user_id for g in await mem.grants(OTHER)] == ["gina", "gina"]  # another namespace's gina


async def test_erasing_a_user_without_keeping_shared_removes_their_contributions(mem: MemorySystem) -> None:
    await mem.erase_user(_ctx("gina"), keep_shared=False)
    assert not any(SECRET in r["text"] or AGENT_SECRET in r["text"] for r in rows(mem)["facts"])
    assert any("Heron" in r["text"] for r in rows(mem, OTHER)["facts"])


async def test_erasing_a_scope_removes_it_whole(mem: MemorySystem) -> None:
    report = await mem.erase_scope("default", TEAM)
    assert report.rows["facts"] == 1
    assert not any(r["user_id"] == TEAM for r in rows(mem)["facts"])
    assert rows(mem)["facts"] and rows(mem, OTHER)["facts"]  # the agent's memory, the other namespace's team
    assert {g.scope for g in await mem.grants("default")} == {AGENT}


def test_the_cli_grants_lists_and_revokes(tmp_path: Path) -> None:
    store = ["--store", str(tmp_path / "store"), "--embedder", "hashing"]

    def run(*args: str) -> str:
        done = CliRunner().invoke(cli, [*store, *args], catch_exceptions=False)
        assert done.exit_code == 0, done.output
        return done.stdout

    assert run("grant", "alice", "--scope", TEAM, "--write").startswith(f"granted write on {TEAM} to default/alice")
    assert json.loads(run("--json", "grants")) == [
        {"namespace": "default", "user_id": "alice", "scope": TEAM, "right": "write"}
    ]
    assert run("revoke", "alice", "--scope", TEAM).startswith("revoked")
    assert run("grants").strip() == "no grants"
    refused = CliRunner().invoke(cli, [*store, "grant", "alice", "--scope", "eng"])
    assert refused.exit_code == 1 and "team:<id>" in refused.output


async def test_facts_several_granted_users_hold_are_proposed_not_moved(mem: MemorySystem) -> None:
    await mem.grant("default", "nick", TEAM)
    for user in ("gina", "nick", "olga"):  # olga holds it too, but is not granted the team
        await mem.remember(_ctx(user), "The staging database restarts at midnight.")
    before = rows(mem)
    proposed = await mem.propose_shared("default", TEAM)
    assert [(p.text, p.users) for p in proposed] == [("The staging database restarts at midnight.", ("gina", "nick"))]
    assert rows(mem) == before  # proposed for review: nothing moved
    await mem.share(CALLERS[1].ctx, proposed[0].fact_ids[0], TEAM)
    assert await mem.propose_shared("default", TEAM) == []  # in the team now
    with pytest.raises(InvalidArgumentError):
        await mem.propose_shared("default", TEAM, min_users=1)


@pytest.mark.parametrize(
    ("nick_says", "alike"),
    [
        ("we use Pytest for testing", True),
        ("WE USE PYTEST FOR TESTS!", True),
        ("We use unittest for tests.", False),
        ("Tests use pytest for us.", False),  # the same words in another order say something else
    ],
    ids=["other-filler", "case-and-punctuation", "other-word", "other-order"],
)
async def test_proposals_match_facts_worded_alike(mem: MemorySystem, nick_says: str, alike: bool) -> None:
    await mem.grant("default", "nick", TEAM)
    await mem.remember(_ctx("gina"), "We use pytest for tests.")
    await mem.remember(_ctx("nick"), nick_says)
    proposed = [(p.text, p.users) for p in await mem.propose_shared("default", TEAM)]
    assert proposed == ([("We use pytest for tests.", ("gina", "nick"))] if alike else [])


@pytest.mark.parametrize(
    "nick_says",
    ["We do not use pytest for tests.", "We don't use pytest for tests.", "We no longer use pytest for tests."],
    ids=["not", "don't", "no-longer"],
)
async def test_a_negated_fact_is_not_held_alike(tmp_path: Path, nick_says: str) -> None:
    mem = make(tmp_path / "s")
    for user in ("gina", "nick"):
        await mem.grant("default", user, TEAM, "write")
    await mem.remember(MemoryContext(namespace="default", user_id="gina"), "We use pytest for tests.")
    await mem.remember(MemoryContext(namespace="default", user_id="nick"), nick_says)
    assert await mem.propose_shared("default", TEAM) == []


def test_the_mcp_command_line_names_the_scopes(mem: MemorySystem) -> None:
    values = {"user_id": "gina", "read_scopes": (TEAM,), "write_scope": TEAM, "agent_id": "helper"}
    server = _Memory(config=config_from(values, {}), capability=mem.capability, forget=None)
    assert server.context(None) == CALLERS[1].ctx.model_copy(update={"session_id": None})
    with pytest.raises(ValueError, match="shared scope is"):
        build_server(config_from({**values, "read_scopes": ("eng",)}, {}), capability=mem.capability)
