"""``tiermem serve``: a real server subprocess, called over HTTP with httpx and with a client generated from its
OpenAPI schema; every answer is checked against the schema the server publishes.

One server for the module, on a store seeded with a fact per user; each test writes only to its own users.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate as validate_spec

from tests import servers
from tiermem import MemoryContext, create_memory_capability

# One worker runs this module (pytest-xdist --dist loadgroup), so that its server starts once.
pytestmark = [pytest.mark.xdist_group("rest"), pytest.mark.slow]

NAMESPACE = "acme"
KEYS = {  # who -> (key, namespace, user_id)
    "alice": ("alice-key-7Qx2mB9vLr4Tn8Kp", NAMESPACE, "alice"),
    "bob": ("bob-key-Hc5Wd1Zs6Yj3Fg0Ue", NAMESPACE, "bob"),
    "carol": ("carol-key-Pn4Rv8Xb2Lq7Mt1Ck", NAMESPACE, "carol"),
    "dave": ("dave-key-Ja9Gs3Ef6Oy0Iw5Hu", NAMESPACE, "dave"),
    "erin": ("erin-key-Tb7Nc2Vm4Zx8Ql1Rd", NAMESPACE, "erin"),
    "alice-elsewhere": ("alice-other-Kd3Fh6Jl9Np2Sr5Tu", "other", "alice"),  # the same user id, another namespace
}
OWN_FACT = "The user is allergic to penicillin."
SECRET = "The vault code is 4711."
VIOLA = "The user plays the viola."
AUTHORITY = {"user_id", "user", "namespace", "ctx", "context", "key", "api_key"}
OPERATIONS = {
    "whoami", "capture", "recall", "format_context", "list_memories", "get_memory", "history", "update_memory", "pin",
    "unpin", "forget", "erase", "export", "import_memories", "stats",
}  # fmt: skip


def _ctx(who: str) -> MemoryContext:
    _, namespace, user_id = KEYS[who]
    return MemoryContext(namespace=namespace, user_id=user_id)


def _auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[who][0]}"}


class Api:
    """httpx against the server; every answer's body checked against the schema documented for its status."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=120)
        self.schema: dict[str, Any] = self.http.get("/openapi.json").json()

    def call(
        self, method: str, route: str, who: str | None = None, *, expect: int = 200, headers: Any = None,
        **options: Any,
    ) -> Any:  # fmt: skip
        """``method`` on ``route`` (its path template, filled from ``path``) as ``who``; the body, checked."""
        path = options.pop("path", {})
        sent = headers if headers is not None else (_auth(who) if who else {})
        response = self.http.request(method, route.format(**path), headers=sent, **options)
        assert response.status_code == expect, response.text
        return self.checked(method, route, response)

    def checked(self, method: str, route: str, response: httpx.Response) -> Any:
        documented = self.schema["paths"][route][method.lower()]["responses"][str(response.status_code)]
        media = response.headers["content-type"].split(";")[0]
        body = response.json() if media == "application/json" else response.text
        schema = documented["content"][media]["schema"]
        OAS31Validator({**schema, "components": self.schema["components"]}).validate(body)
        return body

    def stats(self, who: str) -> Any:
        return self.call("GET", "/v1/stats", who)["counts"]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    folder = tmp_path_factory.mktemp("rest")
    store = str(folder / "store")
    seed = create_memory_capability(store=store, embedder="hashing").blocking()
    seed.add_semantic_fact(_ctx("alice"), OWN_FACT)
    seed.add_semantic_fact(_ctx("bob"), SECRET)
    seed.add_semantic_fact(_ctx("dave"), VIOLA)
    keys = folder / "keys.json"
    keys.write_text(json.dumps([{"key": k, "namespace": n, "user_id": u} for k, n, u in KEYS.values()]))
    port = servers.free_port()
    command = [*servers.tiermem_command(), "serve", "--store", store, "--embedder", "hashing", "--model", "rules"]
    with (folder / "server.log").open("a") as log:
        proc = subprocess.Popen(
            [*command, "--keys", str(keys), "--port", str(port), "--max-body-mib", "1"],
            env={**os.environ, **servers.server_env(folder)},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        try:
            servers.wait_for_port(port, proc)
            yield Api(f"http://127.0.0.1:{port}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    servers.assert_no_network(folder)
    logged = (folder / "server.log").read_text()
    assert "tiermem serve: http://127.0.0.1" in logged
    assert f"tiermem: using store {store}; every namespace; model rules" in logged  # as every command says
    assert not [who for who, (key, _, _) in KEYS.items() if key in logged], "a key reached the server's log"


# -- the schema ---------------------------------------------------------------------------------


def test_the_openapi_schema_is_served_valid_and_names_no_user(api: Api) -> None:
    served = httpx.get(f"{api.url}/openapi.json")  # without a key
    schema = served.json()
    validate_spec(schema)
    operations = {op["operationId"]: op for path in schema["paths"].values() for op in path.values()}
    assert set(operations) == OPERATIONS
    assert all(op["security"] == [{"HTTPBearer": []}] for op in operations.values())
    assert schema["components"]["securitySchemes"]["HTTPBearer"] == {
        "type": "http", "scheme": "bearer", "description": "An API key from the operator's keys file.",
    }  # fmt: skip
    named = {p["name"] for op in operations.values() for p in op.get("parameters", [])}
    for op in operations.values():
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
        if "$ref" in body:
            named |= set(schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]["properties"])
    assert named and not named & AUTHORITY


# -- the operations -----------------------------------------------------------------------------


def test_capture_then_recall_and_the_context_block(api: Api) -> None:
    turn = {"role": "user", "content": "I adopted a cat called Miso last week."}
    sent = {"session_id": "s-1", "messages": [turn], "idempotency_key": "carol-turn-1"}
    captured = api.call("POST", "/v1/capture", "carol", json=sent)
    again = api.call("POST", "/v1/capture", "carol", json=sent)
    found = api.call("POST", "/v1/recall", "carol", json={"query": "cat Miso", "limit": 5})["results"]
    verbose = api.call("POST", "/v1/recall", "carol", json={"query": "cat Miso", "verbose": True})["results"]
    block = api.call("POST", "/v1/context", "carol", json={"input": "How is Miso?", "session_id": "s-1"})["context"]

    assert (captured["turn"]["namespace"], captured["turn"]["user_id"]) == (NAMESPACE, "carol")
    assert captured["duplicate"] is False and captured["deferred"] is False and captured["entries"]
    assert again["duplicate"] is True and again["turn"]["id"] == captured["turn"]["id"]
    assert any("Miso" in r["text"] for r in found) and set(found[0]) <= {
        "id",
        "tier",
        "subject",
        "date",
        "text",
        "past",
    }
    assert all("confidence" in r for r in verbose)
    assert block.startswith("<memory>") and "Miso" in block


WIZARD = {"role": "wizard", "content": "hi"}
HELLO = {"role": "user", "content": "hi"}


def test_bad_input_is_refused_and_writes_nothing(api: Api) -> None:
    before = api.stats("carol")
    refused = [
        api.call("POST", "/v1/capture", "carol", json={"session_id": "s-2", "messages": [WIZARD]}, expect=422),
        api.call("POST", "/v1/capture", "carol", json={"session_id": "s-2", "messages": []}, expect=422),
        api.call("POST", "/v1/capture", "carol", content=b"{not json", expect=422),
        api.call("POST", "/v1/recall", "carol", json={"query": ""}, expect=422),
        api.call("POST", "/v1/import", "carol", content=b'{"kind": "nonsense"}\n', expect=422),
        api.call("POST", "/v1/erase", "carol", json={"confirm": False}, expect=422),
        api.call("POST", "/v1/context", "carol", json={"input": "hi", "max_tokens": 3}, expect=422),
        api.call("POST", "/v1/capture", "carol", json={"session_id": "s\n2", "messages": [HELLO]}, expect=422),
        api.call("GET", "/v1/memories", "carol", params={"since": "2026-01-01T00:00:00"}, expect=422),  # no offset
    ]  # fmt: skip

    assert [r["error"] for r in refused] == ["InvalidArgumentError"] * len(refused)
    assert "confirm" in refused[5]["message"]
    assert api.stats("carol") == before


def test_list_get_update_history_pin_forget(api: Api) -> None:
    page = api.call("GET", "/v1/memories", "dave", params={"tier": ["semantic"], "limit": 10})
    (fact,) = page["items"]
    got = api.call("GET", "/v1/memories/{memory_id}", "dave", path={"memory_id": fact["id"]})
    new = api.call("PATCH", "/v1/memories/{memory_id}", "dave", path={"memory_id": fact["id"]},
                   json={"text": "The user plays the cello."})  # fmt: skip
    versions = api.call("GET", "/v1/memories/{memory_id}/history", "dave", path={"memory_id": new["id"]})
    pinned = api.call("PUT", "/v1/memories/{memory_id}/pin", "dave", path={"memory_id": new["id"]})
    refused = api.call("DELETE", "/v1/memories/{memory_id}", "dave", path={"memory_id": new["id"]},
                       params={"include_turns": True, "user_id": "bob"}, expect=422)  # fmt: skip
    unpinned = api.call("DELETE", "/v1/memories/{memory_id}/pin", "dave", path={"memory_id": new["id"]})
    forgotten = api.call("DELETE", "/v1/memories/{memory_id}", "dave", path={"memory_id": new["id"]})
    gone = api.call("GET", "/v1/memories/{memory_id}", "dave", path={"memory_id": new["id"]}, expect=404)

    assert got["text"] == VIOLA and got["tier"] == "semantic"
    assert new["text"] == "The user plays the cello." and new["id"] != fact["id"]
    assert [v["item"]["text"] for v in versions] == [VIOLA, "The user plays the cello."]
    assert [v["status"] for v in versions] == ["superseded", "active"]
    assert pinned["pinned"] is True and unpinned["pinned"] is False
    assert "user_id" in refused["message"]
    assert new["id"] in forgotten["forgotten"]
    assert gone["error"] == "MemoryNotFoundError"


def test_export_import_stats_erase(api: Api) -> None:
    exported = api.call("GET", "/v1/export", "alice")
    imported = api.call("POST", "/v1/import", "erin", content=exported.encode(),
                        headers={**_auth("erin"), "Content-Type": "application/x-ndjson"})  # fmt: skip
    twice = api.call("POST", "/v1/import", "erin", content=exported.encode())
    copied = api.call("POST", "/v1/recall", "erin", json={"query": "penicillin allergy"})["results"]
    stats = api.stats("erin")
    erased = api.call("POST", "/v1/erase", "erin", json={"confirm": True})

    header = json.loads(exported.splitlines()[0])
    assert (header["kind"], header["user_id"]) == ("header", "alice")
    assert imported["records"] == twice["records"] and imported["records"] == {"fact": 1}
    assert [r["text"] for r in copied] == [OWN_FACT]
    assert stats["semantic"] == {"active": 1}
    assert erased["rows"]["facts"] == 1
    assert api.stats("erin")["semantic"] == {} and api.stats("alice")["semantic"] == {"active": 1}


# -- authority ----------------------------------------------------------------------------------

ALICE, BOB = KEYS["alice"][0], KEYS["bob"][0]
AUTH_FAILURES = {
    "missing": ([], 401, "Unauthorized"),
    "unknown": ([("Authorization", "Bearer mallory-key-00000000000")], 401, "Unauthorized"),
    "not-bearer": ([("Authorization", f"Basic {ALICE}")], 401, "Unauthorized"),
    "no-key": ([("Authorization", "Bearer")], 401, "Unauthorized"),
    "twice": ([("Authorization", f"Bearer {ALICE}"), ("Authorization", f"Bearer {BOB}")], 400, "Ambiguous"),
    "comma-joined": ([("Authorization", f"Bearer {ALICE}, Bearer {BOB}")], 400, "Ambiguous"),
}


@pytest.mark.parametrize("case", list(AUTH_FAILURES), ids=list(AUTH_FAILURES))
@pytest.mark.parametrize(
    ("method", "route", "body"),
    [("GET", "/v1/stats", None), ("POST", "/v1/capture", {"session_id": "s", "messages": [{"role": "user",
      "content": "I live in Oslo."}]})],
    ids=["read", "write"],
)  # fmt: skip
def test_a_request_without_exactly_one_known_key_is_refused(
    api: Api, case: str, method: str, route: str, body: Any
) -> None:
    headers, status, error = AUTH_FAILURES[case]
    before = (api.stats("alice"), api.stats("bob"))
    refused = api.call(method, route, headers=headers, json=body, expect=status)
    raw = api.http.request(method, route, headers=headers, json=body)

    assert refused["error"].startswith(error)
    assert ALICE not in json.dumps(refused) and BOB not in json.dumps(refused)
    assert (raw.headers.get("www-authenticate") == "Bearer") is (status == 401)
    assert (api.stats("alice"), api.stats("bob")) == before


def test_a_key_reaches_its_own_user_only(api: Api) -> None:
    (secret,) = api.call("GET", "/v1/memories", "bob", params={"tier": "semantic"})["items"]
    before = api.stats("bob")
    mine = api.call("POST", "/v1/recall", "alice", json={"query": "vault code penicillin", "limit": 50})["results"]
    theirs_by_id = [
        api.call(method, route, "alice", path={"memory_id": secret["id"]}, json=body, expect=404)
        for method, route, body in [
            ("GET", "/v1/memories/{memory_id}", None),
            ("GET", "/v1/memories/{memory_id}/history", None),
            ("PATCH", "/v1/memories/{memory_id}", {"text": "The vault code is 0000."}),
            ("PUT", "/v1/memories/{memory_id}/pin", None),
            ("DELETE", "/v1/memories/{memory_id}", None),
        ]
    ]
    elsewhere = api.call("POST", "/v1/recall", "alice-elsewhere", json={"query": "penicillin allergy"})["results"]

    assert OWN_FACT in {r["text"] for r in mine} and SECRET not in {r["text"] for r in mine}
    assert all(r["error"] == "MemoryNotFoundError" for r in theirs_by_id)
    assert elsewhere == []  # the same user id in another namespace is another user
    assert api.call("GET", "/v1/memories/{memory_id}", "bob", path={"memory_id": secret["id"]})["text"] == SECRET
    assert api.stats("bob") == before


SWITCHES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "recall-body": ("POST", "/v1/recall", {"json": {"query": "vault code", "user_id": "bob"}}),
    "capture-body": ("POST", "/v1/capture", {"json": {"session_id": "s", "namespace": NAMESPACE, "user_id": "bob",
                                                      "messages": [{"role": "user", "content": "I am Bob."}]}}),
    "context-body": ("POST", "/v1/context", {"json": {"input": "vault code", "user": "bob"}}),
    "list-query": ("GET", "/v1/memories", {"params": {"user_id": "bob"}}),
    "stats-query": ("GET", "/v1/stats", {"params": {"namespace": "other"}}),
    "export-query": ("GET", "/v1/export", {"params": {"user_id": "bob"}}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SWITCHES), ids=list(SWITCHES))
