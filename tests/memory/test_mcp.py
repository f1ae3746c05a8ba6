"""``tiermem mcp``: a real server subprocess, driven by the MCP SDK's own client over stdio (and HTTP).

The store is written with the library first (hashing embedder, so the server is started with
``--embedder hashing``). The server process runs with no API key and a socket guard installed
through ``sitecustomize``: any connection to anything but loopback is recorded and refused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import logging
import os
import re
import subprocess
import threading
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, cast

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests import servers
from tiermem import ConfigurationError, MemoryContext, create_memory_capability
from tiermem.memory._cli._mcp import McpConfig, _Memory, build_server, capability_options

# One worker runs this module (pytest-xdist --dist loadgroup), so that its shared servers
# (SharedServers, module_http_server) start once, on one worker.
pytestmark = [pytest.mark.xdist_group("mcp"), pytest.mark.slow]
USER = MemoryContext(user_id="u-1")
OTHER = MemoryContext(user_id="other")
OWN_FACT = "The user is allergic to penicillin."
SECRET = "The vault code is 4711."


def _leaks(found: object) -> bool:
    """Whether the other user's code shows in ``found``: as a number of its own, not inside a score's digits
    (CI saw "0.63343914711..." fail a plain substring test)."""
    return re.search(r"\b4711\b", json.dumps(found)) is not None


DIGEST = "The user is a nurse in Porto who is allergic to penicillin."
AUTHORITY = {"user_id", "user", "namespace", "session_id", "ctx", "context"}


def _write_store(folder: Path) -> str:
    path = str(folder / "store")
    mem = create_memory_capability(store=path, embedder="hashing").blocking()
    mem.add_semantic_fact(USER, OWN_FACT)
    mem.add_semantic_fact(USER, "Moni plays the cello.", subject="Moni")
    mem.set_digest(USER, DIGEST)
    mem.add_semantic_fact(OTHER, SECRET)
    mem.set_digest(OTHER, "The other user keeps the vault code 4711.")
    return path


@pytest.fixture
def store(tmp_path: Path) -> str:
    return _write_store(tmp_path)


@pytest.fixture
def server_env(tmp_path: Path) -> dict[str, str]:
    return servers.server_env(tmp_path)


@pytest.fixture(autouse=True)
def _no_network_in_the_server(tmp_path: Path) -> Any:
    yield
    servers.assert_no_network(tmp_path)


@asynccontextmanager
async def mcp_session(tmp_path: Path, env: dict[str, str], store: str, *options: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=servers.tiermem_command()[0],
        args=[*servers.tiermem_command()[1:], "mcp", "--store", store, "--embedder", "hashing", *options],
        env=env,
        cwd=tmp_path,
    )
    with (tmp_path / "server.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


class SharedSession:
    """A client session with a server that lives for the whole module, for the tests that write nothing.

    The session runs on its own event loop in a thread (each test has its own loop, and the SDK's
    streams belong to the loop that opened them): every method of the session is awaited there, its
    result or exception handed back to the test's loop.
    """

    def __init__(self, open_session: Callable[[], AbstractAsyncContextManager[ClientSession]]) -> None:
        self._loop = asyncio.new_event_loop()
        self._opened: concurrent.futures.Future[ClientSession] = concurrent.futures.Future()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(self._hold(open_session),), daemon=True
        )
        self._thread.start()
        self._session = self._opened.result(timeout=180)

    async def _hold(self, open_session: Callable[[], AbstractAsyncContextManager[ClientSession]]) -> None:
        self._stop = asyncio.Event()
        try:
            async with open_session() as session:
                self._opened.set_result(session)
                await self._stop.wait()
        except BaseException as exc:
            if not self._opened.done():
                self._opened.set_exception(exc)
            raise

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._session, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(method(*args, **kwargs), self._loop))

        return call

    def close(self) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the shared MCP session did not close"
        self._loop.close()


class SharedServers:
    """One stdio server per set of options, started when a test first asks for it, on one store."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.store = _write_store(folder)
        self.env = servers.server_env(folder)
        self._sessions: dict[tuple[str, ...], SharedSession] = {}

    def session(self, *options: str) -> SharedSession:
        if options not in self._sessions:
            self._sessions[options] = SharedSession(lambda: mcp_session(self.folder, self.env, self.store, *options))
        return self._sessions[options]

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()


