"""The agent's write tools: opt-in, bound to the context's user, refusals that write nothing."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tiermem import (
    ConfigurationError,
    HashingEmbedder,
    MemoryCapability,
    MemoryContext,
    MemorySystem,
    Toolset,
    system,
)
from tiermem.memory._store._user_tables import USER_TABLES
from tiermem.memory.testing import FrozenClock

AUTHORITY = {"user_id", "user", "namespace", "session_id", "ctx", "context"}
SECRET = "The vault code is 4711."
NEIGHBOUR = MemoryContext(user_id="bob")


@pytest.fixture
def mem(store_path: str, clock: FrozenClock) -> MemorySystem:
    return system(model="rules", store=store_path, embedder=HashingEmbedder(256), clock=clock)


@pytest.fixture
async def tools(mem: MemorySystem, ctx: MemoryContext) -> Toolset:
    await mem.add_semantic_fact(NEIGHBOUR, SECRET)  # "bob" is a user of this namespace
    return mem.tools(ctx, write=True)


def _rows(mem: MemorySystem) -> dict[str, int]:
    """Every row of every user, per table: a refusal must leave these unchanged."""
    return {table: mem.store.count(table) for table in USER_TABLES}


async def _call(tools: Toolset, name: str, arguments: Any) -> dict[str, Any]:
    tool = tools.get(name)
    assert tool is not None, name
    return await tool.call(arguments)


# -- opt-in -------------------------------------------------------------------------------------


async def test_write_tools_are_offered_only_when_asked(mem: MemorySystem, ctx: MemoryContext) -> None:
    assert [t.name for t in mem.tools(ctx)] == ["memory_recall"]
    assert [t.name for t in mem.tools(ctx, write=True)] == ["memory_recall", "memory_remember", "memory_forget"]
    assert [t.name for t in mem.blocking().tools(ctx, write=True)][-2:] == ["memory_remember", "memory_forget"]


def test_a_capability_is_the_read_side_and_offers_no_write_tools(
    capability: MemoryCapability, ctx: MemoryContext
) -> None:
    with pytest.raises(ConfigurationError, match=r"system\(\.\.\.\)\.tools\(ctx, write=True\)"):
        capability.tools(ctx, write=True)


@pytest.mark.parametrize("write", ["yes", 1, None], ids=["str", "int", "none"])
def test_write_must_be_a_boolean(mem: MemorySystem, ctx: MemoryContext, write: Any) -> None:
    with pytest.raises(ConfigurationError, match="write must be True or False"):
        mem.tools(ctx, write=write)


def test_without_the_semantic_tier_only_forget_is_offered(
    store_path: str, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = system(model="rules", store=store_path, embedder=HashingEmbedder(256), clock=clock, semantic=False)
    assert [t.name for t in mem.tools(ctx, write=True)] == ["memory_recall", "memory_forget"]


@pytest.mark.parametrize(
    ("name", "required"), [("memory_remember", ["text"]), ("memory_forget", ["id"])], ids=["remember", "forget"]
)
def test_schemas_are_openai_style_without_authority(tools: Toolset, name: str, required: list[str]) -> None:
    tool = tools.get(name)
    assert tool is not None
    schema = tool.schema()
    assert schema["type"] == "function" and schema["function"]["name"] == name
    parameters = schema["function"]["parameters"]
    assert parameters["type"] == "object" and parameters["additionalProperties"] is False
    assert parameters["required"] == required
    assert not AUTHORITY & set(parameters["properties"])
    assert json.loads(json.dumps(schema)) == schema


# -- remember -----------------------------------------------------------------------------------


async def test_remember_then_recall_finds_it_marked_agent_written(
    mem: MemorySystem, tools: Toolset, ctx: MemoryContext
) -> None:
    first = await mem.capture(ctx, [{"role": "user", "content": "Hi, I just got back from Porto."}])
    latest = await mem.capture(ctx, [{"role": "user", "content": "Please remember that my sister is called Ana."}])
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {
                    "name": "memory_remember",
                    "arguments": json.dumps({"text": "The user's sister is called Ana.", "kind": "fact"}),
                },
            }
        ],
    }
    (reply,) = await tools.execute(message)
    stored = json.loads(reply["content"])
    found = await _call(tools, "memory_recall", {"query": "sister Ana", "verbose": True})

    assert stored["ok"] is True, stored
    assert stored["results"][0]["text"] == "The user's sister is called Ana."
    hit = next(r for r in found["results"] if r["id"] == stored["results"][0]["id"])
    assert hit["tier"] == "semantic" and hit["subject"] == "user"
    assert hit["metadata"]["source"] == "agent"
    assert hit["metadata"]["kind"] == "fact"
    assert hit["provenance"] == [latest.turn.id]
    assert first.turn.id != latest.turn.id


async def test_remember_outside_a_session_has_no_turn_as_provenance(mem: MemorySystem) -> None:
    await mem.add_semantic_fact(NEIGHBOUR, SECRET)
    tools = mem.tools(MemoryContext(user_id="u-1"), write=True)
    stored = await _call(tools, "memory_remember", {"text": "The user prefers tea.", "kind": "preference"})
    (fact,) = await mem.facts(MemoryContext(user_id="u-1"))
    assert stored["ok"] is True
    assert (fact.provenance, fact.metadata) == ((), {"source": "agent", "kind": "preference"})


@pytest.mark.parametrize(
    ("subject", "stored_as"),
    [("moni", "moni"), ("acme-corp", "acme-corp"), ("user", "user"), ("Caroline", "user"), ("Mo", "moni")],
    ids=["name", "organisation", "user", "alias-of-the-user", "alias-of-a-friend"],
)
async def test_remember_accepts_canonical_subjects_and_the_users_aliases(
    mem: MemorySystem, tools: Toolset, ctx: MemoryContext, subject: str, stored_as: str
) -> None:
    await mem.add_alias(ctx, "Caroline")
    await mem.add_alias(ctx, "Mo", "moni")
    stored = await _call(tools, "memory_remember", {"text": "Likes sailing.", "subject": subject})
    assert stored["ok"] is True, stored
    assert [f.subject for f in await mem.facts(ctx)] == [stored_as]


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("not-canonical-name", {"text": "Moni plays cello.", "subject": "Moni"}, "use 'moni'"),
    ("not-canonical-org", {"text": "Acme hires.", "subject": "Acme Corp"}, "use 'acme-corp'"),
    ("self-word", {"text": "Likes tea.", "subject": "me"}, "use 'user'"),
    ("not-a-name", {"text": "Hi.", "subject": "<script>"}, "invalid subject"),
    ("another-users-id", {"text": "The vault code is 0000.", "subject": "bob"}, "id of a user"),
    ("own-user-id", {"text": "Likes tea.", "subject": "u-1"}, "use 'user'"),
    ("user_id-argument", {"text": "The vault code is 0000.", "user_id": "bob"}, "invalid arguments"),
    ("namespace-argument", {"text": "The vault code is 0000.", "namespace": "other"}, "invalid arguments"),
    ("empty-text", {"text": ""}, "invalid arguments"),
    ("unknown-kind", {"text": "Likes tea.", "kind": "secret"}, "invalid arguments"),
    ("subject-too-long", {"text": "Likes tea.", "subject": "a" * 65}, "invalid arguments"),
]


@pytest.mark.parametrize(("arguments", "message"), [(a, m) for _, a, m in REFUSED], ids=[i for i, _, _ in REFUSED])
async def test_a_refused_remember_writes_nothing(
    mem: MemorySystem, tools: Toolset, arguments: dict[str, Any], message: str
) -> None:
    before = _rows(mem)
    envelope = await _call(tools, "memory_remember", arguments)
    assert envelope["ok"] is False and envelope["results"] == []
    assert message in envelope["error"], envelope["error"]
    assert _rows(mem) == before
    assert [f.text for f in await mem.facts(NEIGHBOUR)] == [SECRET]


async def test_a_user_id_of_another_namespace_is_just_a_name(
    mem: MemorySystem, tools: Toolset, ctx: MemoryContext
) -> None:
    await mem.add_semantic_fact(MemoryContext(namespace="other-app", user_id="carol"), "Carol's own fact.")
    stored = await _call(tools, "memory_remember", {"text": "Carol is the user's neighbour.", "subject": "carol"})
    assert stored["ok"] is True, stored
    assert [f.subject for f in await mem.facts(ctx)] == ["carol"]


# -- forget -------------------------------------------------------------------------------------


async def test_forget_deletes_the_users_own_memory(mem: MemorySystem, tools: Toolset, ctx: MemoryContext) -> None:
    own = await mem.add_semantic_fact(ctx, "The user is allergic to penicillin.")
    stored = await _call(tools, "memory_remember", {"text": "The user's sister is called Ana."})
    forgotten = await _call(tools, "memory_forget", {"id": own.id})
    again = await _call(tools, "memory_forget", {"id": stored["results"][0]["id"]})

    assert forgotten["ok"] is True and forgotten["results"][0]["id"] == own.id
    assert forgotten["results"][0]["text"] == "The user is allergic to penicillin."
    assert again["ok"] is True
    assert await mem.facts(ctx, include_inactive=True) == []
    recalled = await _call(tools, "memory_recall", {"query": "penicillin allergy sister"})
    assert recalled["results"] == []


@pytest.mark.parametrize("whose", ["another-user", "unknown"], ids=["foreign-id", "unknown-id"])
async def test_forget_of_an_id_not_the_users_is_not_found_and_deletes_nothing(
    mem: MemorySystem, tools: Toolset, whose: str
) -> None:
    (secret,) = await mem.facts(NEIGHBOUR)
    rid = secret.id if whose == "another-user" else "fact_0000000000000000"
    before = _rows(mem)
    envelope = await _call(tools, "memory_forget", {"id": rid})
    assert envelope["ok"] is False and "no memory" in envelope["error"]
    assert not re.search(r"\b4711\b", json.dumps(envelope))  # as a number, not a score's digits
    assert _rows(mem) == before
    assert [f.text for f in await mem.facts(NEIGHBOUR)] == [SECRET]


async def test_forget_refuses_a_memory_the_user_pinned(mem: MemorySystem, tools: Toolset, ctx: MemoryContext) -> None:
    allergy = await mem.add_semantic_fact(ctx, "The user is allergic to penicillin.")
    await mem.pin(ctx, allergy.id)
    before = _rows(mem)
    envelope = await _call(tools, "memory_forget", {"id": allergy.id})
    assert envelope["ok"] is False and "pinned" in envelope["error"]
    assert _rows(mem) == before


def test_the_blocking_facade_runs_the_write_tools(mem: MemorySystem) -> None:
    user = MemoryContext(user_id="u-2")
    tools = mem.blocking().tools(user, write=True)
    envelope = tools.get("memory_remember").call({"text": "The user rows on Sundays."})
    assert envelope["ok"] is True
    assert [f.metadata["source"] for f in mem.blocking().facts(user)] == ["agent"]
