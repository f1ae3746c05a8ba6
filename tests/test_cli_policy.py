"""The long-running fronts write under the operator's memory policy: ``tiermem worker``, ``serve`` and ``mcp``
take ``--policy FILE`` (JSON or TOML, or ``$TIERMEM_POLICY``), ``--instructions`` and ``--category``; a bad
policy starts nothing. Real subprocesses on a real store, the offline rules model."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any, Literal

import httpx
import pytest

from tests import servers
from tiermem import MemoryContext, system
from tiermem.memory.testing import Where

pytestmark = pytest.mark.slow

STARTUP = 120.0  # seconds: bounds for a slow machine, not expected durations
SAID = "I am allergic to peanuts. I work at Acme Corp as an engineer. My wife Moni loves painting."
TURN = [{"role": "user", "content": SAID}, {"role": "assistant", "content": "Noted."}]
CTX = MemoryContext(user_id="u-1", session_id="s-1")

MONI_RULE = "Never store anything about Moni."
# name -> (file name, file text): no policy at all is the control that shows the left-out words would be stored
POLICIES: dict[str, tuple[str, str] | None] = {
    "none": None,
    "json-exclude-health": ("policy.json", json.dumps({"exclude_categories": ["health"]})),
    "toml-exclude-a-subject": ("policy.toml", f'instructions = "{MONI_RULE}"\nexclude_subjects = ["Moni"]\n'),
    "json-only-work": ("policy.json", json.dumps({"categories": ["work", "health"], "include_categories": ["work"]})),
}  # fmt: skip
LEFT_OUT = {"none": [], "json-exclude-health": ["peanuts"], "toml-exclude-a-subject": ["painting"],
            "json-only-work": ["peanuts", "painting"]}  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("TIERMEM_")}
    return env | {"LITELLM_LOCAL_MODEL_COST_MAP": "True"} | extra


def _policy_args(tmp_path: Path, name: str) -> list[str]:
    given = POLICIES[name]
    if given is None:
        return []
    path = tmp_path / given[0]
    path.write_text(given[1], encoding="utf-8")
    return ["--policy", str(path)]


def _texts(store: str, table: Literal["working", "facts"]) -> str:
    mem = system(model="rules", store=store, embedder="hashing", create=False)
    return "\n".join(r.text for r in mem.store.query(table, Where(eq={"user_id": "u-1"}))).lower()


def _lines(stream: IO[str], sink: queue.Queue[str]) -> None:
    for line in stream:
        sink.put(line)


# -- the worker's consolidation ------------------------------------------------------------------


@pytest.mark.parametrize("name", list(POLICIES), ids=list(POLICIES))
def test_the_worker_consolidates_under_its_policy(tmp_path: Path, name: str) -> None:
    store = str(tmp_path / "store")
    writer = system(model="rules", store=store, embedder="hashing").blocking()  # the app wrote without a policy
    writer.capture(CTX, TURN)
    writer.end_session(CTX)
    command = [*servers.tiermem_command(), "worker", "--store", store, "--model", "rules", "--embedder", "hashing"]
    log = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen(
        [*command, "--run-now", *_policy_args(tmp_path, name)],
        stdout=subprocess.PIPE, stderr=log, text=True, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        deadline = time.monotonic() + STARTUP  # until the consolidation job wrote the fact every policy keeps
        while "acme corp" not in _texts(store, "facts") and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    said = (tmp_path / "worker.log").read_text()

    facts = _texts(store, "facts")
    assert code == 0, said[-3000:]
    assert "acme corp" in facts
    assert all(word not in facts for word in LEFT_OUT[name]), facts
    if name == "none":
        assert "peanuts" in facts and "painting" in facts  # what the policies keep out would be stored
    else:
        using = [line for line in said.splitlines() if line.startswith("tiermem: using store ")]
        assert len(using) == 1 and "; policy (" in using[0], said[:1000]
    running = [lines.get() for _ in range(lines.qsize())]
    assert any("policy none" in line for line in running) == (name == "none"), running


# -- the REST server's capture -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["none", "json-exclude-health", "toml-exclude-a-subject"], ids=str)
def test_the_rest_server_captures_under_its_policy(tmp_path: Path, name: str) -> None:
    pytest.importorskip("uvicorn")
    store = str(tmp_path / "store")
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps([{"key": "k-7Qx2mB9vLr4Tn8Kp", "namespace": "default", "user_id": "u-1"}]))
    port = servers.free_port()
    command = [*servers.tiermem_command(), "serve", "--store", store, "--embedder", "hashing", "--model", "rules"]
    with (tmp_path / "server.log").open("a") as log:
        proc = subprocess.Popen(
            [*command, "--create", "--keys", str(keys), "--port", str(port), *_policy_args(tmp_path, name)],
            env=_env(**servers.server_env(tmp_path)), stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=tmp_path,
        )  # fmt: skip
        try:
            servers.wait_for_port(port, proc)
            reply = httpx.post(
                f"http://127.0.0.1:{port}/v1/capture", json={"session_id": "s-1", "messages": TURN},
                headers={"Authorization": "Bearer k-7Qx2mB9vLr4Tn8Kp"}, timeout=60,
            )  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    servers.assert_no_network(tmp_path)

    assert reply.status_code == 200, reply.text
    working = _texts(store, "working")
    assert "acme corp" in working
    assert all(word not in working for word in LEFT_OUT[name]), working
    assert ("peanuts" in working) == (name != "json-exclude-health")


# -- the MCP server's forget rewrites the digest under the policy ------------------------------------------


async def _forget_over_mcp(tmp_path: Path, store: str, fact_id: str, *options: str) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=servers.tiermem_command()[0],
        args=[*servers.tiermem_command()[1:], "mcp", "--store", store, "--embedder", "hashing", "--user-id", "u-1",
              "--allow-writes", *options],
        env=_env(**servers.server_env(tmp_path)), cwd=tmp_path,
    )  # fmt: skip
    with (tmp_path / "server.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            done = await session.call_tool("forget", {"id": fact_id})
            return dict(done.structured_content or {})


@pytest.mark.parametrize("name", ["none", "toml-exclude-a-subject"], ids=str)
def test_the_mcp_server_rewrites_the_digest_under_its_policy(tmp_path: Path, name: str) -> None:
    pytest.importorskip("mcp")
    store = str(tmp_path / "store")
    writer = system(model="rules", store=store, embedder="hashing")
    ctx = MemoryContext(user_id="u-1")
    facts = writer.capability.blocking()
    facts.remember(ctx, "The user works at Acme Corp as an engineer.", subject="user")
    facts.remember(ctx, "Moni loves painting.", subject="moni")
    tea = facts.remember(ctx, "The user likes tea.", subject="user")
    writer.blocking().digest(ctx)

    done = asyncio.run(_forget_over_mcp(tmp_path, store, tea.id, *_policy_args(tmp_path, name)))

    assert done["ok"], done
    latest = system(model="rules", store=store, embedder="hashing", create=False).capability.blocking()
    text = (latest.latest_digest(ctx) or pytest.fail("no digest")).text.lower()
    assert "tea" not in text and "acme corp" in text, text
    assert ("painting" in text) == (name == "none"), text
    said = (tmp_path / "server.log").read_text()
    assert (f"policy (instructions '{MONI_RULE}'; never about moni)" in said) == (name != "none"), said


# -- a bad policy starts nothing ----------------------------------------------------------------------


BAD = {
    "unknown-field": ("policy.json", '{"exclude_categorie": ["health"]}', "exclude_categorie: Extra inputs"),
    "not-json": ("policy.json", '{"exclude_categories": ["health"]', "policy.json"),
    "bad-toml": ("policy.toml", "exclude_categories = [", "policy.toml"),
    "a-list": ("policy.json", '["health"]', "not a table of MemoryPolicy's fields but list"),
    "included-and-excluded": ("policy.json", '{"include_categories": ["a"], "exclude_categories": ["a"]}',
                              "categories both included and excluded"),
    "bad-subject": ("policy.json", '{"exclude_subjects": ["!!"]}', "exclude_subjects: invalid subject '!!'"),
    "missing": (None, "", "No such file or directory"),
}  # fmt: skip
FRONTS = {
    "worker": ["worker", "--model", "rules", "--run-now"],
    "serve": ["serve", "--create", "--keys", "{keys}", "--model", "rules"],
    "mcp": ["mcp", "--user-id", "u-1", "--allow-writes", "--create"],
    "import-history": ["import-history", "u-1", "{history}", "--model", "rules"],
}


@pytest.mark.parametrize("front", list(FRONTS), ids=list(FRONTS))
@pytest.mark.parametrize("bad", list(BAD), ids=list(BAD))
def test_a_bad_policy_is_refused_and_nothing_is_written(tmp_path: Path, front: str, bad: str) -> None:
    file_name, text, reason = BAD[bad]
    policy = tmp_path / (file_name or "absent.json")
    if file_name is not None:
        policy.write_text(text, encoding="utf-8")
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps([{"key": "k-7Qx2mB9vLr4Tn8Kp", "namespace": "default", "user_id": "u-1"}]))
    history = tmp_path / "history.json"
    history.write_text(json.dumps([{"session_id": "s-1", "turns": [{"at": "2024-05-02T10:00:00+00:00",
                                                                     "messages": TURN}]}]))  # fmt: skip
    store = tmp_path / "store"
    args = [a.format(keys=keys, history=history) for a in FRONTS[front]]

    done = subprocess.run(
        [*servers.tiermem_command(), "--store", str(store), "--embedder", "hashing", *args, "--policy", str(policy)],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=STARTUP,
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("tiermem: error: Invalid value for --policy: "), line
    assert reason in line
    assert not store.exists()
    assert "running" not in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--instructions", "Keep work facts.", "--policy", "{policy}"], "--instructions given both alone and in"),
        (["--category", "work", "--policy", "{policy}"], "--category given both alone and in"),
        (["--category", "x" * 41], "a category has 1 to 40 characters"),
    ],
    ids=["instructions-twice", "categories-twice", "bad-category"],
)
def test_shorthands_are_checked_against_the_policy_file(tmp_path: Path, args: list[str], message: str) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('instructions = "Never store health details."\ncategories = ["work", "health"]\n')
    store = tmp_path / "store"

    done = subprocess.run(
        [*servers.tiermem_command(), "worker", "--store", str(store), *(a.format(policy=policy) for a in args)],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=STARTUP,
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert not store.exists()


def test_the_environment_names_the_policy_file(tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text('{"exclude_categories": ["health"], "exclude_subjects": ["moni"]}')
    store = str(tmp_path / "store")
    system(model="rules", store=store, embedder="hashing")

    done = subprocess.run(
        [*servers.tiermem_command(), "janitor", "--store", store, "--embedder", "hashing", "--dry-run"],
        capture_output=True, text=True, env=_env(TIERMEM_POLICY=str(policy)), cwd=tmp_path, timeout=STARTUP,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"tiermem: using store {store}; every namespace; model rules; policy (never health; never about moni)"
    )


@pytest.mark.parametrize(
    "args",
    [["ui", "--allow-writes"], ["janitor"], ["forget", "fact_0", "--user", "u-1"]],
    ids=["ui", "janitor", "forget"],
)
def test_the_other_writing_commands_refuse_a_bad_policy_too(tmp_path: Path, args: list[str]) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text('{"exclude_categorie": ["health"]}')
    store = tmp_path / "store"

    done = subprocess.run(
        [*servers.tiermem_command(), "--store", str(store), *args, "--policy", str(policy)],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=STARTUP,
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"tiermem: error: Invalid value for --policy: {policy}: not a memory policy: exclude_categorie: Extra inputs "
        f"are not permitted (see 'tiermem {args[0]} --help')"
    ]
    assert not store.exists()


async def _recall_schema(tmp_path: Path, store: str, *options: str) -> str:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=servers.tiermem_command()[0],
        args=[*servers.tiermem_command()[1:], "mcp", "--store", store, "--embedder", "hashing", "--user-id", "u-1",
              *options],
        env=_env(**servers.server_env(tmp_path)), cwd=tmp_path,
    )  # fmt: skip
    with (tmp_path / "server.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            return json.dumps(tools["recall"].input_schema)


@pytest.mark.parametrize(
    ("options", "labels"),
    [([], False), (["--category", "work", "--category", "health"], True), (["--allow-writes", "--category", "work",
     "--category", "health"], True)],
    ids=["no-policy", "read-only", "allow-writes"],
)  # fmt: skip
def test_the_mcp_recall_tool_offers_the_policy_labels(tmp_path: Path, options: list[str], labels: bool) -> None:
    pytest.importorskip("mcp")
    store = str(tmp_path / "store")
    system(model="rules", store=store, embedder="hashing")
    before = sorted(p.name for p in Path(store).iterdir())

    schema = asyncio.run(_recall_schema(tmp_path, store, *options))

    assert ('"enum": ["work", "health"]' in schema) == labels, schema
    if "--allow-writes" not in options:
        assert sorted(p.name for p in Path(store).iterdir()) == before  # read-only: the policy writes nothing