@pytest.fixture(scope="module")
def module_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServers]:
    shared_servers = SharedServers(tmp_path_factory.mktemp("mcp-shared"))
    try:
        yield shared_servers
    finally:
        shared_servers.close()
    servers.assert_no_network(shared_servers.folder)


@pytest.fixture
def shared(module_servers: SharedServers) -> Iterator[SharedServers]:
    """The module's servers, for a test that writes nothing: the socket guard is checked after each test."""
    yield module_servers
    servers.assert_no_network(module_servers.folder)


def _envelope(result: Any) -> dict[str, Any]:
    envelope: dict[str, Any] = json.loads(result.content[0].text)
    assert result.structured_content == envelope
    assert result.is_error is (not envelope["ok"])
    return envelope


@pytest.mark.parametrize(
    ("options", "tools"),
    [
        ((), ["recall"]),
        (("--allow-writes",), ["recall", "remember", "forget"]),
        (("--relations", "--allow-writes"), ["recall", "connect", "remember", "forget"]),
    ],
    ids=["read-only", "writes", "relations-and-writes"],
)
async def test_lists_tools_without_any_authority_argument(
    shared: SharedServers, options: tuple[str, ...], tools: list[str]
) -> None:
    session = shared.session("--user-id", "u-1", *options)
    listed = (await session.list_tools()).tools
    resources = (await session.list_resources()).resources

    assert [t.name for t in listed] == tools
    for tool in listed:
        assert tool.input_schema["additionalProperties"] is False
        assert not AUTHORITY & set(tool.input_schema["properties"])
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (tool.name not in {"remember", "forget"})
        assert tool.annotations.destructive_hint is (tool.name == "forget")
    assert sorted(str(r.uri) for r in resources) == ["tiermem://digest", "tiermem://facts"]


async def test_recalls_a_memory_written_before(tmp_path: Path, server_env: dict[str, str], store: str) -> None:
    env = {**server_env, "TIERMEM_USER_ID": "u-1"}  # configured through the environment alone
    async with mcp_session(tmp_path, env, store) as session:
        found = _envelope(await session.call_tool("recall", {"query": "penicillin allergy"}))
        verbose = _envelope(await session.call_tool("recall", {"query": "penicillin allergy", "verbose": True}))
        digest = (await session.read_resource("tiermem://digest")).contents[0]
        facts = (await session.read_resource("tiermem://facts")).contents[0]

    assert found["ok"] is True
    assert found["results"][0]["text"] == OWN_FACT
    assert set(found["results"][0]) == {"id", "tier", "subject", "date", "text"}
    assert verbose["results"][0]["id"] == found["results"][0]["id"]
    assert "confidence" in verbose["results"][0]
    assert getattr(digest, "text", None) == DIGEST
    rows = json.loads(getattr(facts, "text", ""))
    assert {r["text"] for r in rows} == {OWN_FACT, "Moni plays the cello."}
    assert not _leaks([found, verbose, rows, getattr(digest, "text", None)])


async def test_remember_then_recall(tmp_path: Path, server_env: dict[str, str], store: str) -> None:
    async with mcp_session(tmp_path, server_env, store, "--user-id", "u-1", "--allow-writes") as session:
        stored = _envelope(await session.call_tool("remember", {"text": "The user's sister is called Ana."}))
        found = _envelope(await session.call_tool("recall", {"query": "sister Ana"}))

    assert stored["ok"] is True and stored["results"][0]["text"] == "The user's sister is called Ana."
    assert found["results"][0]["text"] == "The user's sister is called Ana."
    mem = create_memory_capability(store=store, embedder="hashing")
    assert "The user's sister is called Ana." in {f.text for f in await mem.facts(USER)}
    assert [f.text for f in await mem.facts(OTHER)] == [SECRET]


