"""Agent tools: OpenAI-style schemas, error envelopes, context binding and litellm-style execution."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.prebuilt import prebuilt
from tiermem import (
    HashingEmbedder,
    InvalidArgumentError,
    MemoryCapability,
    MemoryContext,
    MemoryTool,
    RecallArguments,
    TiermemError,
    Toolset,
    create_memory_capability,
    system,
)
from tiermem.memory.testing import FrozenClock

with warnings.catch_warnings():  # litellm's pydantic types warn on import; that is not ours to fix
    warnings.simplefilter("ignore")
    from litellm.types.utils import Message as LiteLLMMessage

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SECRET = "The vault code is 4711."
USER = MemoryContext(user_id="u-1", session_id="s-1")  # conftest's ctx
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)  # conftest's clock


def _relational(store: Path, clock: FrozenClock) -> MemoryCapability:
    return create_memory_capability(
        store=str(store), embedder=HashingEmbedder(256), clock=clock, semantic={"relations": True}
    )


def _write_two_facts(folder: Path) -> None:
    async def write() -> None:
        mem = _relational(folder, FrozenClock(START))
        await mem.add_semantic_fact(USER, "Moni is allergic to shellfish.", subject="Moni")
        await mem.add_semantic_fact(USER, "The user plays tennis on Sundays.")

    asyncio.run(write())


@pytest.fixture
def relational(tmp_path_factory: pytest.TempPathFactory, clock: FrozenClock, ctx: MemoryContext) -> MemoryCapability:
    """A capability with relations, holding two facts of ctx's user (written at the clock's time).

    The store is written once per test session (tests/prebuilt.py); each test opens its own copy."""
    assert (ctx, clock.now()) == (USER, START)
    return _relational(prebuilt(tmp_path_factory, "tools-two-facts", _write_two_facts), clock)


@pytest.fixture
def tools(relational: MemoryCapability, ctx: MemoryContext) -> Toolset:
    return relational.tools(ctx)


@pytest.fixture
async def recall_tool(tools: Toolset) -> MemoryTool:
    tool = tools.get("memory_recall")
    assert tool is not None
    return tool


# -- schemas ------------------------------------------------------------------------------------


def test_both_tools_are_offered(tools: Toolset) -> None:
    assert [t.name for t in tools] == ["memory_recall", "memory_connect"]
    assert len(tools) == 2
    assert tools[0].name == "memory_recall"
    assert tools.get("memory_delete") is None


@pytest.mark.parametrize("name", ["memory_recall", "memory_connect"])
def test_schema_is_openai_style(tools: Toolset, name: str) -> None:
    tool = tools.get(name)
    assert tool is not None
    schema = tool.schema()
    assert schema["type"] == "function"
    function = schema["function"]
    assert TOOL_NAME.match(function["name"])
    assert function["name"] == name
    assert isinstance(function["description"], str) and function["description"]
    parameters = function["parameters"]
    assert parameters["type"] == "object"
    assert parameters["additionalProperties"] is False
    assert parameters["properties"]
    assert set(parameters.get("required", [])) <= set(parameters["properties"])
    assert json.loads(json.dumps(schema)) == schema


def test_schemas_lists_every_tool(tools: Toolset) -> None:
    assert tools.schemas() == [t.schema() for t in tools]


def test_recall_schema_requires_a_query(recall_tool: MemoryTool) -> None:
    parameters = recall_tool.parameters
    assert parameters["required"] == ["query"]
    assert {"query", "limit", "tiers", "subject", "since", "until", "verbose", "categories"} == set(
        parameters["properties"]
    )
    assert not {"user_id", "namespace", "session_id"} & set(parameters["properties"])


def test_connect_schema_uses_the_from_alias(tools: Toolset) -> None:
    connect = tools.get("memory_connect")
    assert connect is not None
    assert "from" in connect.parameters["properties"]
    assert "from_" not in connect.parameters["properties"]
    assert connect.parameters["required"] == ["from"]


@pytest.mark.parametrize(
    "name", ["memory recall", "", "x" * 65, "recall!", "récall"], ids=["space", "empty", "65", "bang", "accent"]
)
def test_tool_names_are_validated(name: str) -> None:
    async def handler(args: Any) -> list[Any]:
        return []

    with pytest.raises(ValueError):
        MemoryTool(name=name, description="d", arguments=RecallArguments, handler=handler)


# -- calls --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    ['{"query": "shellfish allergy"}', {"query": "shellfish allergy"}, '{"query": "shellfish allergy", "limit": 3}'],
    ids=["json-string", "dict", "with-limit"],
)
async def test_call_returns_results(recall_tool: MemoryTool, arguments: str | dict[str, Any]) -> None:
    envelope = await recall_tool.call(arguments)
    assert envelope["ok"] is True
    assert envelope["error"] is None
    assert envelope["results"][0]["text"] == "Moni is allergic to shellfish."
    assert envelope["results"][0]["subject"] == "moni"
    assert envelope["results"][0]["tier"] == "semantic"
    assert json.loads(json.dumps(envelope)) == envelope


# -- compact and verbose results ----------------------------------------------------------------

COMPACT_KEYS = {"id", "tier", "subject", "date", "text"}


async def test_results_are_compact_by_default(recall_tool: MemoryTool, relational: MemoryCapability) -> None:
    envelope = await recall_tool.call({"query": "shellfish allergy"})
    first = envelope["results"][0]
    assert set(first) == COMPACT_KEYS
    assert first == {
        "id": first["id"],
        "tier": "semantic",
        "subject": "moni",
        "date": "2026-03-01",  # the frozen clock's day
        "text": "Moni is allergic to shellfish.",
    }


@pytest.mark.parametrize("verbose", [True, False], ids=["verbose", "compact"])
async def test_verbose_returns_every_field(recall_tool: MemoryTool, verbose: bool) -> None:
    envelope = await recall_tool.call({"query": "shellfish allergy", "verbose": verbose})
    first = envelope["results"][0]
    full = {"confidence", "score", "relevance", "provenance", "metadata", "created_at", "updated_at"}
    assert (full <= set(first)) is verbose
    assert COMPACT_KEYS - {"date"} <= set(first)


async def test_compact_ids_match_the_verbose_ids(recall_tool: MemoryTool) -> None:
    compact = await recall_tool.call({"query": "tennis shellfish"})
    verbose = await recall_tool.call({"query": "tennis shellfish", "verbose": True})
    assert [r["id"] for r in compact["results"]] == [r["id"] for r in verbose["results"]]
    assert len(json.dumps(compact["results"])) < len(json.dumps(verbose["results"])) / 2


async def test_compact_date_is_when_the_fact_holds_from(
    relational: MemoryCapability, ctx: MemoryContext, recall_tool: MemoryTool
) -> None:
    await relational.add_semantic_fact(ctx, "The user moved to Lisbon.", valid_from=datetime(2024, 5, 17, tzinfo=UTC))
    envelope = await recall_tool.call({"query": "moved to Lisbon"})
    assert envelope["results"][0]["text"] == "The user moved to Lisbon."
    assert envelope["results"][0]["date"] == "2024-05-17"


async def test_verbose_must_be_a_boolean(recall_tool: MemoryTool) -> None:
    envelope = await recall_tool.call({"query": "tennis", "verbose": "please"})
    assert envelope["ok"] is False and "verbose" in envelope["error"]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"query": "tennis", "tiers": ["working"]}, []),
        ({"query": "tennis", "subject": "Moni"}, []),
        ({"query": "tennis", "subject": "user"}, ["The user plays tennis on Sundays."]),
        ({"query": "tennis", "tiers": ["semantic"], "limit": 1}, ["The user plays tennis on Sundays."]),
    ],
    ids=["other-tier", "other-subject", "subject", "tier-and-limit"],
)
async def test_call_honours_filters(recall_tool: MemoryTool, arguments: dict[str, Any], expected: list[str]) -> None:
    envelope = await recall_tool.call(arguments)
    assert envelope["ok"] is True
    assert [r["text"] for r in envelope["results"]] == expected


BAD_ARGUMENTS: list[tuple[str, Any]] = [
    ("missing-query", {}),
    ("empty-query", {"query": ""}),
    ("query-too-long", {"query": "x" * 2001}),
    ("query-not-string", {"query": ["tennis"]}),
    ("limit-0", {"query": "tennis", "limit": 0}),
    ("limit-51", {"query": "tennis", "limit": 51}),
    ("limit-ten", {"query": "tennis", "limit": "ten"}),
    ("unknown-tier", {"query": "tennis", "tiers": ["secrets"]}),
    ("tiers-not-list", {"query": "tennis", "tiers": 3}),
    ("bad-subject", {"query": "tennis", "subject": "<script>"}),
    ("extra-user_id", {"query": "tennis", "user_id": "victim"}),
    ("extra-namespace", {"query": "tennis", "namespace": "other-tenant"}),
    ("extra-session_id", {"query": "tennis", "session_id": "s-9"}),
    ("extra-ctx", {"query": "tennis", "ctx": {"user_id": "victim"}}),
    ("non-object-json", "[1]"),
    ("json-null", "null"),
    ("json-string", '"tennis"'),
    ("invalid-json", "{"),
    ("empty-string", ""),
    ("none", None),
    ("list", [1]),
    ("int", 42),
]


@pytest.mark.parametrize("arguments", [a for _, a in BAD_ARGUMENTS], ids=[n for n, _ in BAD_ARGUMENTS])
async def test_bad_arguments_give_an_error_envelope(recall_tool: MemoryTool, arguments: Any) -> None:
    envelope = await recall_tool.call(arguments)
    assert envelope["ok"] is False
    assert isinstance(envelope["error"], str) and envelope["error"]
    assert envelope["results"] == []


@pytest.mark.parametrize(
    "arguments",
    [{}, {"from": ""}, {"from": "user", "max_hops": 0}, {"from": "user", "user_id": "victim"}, "{", "[1]"],
    ids=["missing-from", "empty-from", "hops-0", "extra-user_id", "invalid-json", "non-object"],
)
async def test_connect_bad_arguments_give_an_error_envelope(tools: Toolset, arguments: Any) -> None:
    connect = tools.get("memory_connect")
    assert connect is not None
    envelope = await connect.call(arguments)
    assert envelope["ok"] is False and envelope["error"]


async def test_connect_on_a_capability_without_relations_is_an_envelope(
    capability: MemoryCapability, ctx: MemoryContext
) -> None:
    envelope = await capability.relations.connect_tool(ctx).call({"from": "user"})
    assert envelope["ok"] is False
    assert "relations" in envelope["error"]


# -- binding ------------------------------------------------------------------------------------


@pytest.fixture
async def victim_and_attacker(capability: MemoryCapability) -> tuple[MemoryContext, MemoryContext, str]:
    victim = MemoryContext(user_id="victim", session_id="s-1")
    attacker = MemoryContext(user_id="attacker", session_id="s-1")
    await capability.add_semantic_fact(victim, SECRET)
    await capability.add_working_memory(victim, "The vault code came up again.")
    own = await capability.add_semantic_fact(attacker, "The attacker forgot the vault code.")
    return victim, attacker, own.id


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "vault code", "user_id": "victim"},
        {"query": "vault code", "namespace": "default", "user_id": "victim"},
        {"query": "vault code", "session_id": "s-1", "user_id": "victim"},
        '{"query": "vault code", "user_id": "victim"}',
    ],
    ids=["user_id", "namespace", "session_id", "json"],
)
async def test_authority_arguments_are_refused(
    capability: MemoryCapability, victim_and_attacker: tuple[MemoryContext, MemoryContext, str], arguments: Any
) -> None:
    _, attacker, _ = victim_and_attacker
    envelope = await capability.tools(attacker)[0].call(arguments)
    assert envelope["ok"] is False
    assert not re.search(r"\b4711\b", json.dumps(envelope))  # as a number, not a score's digits


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "vault code"},
        {"query": "4711"},
        {"query": "vault code", "subject": "user"},
        {"query": "code", "limit": 50},
    ],
    ids=["cue", "secret-itself", "subject", "limit"],
)
async def test_results_come_only_from_the_bound_user(
    capability: MemoryCapability, victim_and_attacker: tuple[MemoryContext, MemoryContext, str], arguments: Any
) -> None:
    _, attacker, own_id = victim_and_attacker
    envelope = await capability.tools(attacker)[0].call(arguments)
    assert envelope["ok"] is True
    assert {r["id"] for r in envelope["results"]} <= {own_id}
    assert not re.search(r"\b4711\b", json.dumps(envelope))  # as a number, not a score's digits


async def test_victim_tool_still_sees_its_own_memory(
    capability: MemoryCapability, victim_and_attacker: tuple[MemoryContext, MemoryContext, str]
) -> None:
    victim, _, _ = victim_and_attacker
    envelope = await capability.tools(victim)[0].call({"query": "vault code"})
    assert SECRET in [r["text"] for r in envelope["results"]]


# -- Toolset.execute ----------------------------------------------------------------------------


def _calls() -> list[dict[str, Any]]:
    return [
        {"id": "c1", "type": "function", "function": {"name": "memory_recall", "arguments": '{"query": "shellfish"}'}},
        {"id": "c2", "type": "function", "function": {"name": "memory_delete", "arguments": "{}"}},
        {"id": "c3", "type": "function", "function": {"name": "memory_recall", "arguments": '{"user_id": "x"}'}},
        {"id": "c4", "type": "function", "function": {"name": "memory_connect", "arguments": '{"from": "user"}'}},
    ]


def _dict_message() -> Any:
    return {"role": "assistant", "content": None, "tool_calls": _calls()}


def _litellm(**fields: Any) -> Any:
    with warnings.catch_warnings():  # litellm builds pydantic schemas lazily, with the same warnings
        warnings.simplefilter("ignore")
        return LiteLLMMessage(**fields)


def _litellm_message() -> Any:
    return _litellm(role="assistant", content=None, tool_calls=_calls())


@pytest.mark.parametrize("build", [_dict_message, _litellm_message], ids=["dict", "litellm-message"])
async def test_execute_answers_every_tool_call(tools: Toolset, build: Any) -> None:
    replies = await tools.execute(build())
    assert [r["role"] for r in replies] == ["tool"] * 4
    assert [r["tool_call_id"] for r in replies] == ["c1", "c2", "c3", "c4"]
    assert [r["name"] for r in replies] == ["memory_recall", "memory_delete", "memory_recall", "memory_connect"]
    envelopes = [json.loads(r["content"]) for r in replies]
    assert [e["ok"] for e in envelopes] == [True, False, False, True]
    assert envelopes[0]["results"][0]["text"] == "Moni is allergic to shellfish."
    assert "memory_delete" in envelopes[1]["error"]


@pytest.mark.parametrize(
    "build",
    [
        lambda: {"role": "assistant", "content": "hello"},
        lambda: {"role": "assistant", "content": "hello", "tool_calls": None},
        lambda: {"role": "assistant", "content": "hello", "tool_calls": []},
        lambda: _litellm(role="assistant", content="hello"),
    ],
    ids=["no-key", "none", "empty", "litellm-no-calls"],
)
async def test_execute_without_tool_calls_returns_nothing(tools: Toolset, build: Any) -> None:
    assert await tools.execute(build()) == []


@pytest.mark.parametrize(
    "call",
    [
        {"id": "c9", "type": "function", "function": {"name": None, "arguments": "{}"}},
        {"id": "c9", "type": "function", "function": {"name": 7, "arguments": "{}"}},
        {"id": "c9", "type": "function", "function": {"arguments": "{}"}},
        {"id": "c9", "type": "function", "function": {"name": "memory_recall", "arguments": None}},
    ],
    ids=["name-none", "name-int", "name-missing", "arguments-none"],
)
async def test_execute_malformed_calls_give_error_envelopes(tools: Toolset, call: dict[str, Any]) -> None:
    (reply,) = await tools.execute({"role": "assistant", "tool_calls": [call]})
    assert reply["role"] == "tool" and reply["tool_call_id"] == "c9"
    assert json.loads(reply["content"])["ok"] is False


async def test_context_preset_tools_execute_nothing_but_errors(
    store_path: str, ctx: MemoryContext, clock: FrozenClock
) -> None:
    cap = create_memory_capability(store=store_path, embedder=HashingEmbedder(256), clock=clock, preset="context")
    (reply,) = await cap.tools(ctx).execute(_dict_message() | {"tool_calls": _calls()[:1]})
    assert json.loads(reply["content"])["ok"] is False


async def test_renamed_tool_keeps_schema_and_behaviour(recall_tool: MemoryTool) -> None:
    short = recall_tool.renamed("recall")
    assert (short.name, short.parameters, short.description) == (
        "recall",
        recall_tool.parameters,
        recall_tool.description,
    )
    assert (await short.call({"query": "shellfish"}))["results"] == (await recall_tool.call({"query": "shellfish"}))[
        "results"
    ]
    assert "invalid arguments for recall:" in (await short.call({"user_id": "x"}))["error"]


# -- never raises -------------------------------------------------------------------------------


def _nested(depth: int) -> dict[str, Any]:
    """``{"query": [[[...]]]}`` built without recursion."""
    inner: Any = "tennis"
    for _ in range(depth):
        inner = [inner]
    return {"query": inner}


def _itself() -> dict[str, Any]:
    arguments: dict[str, Any] = {"query": "tennis"}
    arguments["subject"] = arguments  # contains itself: only a walk that bounds depth terminates
    return arguments


DEEP, LARGE, OBJECT = "nested deeper than 20 levels", "larger than 64 KiB", "must be a JSON object"
HOSTILE: list[tuple[str, Any, str]] = [
    ("deep-json-lists", "[" * 5000 + "]" * 5000, DEEP),
    ("deep-json-objects", '{"a":' * 5000 + "1" + "}" * 5000, DEEP),
    ("deep-json-unclosed", '{"a":' * 10_000, DEEP),
    ("deep-json-under-query", '{"query": ' + "[" * 3000 + '"x"' + "]" * 3000 + "}", DEEP),
    ("depth-21", json.dumps(_nested(20)), DEEP),
    ("deep-dict", _nested(5000), DEEP),
    ("self-referencing-dict", _itself(), DEEP),
    ("huge-json", json.dumps({"query": "x" * (1 << 20)}), LARGE),
    ("huge-json-multibyte", json.dumps({"query": "é" * 40_000}, ensure_ascii=False), LARGE),
    ("huge-dict", {"query": "x" * (1 << 20)}, LARGE),
    ("many-keys", {f"k{i}": i for i in range(100_000)}, LARGE),
    ("huge-int", '{"query": "tennis", "limit": ' + "9" * 5000 + "}", "integer string conversion"),
    ("lone-surrogate", '{"query": "\\ud800"}', "not valid Unicode"),
    ("nan", '{"query": "tennis", "limit": NaN}', "limit"),
    ("bytes", b'{"query": "tennis"}', OBJECT),
    ("object", object(), OBJECT),
]


@pytest.mark.parametrize(("arguments", "message"), [(a, m) for _, a, m in HOSTILE], ids=[n for n, _, _ in HOSTILE])
async def test_hostile_arguments_give_an_error_envelope(recall_tool: MemoryTool, arguments: Any, message: str) -> None:
    envelope = await recall_tool.call(arguments)
    assert envelope["ok"] is False and envelope["results"] == []
    assert envelope["error"].startswith("invalid arguments for memory_recall:")
    assert message in envelope["error"], envelope["error"]
    assert len(envelope["error"]) <= 1000


@pytest.mark.parametrize(
    ("arguments", "ok"),
    [(json.dumps(_nested(19)), False), (json.dumps({"query": "tennis", "tiers": ["semantic"]}), True)],
    ids=["depth-20-validated", "two-levels"],
)
async def test_arguments_within_the_limits_are_validated_as_usual(
    recall_tool: MemoryTool, arguments: str, ok: bool
) -> None:
    envelope = await recall_tool.call(arguments)
    assert envelope["ok"] is ok
    assert ok or ("query" in envelope["error"] and DEEP not in envelope["error"])


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (InvalidArgumentError("the cue is odd"), "memory_recall failed: the cue is odd"),
        (RuntimeError("secret internals /srv/db"), "memory_recall failed: internal error"),
        (RecursionError("maximum recursion depth exceeded"), "memory_recall failed: internal error"),
    ],
    ids=["tiermem-error", "unexpected", "recursion"],
)
async def test_a_failing_handler_gives_an_error_envelope(
    error: Exception, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def handler(args: Any) -> list[Any]:
        raise error

    tool = MemoryTool(name="memory_recall", description="d", arguments=RecallArguments, handler=handler)
    with caplog.at_level(logging.ERROR, logger="tiermem.tools"):
        envelope = await tool.call({"query": "tennis"})
    assert envelope["ok"] is False and envelope["error"].startswith(expected)
    assert "/srv/db" not in envelope["error"]
    logged = [r for r in caplog.records if r.name == "tiermem.tools"]
    assert bool(logged) is (not isinstance(error, TiermemError))
    assert all(r.exc_info is not None for r in logged)  # with its traceback


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "tool_calls": 7},
        {"role": "assistant", "tool_calls": "memory_recall"},
        {"role": "assistant", "tool_calls": {"id": "c1"}},
        {"role": "assistant", "tool_calls": [None, 3, "x", {"function": 5}, {"id": "c9", "function": {"name": [1]}}]},
        None,
        42,
    ],
    ids=["int", "str", "dict", "junk-calls", "none", "int-message"],
)
async def test_execute_survives_a_malformed_message(tools: Toolset, message: Any) -> None:
    replies = await tools.execute(message)
    assert all(json.loads(r["content"])["ok"] is False for r in replies)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(["query", "limit", "tiers", "subject", "verbose", "from", "to", "text", "kind", "id", "user_id"])
ARGUMENTS = st.one_of(
    JSONISH,
    JSONISH.map(json.dumps),
    st.dictionaries(KEYS, JSONISH, max_size=4),
    st.dictionaries(KEYS, JSONISH, max_size=4).map(json.dumps),
    st.text(max_size=40),
    st.integers(1, 3000).flatmap(lambda n: st.sampled_from(["[" * n, "{" * n, '{"a":' * n, "[" * n + "]" * n])),
)
NAMES = st.sampled_from(["memory_recall", "memory_connect", "memory_remember", "memory_forget", "nope", ""])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(NAMES, ARGUMENTS), min_size=1, max_size=3))
def test_execute_never_raises(write_tools: Any, calls: list[tuple[str, Any]]) -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(calls)
        ],
    }
    replies = write_tools.execute(message)
    assert [r["tool_call_id"] for r in replies] == [f"c{i}" for i in range(len(calls))]
    for reply in replies:
        envelope = json.loads(reply["content"])
        assert isinstance(envelope["ok"], bool)
        assert envelope["ok"] or envelope["error"]


@pytest.fixture
def write_tools(store_path: str, clock: FrozenClock) -> Any:
    """Every tool, the write tools included, behind the blocking facade (Hypothesis drives sync tests)."""
    mem = system(
        model="rules", store=store_path, embedder=HashingEmbedder(256), clock=clock, semantic={"relations": True}
    ).blocking()
    ctx = MemoryContext(user_id="u-1", session_id="s-1")
    mem.add_semantic_fact(ctx, "The user plays tennis on Sundays.")
    return mem.tools(ctx, write=True)