def test_no_request_field_switches_the_user(api: Api, case: str) -> None:
    method, route, options = SWITCHES[case]
    before = (api.stats("alice"), api.stats("bob"))
    refused = api.call(method, route, "alice", expect=422, **options)
    header = api.call("GET", "/v1/me", headers={**_auth("alice"), "X-User-Id": "bob", "X-Namespace": "other"})

    assert refused["error"] == "InvalidArgumentError" and SECRET not in json.dumps(refused)
    assert header == {"namespace": NAMESPACE, "user_id": "alice"}  # headers other than the key are no authority
    assert (api.stats("alice"), api.stats("bob")) == before


def test_a_body_too_large_or_of_unknown_length_is_refused_unread(api: Api) -> None:
    before = api.stats("alice")
    large = api.call("POST", "/v1/import", "alice", content=b"x" * (1024 * 1024 + 1), expect=413)
    chunked = api.call("POST", "/v1/import", "alice", content=iter([b'{"kind": "header"}\n']), expect=411)

    assert large["error"] == "BodyTooLarge" and chunked["error"] == "LengthRequired"
    assert api.stats("alice") == before


# -- a client generated from the schema ---------------------------------------------------------


def test_a_client_generated_from_the_schema_calls_the_server(api: Api, tmp_path: Path) -> None:
    (tmp_path / "openapi.json").write_text(json.dumps(api.schema))
    (tmp_path / "config.yaml").write_text("package_name_override: tiermem_rest_client\npost_hooks: []\n")
    generated = subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", "openapi.json", "--meta", "none",
         "--output-path", "tiermem_rest_client", "--config", "config.yaml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert generated.returncode == 0, generated.stdout + generated.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        client_module = importlib.import_module("tiermem_rest_client")
        recall = importlib.import_module("tiermem_rest_client.api.memory.recall")
        stats = importlib.import_module("tiermem_rest_client.api.govern.stats")
        models = importlib.import_module("tiermem_rest_client.models")
        alice = client_module.AuthenticatedClient(base_url=api.url, token=KEYS["alice"][0])
        stranger = client_module.AuthenticatedClient(base_url=api.url, token="mallory-key-00000000000")
        with alice, stranger:
            reply = recall.sync(client=alice, body=models.RecallArguments(query="penicillin allergy", limit=3))
            refused = stats.sync_detailed(client=stranger)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.split(".")[0] == "tiermem_rest_client"]:
            del sys.modules[name]

    assert isinstance(reply, models.RecallReply)
    assert [item["text"] for item in reply.results] == [OWN_FACT]
    assert refused.status_code == 401 and isinstance(refused.parsed, models.ErrorBody)
    assert refused.parsed.error == "Unauthorized"