async def test_a_secret_remembered_over_mcp_is_never_stored_or_served(
    tmp_path: Path, server_env: dict[str, str], store: str
) -> None:
    key = "sk-proj-" + "Q7xZ2mN8vR4tY6uP0wL3kJ9hG5fD1sA"  # an OpenAI-style project key
    async with mcp_session(tmp_path, server_env, store, "--user-id", "u-1", "--allow-writes") as session:
        stored = _envelope(await session.call_tool("remember", {"text": f"The deploy key is {key}."}))
        found = _envelope(await session.call_tool("recall", {"query": "deploy key"}))

    assert stored["ok"] is True
    assert found["results"][0]["text"] == "The deploy key is [secret:api-key]."
    assert key not in json.dumps([stored, found])
    mem = create_memory_capability(store=store, embedder="hashing")
    assert all(key not in f.text for f in await mem.facts(USER))
    assert not any(key in str(row) for row in mem.store.table("facts").to_arrow().to_pylist())


async def test_forget_deletes_only_the_users_own_memory(tmp_path: Path, server_env: dict[str, str], store: str) -> None:
    mem = create_memory_capability(store=store, embedder="hashing")
    (secret,) = await mem.facts(OTHER)
    async with mcp_session(tmp_path, server_env, store, "--user-id", "u-1", "--allow-writes") as session:
        (found,) = _envelope(await session.call_tool("recall", {"query": "penicillin allergy", "limit": 1}))["results"]
        forgotten = _envelope(await session.call_tool("forget", {"id": found["id"]}))
        again = _envelope(await session.call_tool("recall", {"query": "penicillin allergy"}))
        theirs = _envelope(await session.call_tool("forget", {"id": secret.id}))

    assert forgotten["ok"] is True and forgotten["results"][0]["text"] == OWN_FACT
    assert OWN_FACT not in {r["text"] for r in again["results"]}
    assert theirs["ok"] is False and not _leaks(theirs)
    assert [f.text for f in await mem.facts(OTHER)] == [SECRET]
    assert OWN_FACT not in {f.text for f in await mem.facts(USER)}


async def test_remember_is_agent_written_and_refusals_write_nothing(
    tmp_path: Path, server_env: dict[str, str], store: str
) -> None:
    mem = create_memory_capability(store=store, embedder="hashing")
    before = await mem.facts(USER)
    deep: Any = "x"
    for _ in range(30):
        deep = [deep]
    async with mcp_session(tmp_path, server_env, store, "--user-id", "u-1", "--allow-writes") as session:
        refused = [
            _envelope(await session.call_tool("remember", arguments))
            for arguments in (
                {"text": "The vault code is 0000.", "subject": "other"},  # another user's id
                {"text": "Moni plays the viola.", "subject": "Moni"},  # not canonical
                {"text": "The user likes tea.", "subject": deep},  # nested past the limit
                {"text": "x" * 70_000},  # larger than the limit
            )
        ]
        assert await mem.facts(USER) == before  # checked while the server runs: nothing was written
        stored = _envelope(await session.call_tool("remember", {"text": "Moni plays the viola.", "subject": "moni"}))

    assert [e["ok"] for e in refused] == [False] * 4
    assert "id of a user" in refused[0]["error"] and "use 'moni'" in refused[1]["error"]
    assert all("invalid arguments for remember:" in e["error"] for e in refused[2:])
    assert stored["ok"] is True
    (fact,) = [f for f in await mem.facts(USER) if f.text == "Moni plays the viola."]
    assert (fact.subject, fact.metadata["source"]) == ("moni", "agent")
    assert [f.text for f in await mem.facts(OTHER)] == [SECRET]


async def test_without_allow_writes_remember_is_an_unknown_tool(shared: SharedServers) -> None:
    mem = create_memory_capability(store=shared.store, embedder="hashing")
    before = await mem.facts(USER)
    session = shared.session("--user-id", "u-1")
    envelope = _envelope(await session.call_tool("remember", {"text": "The user likes tea."}))
    assert envelope["ok"] is False and "unknown tool 'remember'" in envelope["error"]
    assert await mem.facts(USER) == before


def test_allow_writes_without_the_write_side_is_a_configuration_error(store: str) -> None:
    config = McpConfig(store=store, user_id="u-1", embedder="hashing", allow_writes=True)
    with pytest.raises(ConfigurationError, match="write side"):
        build_server(config)


