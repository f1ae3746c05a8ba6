"""The OpenAI Agents SDK's own session cases, run against TiermemSession.

The SDK ships no conformance suite for ``Session``; these are the behavioural cases of its SQLiteSession
tests (openai/openai-agents-python, tests/test_session.py: test_sqlite_session_memory_direct,
test_sqlite_session_memory_pop_item, test_session_memory_pop_different_sessions,
test_sqlite_session_get_items_with_limit, test_session_memory_different_sessions_parametrized), ported so
they drive our adapter, plus what tiermem keeps of each case.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from agents import Agent, Runner, SQLiteSession, TResponseInputItem, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message

from tiermem import HashingEmbedder, MemoryContext, MemorySystem, TiermemSession, system

SIX = [f"{word} {n}" for n in (1, 2, 3) for word in ("Message", "Response")]


def _items(*texts: str) -> list[TResponseInputItem]:
    """Chat messages, the user's and the assistant's in turn unless a text starts the SDK's way."""
    roles = ["assistant" if t.startswith(("Response", "Hi there")) else "user" for t in texts]
    return cast("list[TResponseInputItem]", [{"role": r, "content": t} for r, t in zip(roles, texts, strict=True)])


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # the SDK would export traces to OpenAI
    yield
    set_tracing_disabled(False)


@pytest.fixture
def mem(tmp_path: Path) -> MemorySystem:
    return system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256))


def _session(mem: MemorySystem, session_id: str, db: Path | None = None) -> TiermemSession:
    history = SQLiteSession(session_id, db) if db is not None else None
    return TiermemSession(mem, MemoryContext(user_id="ada", session_id=session_id), history=history)


def _contents(items: list[Any]) -> list[object]:
    return [i.get("content") for i in items]


async def _turns(mem: MemorySystem, session_id: str) -> int:
    """The user's captured turns (stats count per user, every session)."""
    return sum((await mem.stats(MemoryContext(user_id="ada", session_id=session_id))).counts["turns"].values())


async def test_add_get_and_clear(mem: MemorySystem) -> None:
    session = _session(mem, "direct_test")
    await session.add_items(_items("Hello", "Hi there!"))
    retrieved: list[Any] = await session.get_items()
    assert [(i.get("role"), i.get("content")) for i in retrieved] == [("user", "Hello"), ("assistant", "Hi there!")]
    assert await _turns(mem, "direct_test") == 1  # tiermem kept the answered turn
    await session.clear_session()
    assert await session.get_items() == []


async def test_pop_takes_the_latest_item_until_none_is_left(mem: MemorySystem) -> None:
    session = _session(mem, "pop_test")
    assert await session.pop_item() is None
    await session.add_items(_items("Hello", "Hi there!", "How are you?"))
    assert len(await session.get_items()) == 3
    popped: list[Any] = [await session.pop_item() for _ in range(3)]
    assert _contents(popped) == ["How are you?", "Hi there!", "Hello"]
    assert await session.pop_item() is None
    assert await session.get_items() == []
    await session.clear_session()  # the popped question was never answered: only the first turn is kept
    assert await _turns(mem, "pop_test") == 1


async def test_pop_touches_only_its_own_session(mem: MemorySystem, tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"  # two sessions in one SQLite file, as the SDK's case has them
    one, two = _session(mem, "session_1", db), _session(mem, "session_2", db)
    await one.add_items(_items("Session 1 message"))
    await two.add_items(_items("Session 2 message 1", "Session 2 message 2"))
    assert _contents([await two.pop_item()]) == ["Session 2 message 2"]
    assert _contents(await one.get_items()) == ["Session 1 message"]
    assert _contents(await two.get_items()) == ["Session 2 message 1"]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (None, SIX),
        (2, ["Message 3", "Response 3"]),
        (4, ["Message 2", "Response 2", "Message 3", "Response 3"]),
        (10, SIX),
        (0, []),
    ],
    ids=["all", "latest-2", "latest-4", "more-than-there", "none"],
)
async def test_get_items_with_a_limit_gives_the_latest_in_order(
    mem: MemorySystem, limit: int | None, expected: list[str]
) -> None:
    session = _session(mem, "count_test")
    await session.add_items(_items(*SIX))
    assert _contents(await session.get_items(limit)) == expected
    assert await _turns(mem, "count_test") == 3  # three questions, each answered: three turns


async def test_different_sessions_keep_separate_histories(mem: MemorySystem, tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    model = ScriptedModel(
        [
            ModelStep(output=[assistant_message("I like cats")]),
            ModelStep(output=[assistant_message("I like dogs")]),
            ModelStep(output=[assistant_message("Yes, you mentioned cats")]),
        ]
    )
    agent = Agent(name="test", model=model)
    one, two = _session(mem, "session_1", db), _session(mem, "session_2", db)
    assert (await Runner.run(agent, "I like cats", session=one)).final_output == "I like cats"
    assert (await Runner.run(agent, "I like dogs", session=two)).final_output == "I like dogs"
    third = await Runner.run(agent, "What did I say I like?", session=one)
    assert third.final_output == "Yes, you mentioned cats"
    replayed = json.dumps(model.calls[2].input)
    assert "cats" in replayed and "dogs" not in replayed
    assert await _turns(mem, "session_1") == 3  # the user's turns, from both sessions