# -- the operator's configuration ---------------------------------------------------------------


def test_a_bad_keys_file_stops_the_server_without_quoting_a_key(tmp_path: Path) -> None:
    """Before the store is opened; each way a keys file is wrong is tested in test_rest_keys_and_statuses.py."""
    (tmp_path / "keys.json").write_text(json.dumps([{"key": "short-secret", "user_id": "alice"}]))
    done = subprocess.run(
        [*servers.tiermem_command(), "serve", "--store", str(tmp_path / "store"), "--model", "rules",
         "--keys", str(tmp_path / "keys.json"), "--port", str(servers.free_port())],
        env={**os.environ, **servers.server_env(tmp_path)}, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip

    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("tiermem: error: the keys file's entry 1: key: a key must have at least 16")
    assert "short-secret" not in done.stdout + done.stderr
    assert not (tmp_path / "store").exists()


def test_a_missing_store_is_refused(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text(json.dumps([{"key": KEYS["alice"][0], "user_id": "alice"}]))
    done = subprocess.run(
        [*servers.tiermem_command(), "serve", "--store", str(tmp_path / "typo"), "--model", "rules",
         "--keys", str(tmp_path / "keys.json"), "--port", str(servers.free_port())],
        env={**os.environ, **servers.server_env(tmp_path)}, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip

    assert done.returncode == 1 and "no tiermem store at" in done.stderr
    assert not (tmp_path / "typo").exists()


def test_a_secret_sent_over_rest_is_never_stored_or_served(api: Api) -> None:
    key = "sk-proj-" + "Q7vX2mLp9RtZ4wKc8NbH3yJd6FsA1eGu5TqW0oIx7VnM2rPk"
    turn = {"role": "user", "content": f"My OpenAI key is {key}, keep it safe."}
    api.call("POST", "/v1/capture", "erin", json={"session_id": "s-1", "messages": [turn]})
    listed = api.call("GET", "/v1/memories", "erin", params={"limit": 50})["items"]
    found = api.call("POST", "/v1/recall", "erin", json={"query": "OpenAI key", "limit": 5})["results"]
    texts = [m["text"] for m in listed + found]
    assert texts and not any(key in t for t in texts)
    assert any("[secret:api-key]" in t for t in texts)