HOSTILE: list[tuple[str, dict[str, Any]]] = [
    ("recall", {"query": "vault code", "user_id": "other"}),
    ("recall", {"query": "vault code", "namespace": "default", "user_id": "other"}),
    ("recall", {"query": "vault code", "session_id": "s-1"}),
    ("recall", {"query": "vault code", "ctx": {"user_id": "other"}}),
    ("recall", {"query": "vault code", "_meta": {"user_id": "other"}}),
    ("remember", {"text": "The vault code is 0000.", "user_id": "other"}),
    ("remember", {"text": "The vault code is 0000.", "namespace": "other-tenant"}),
    ("recall", {"user_id": "other"}),
    ("forget", {"id": "fact_x", "user_id": "other"}),
]


async def test_hostile_arguments_are_refused_and_other_users_unreachable(shared: SharedServers) -> None:
    session = shared.session("--user-id", "u-1", "--allow-writes")
    refused = [_envelope(await session.call_tool(name, arguments)) for name, arguments in HOSTILE]
    plain = [
        _envelope(await session.call_tool("recall", {"query": query, "limit": 50}))
        for query in ("vault code", "4711", "other user")
    ]
    facts = (await session.read_resource("tiermem://facts")).contents[0]
    with pytest.raises(MCPError):
        await session.read_resource("tiermem://facts?user_id=other")

    for envelope, (name, arguments) in zip(refused, HOSTILE, strict=True):
        assert envelope["ok"] is False, arguments
        assert f"invalid arguments for {name}:" in envelope["error"]
    assert all(envelope["ok"] for envelope in plain)
    assert not _leaks([refused, plain, getattr(facts, "text", "")])
    mem = create_memory_capability(store=shared.store, embedder="hashing")
    assert [f.text for f in await mem.facts(OTHER)] == [SECRET]
    assert "0000" not in json.dumps([f.text for f in await mem.facts(USER)])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "--user-id"),
        (["--user-id", "u-1", "--user-header", "X-User-Id", "--transport", "http"], "not both"),
        (["--user-header", "X-User-Id"], "--transport http"),
        (["--user-id", "bad\u0007id"], "control characters"),
    ],
    ids=["no-user", "user-and-header", "header-on-stdio", "bad-user-id"],
)
def test_bad_configuration_exits_with_a_message(
    tmp_path: Path, server_env: dict[str, str], store: str, arguments: list[str], message: str
) -> None:
    result = subprocess.run(
        [*servers.tiermem_command(), "mcp", "--store", store, "--embedder", "hashing", *arguments],
        env={**os.environ, **server_env, "TIERMEM_USER_ID": ""},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode != 0
    assert message in result.stderr, result.stderr[-2000:]


def test_a_store_written_with_another_embedder_is_refused(tmp_path: Path, server_env: dict[str, str]) -> None:
    path = str(tmp_path / "store")
    create_memory_capability(store=path)  # the shipped static embedder
    result = subprocess.run(
        [*servers.tiermem_command(), "mcp", "--store", path, "--embedder", "hashing", "--user-id", "u-1"],
        env={**os.environ, **server_env},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode != 0
    assert "tiermem: error:" in result.stderr and "embedder" in result.stderr, result.stderr[-2000:]


# -- streamable HTTP, the user from a header the operator's proxy sets ---------------------------


HTTP_OPTIONS = ("--transport", "http", "--user-header", "X-User-Id")


@pytest.fixture(scope="module")
def module_http_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One HTTP server for the module: its tests only read and are refused."""
    folder = tmp_path_factory.mktemp("mcp-http")
    store, server_env = _write_store(folder), servers.server_env(folder)
    port = servers.free_port()
    with (folder / "server.log").open("a") as errlog:
        proc = subprocess.Popen(
            [
                *servers.tiermem_command(),
                "mcp",
                "--store",
                store,
                "--embedder",
                "hashing",
                *HTTP_OPTIONS,
                "--port",
                str(port),
            ],
            env={**os.environ, **server_env},
            stdin=subprocess.DEVNULL,
            stdout=errlog,
            stderr=errlog,
        )
        try:
            servers.wait_for_port(port, proc)
            yield folder, f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    servers.assert_no_network(folder)


@pytest.fixture
def http_server(module_http_server: tuple[Path, str]) -> Iterator[str]:
    folder, url = module_http_server
    yield url
    servers.assert_no_network(folder)


@asynccontextmanager
async def http_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@pytest.mark.parametrize(
    ("user", "expected"), [("u-1", OWN_FACT), ("other", SECRET)], ids=["user-header", "other-header"]
)
async def test_http_takes_the_user_from_the_operator_header(http_server: str, user: str, expected: str) -> None:
    async with http_session(http_server, {"X-User-Id": user}) as session:
        mine = _envelope(await session.call_tool("recall", {"query": "vault code penicillin allergy", "limit": 50}))
        hostile = _envelope(await session.call_tool("recall", {"query": "vault code", "user_id": "u-1"}))

    texts = {r["text"] for r in mine["results"]}
    assert expected in texts
    assert not ({OWN_FACT, SECRET} - {expected}) & texts
    assert hostile["ok"] is False


async def test_http_without_the_header_is_refused(http_server: str) -> None:
    async with http_session(http_server, {}) as session:
        with pytest.raises(MCPError, match="X-User-Id"):
            await session.call_tool("recall", {"query": "vault code"})


AMBIGUOUS = {
    "appended": ([("X-User-Id", "u-1"), ("X-User-Id", "other")], "exactly one user"),
    "comma-joined": ([("X-User-Id", "u-1, other")], "exactly one user"),
    "empty": ([("X-User-Id", "")], "empty"),
}


@pytest.mark.parametrize("case", list(AMBIGUOUS), ids=list(AMBIGUOUS))
async def test_http_refuses_a_user_header_given_twice_or_empty(http_server: str, case: str) -> None:
    """A proxy that appends its header behind the client's must not let the client's first value win."""
    headers, message = AMBIGUOUS[case]
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as client,
        streamable_http_client(http_server, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        with pytest.raises(MCPError, match=message):
            await session.call_tool("recall", {"query": "vault code penicillin", "limit": 50})
        with pytest.raises(MCPError, match=message):
            await session.read_resource("tiermem://facts")  # resources resolve the user alike


def _raw_call(url: str, user_header: str) -> str:
    """A tool call over HTTP with ``X-User-Id: <user_header>`` sent as given (http.client, unlike httpx, sends a
    whitespace-only value); the server's answer as text."""
    parts = urllib.parse.urlsplit(url)
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    def post(body: dict[str, object], headers: dict[str, str]) -> tuple[str, str | None]:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        try:
            conn.request("POST", parts.path, json.dumps(body), {**base, **headers})
            response = conn.getresponse()
            return response.read().decode(), response.getheader("mcp-session-id")
        finally:
            conn.close()

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    _, session = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}, {})
    assert session is not None
    ids = {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, ids)
    call = {"name": "recall", "arguments": {"query": "vault code penicillin", "limit": 50}}
    answer, _ = post(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, ids | {"X-User-Id": user_header}
    )
    return answer


@pytest.mark.parametrize("value", [" \t ", "u-1", "  u-1, other "], ids=["whitespace", "control-one-user", "comma"])
async def test_http_refuses_a_whitespace_user_header_sent_raw(http_server: str, value: str) -> None:
    answer = await asyncio.to_thread(_raw_call, http_server, value)

    if value == "u-1":  # the same request with a real user is served: the refusals are the header's
        assert OWN_FACT in answer and SECRET not in answer
    else:
        assert "X-User-Id header" in answer and OWN_FACT not in answer and SECRET not in answer


async def test_a_forged_tool_name_reaches_the_log_as_one_bounded_line(
    store: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A client's tool name is escaped and cut before it is logged: no forged line, no megabyte line."""
    config = McpConfig(store=store, user_id="u-1", embedder="hashing")
    memory = _Memory(config=config, capability=create_memory_capability(**capability_options(config)), forget=None)
    name = "recall\n2026-01-01 INFO tiermem.mcp admin logged in\n" + "x" * 1_000_000
    params = types.CallToolRequestParams(name=name, arguments={})

    with caplog.at_level(logging.INFO, logger="tiermem.mcp"):
        result = await memory.call_tool(cast(Any, None), params)

    assert result.is_error
    (record,) = [r for r in caplog.records if r.name == "tiermem.mcp"]
    line = caplog.handler.format(record)
    assert "\n" not in line and len(line) < 1_000
    assert "recall\\n2026-01-01 INFO" in line and "more characters]" in line
