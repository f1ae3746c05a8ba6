"""Metadata filters (issue 13, item 8): ``recall(..., where=)`` and ``list(..., where=)`` on captured metadata.

A real LanceDB in a temporary folder, the rules model, the hashing embedder. Three turns are captured
with metadata (one with hostile values that must match literally), then consolidated into episodes
and facts. A turn matches on its own metadata; what derives from turns (working entries, episodes,
facts) matches when any of its turns does; the digest never does.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tiermem import InvalidArgumentError, MemoryContext, MemoryItem, MemorySystem, Turn, system
from tiermem.memory._tiers._lineage import checked_where
from tiermem.memory.testing import FrozenClock, HashingEmbedder, Where

CTX = MemoryContext(namespace="where", user_id="ana")
HOSTILE = "x' OR '1'='1"
HOSTILE_LABEL = "it's; DROP TABLE turns; --"
TURNS: list[tuple[str, dict[str, Any]]] = [
    (
        "I booked a flight to Oslo for the conference.",
        {"channel": "email", "labels": ["travel", "work"], "source": "gmail", "priority": 1},
    ),
    ("I adopted a cat named Pixel.", {"channel": "chat", "labels": ["home"], "source": "app"}),
    ("My sister lives in Oslo near the harbour.", {"channel": HOSTILE, "labels": [HOSTILE_LABEL]}),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, datetime]:
    """The store every test reads, written once per module: its folder and the clock's time after it."""
    folder = tmp_path_factory.mktemp("where") / "store"
    clock = FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))

    async def write() -> None:
        mem = system(model="rules", store=str(folder), embedder=HashingEmbedder(256), clock=clock)
        session = CTX.model_copy(update={"session_id": "s-1"})
        for text, metadata in TURNS:
            await mem.capture(session, [{"role": "user", "content": text}], metadata=metadata)
            clock.advance(timedelta(minutes=1))
        await mem.end_session(session)
        await mem.consolidate(CTX)
        await mem.digest(CTX)

    asyncio.run(write())
    return folder, clock.advance(timedelta(days=1))


@pytest.fixture
def mem(built: tuple[Path, datetime], tmp_path: Path) -> MemorySystem:
    """A copy of the built store for each test (some write), opened a day after it was written."""
    folder, now = built
    shutil.copytree(folder, tmp_path / "store")
    return system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256), clock=FrozenClock(now))


def _turns(mem: MemorySystem) -> dict[str, Turn]:
    """The captured turns by id, read from the store."""
    return {t.id: t for t in mem.store.query("turns", Where(eq={"namespace": CTX.namespace, "user_id": CTX.user_id}))}


def _matching(mem: MemorySystem, where: Mapping[str, Any]) -> set[str]:
    return {rid for rid, turn in _turns(mem).items() if _holds(where)(turn.metadata)}


def _derives(item: MemoryItem, matching: set[str], predicate: Callable[[Mapping[str, Any]], bool]) -> bool:
    """The test's own statement of the rule, over what ``list`` shows."""
    if item.tier == "digest":
        return False
    if item.metadata.get("kind") == "turn":
        return item.id in matching
    return bool(set(item.provenance) & matching) or predicate(item.metadata)


def _same(value: Any, operand: Any) -> bool:
    return type(value) is type(operand) and value == operand


def _holds(where: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """The filter, restated: every condition on one metadata dict, types compared strictly."""

    def condition(value: Any, op: str, operand: Any) -> bool:
        if op == "eq":
            return _same(value, operand)
        if op == "in":
            return any(_same(value, o) for o in operand)
        return isinstance(value, list) and any(_same(v, operand) for v in value)

    def predicate(meta: Mapping[str, Any]) -> bool:
        for key, test in where.items():
            ops = test if isinstance(test, dict) else {"eq": test}
            if key not in meta or not all(condition(meta[key], op, operand) for op, operand in ops.items()):
                return False
        return True

    return predicate


FILTERS: list[Any] = [
    pytest.param({"channel": "email"}, [0], id="equal"),
    pytest.param({"channel": {"eq": "chat"}}, [1], id="eq-operator"),
    pytest.param({"channel": {"in": ["chat", "sms"]}}, [1], id="in"),
    pytest.param({"labels": {"contains": "travel"}}, [0], id="list-contains"),
    pytest.param({"channel": "email", "source": "gmail"}, [0], id="two-keys"),
    pytest.param({"channel": "email", "source": "app"}, [], id="keys-of-two-turns-never-combine"),
    pytest.param({"channel": HOSTILE}, [2], id="hostile-value-matches-literally"),
    pytest.param({"labels": {"contains": HOSTILE_LABEL}}, [2], id="hostile-label-matches-literally"),
    pytest.param({"channel": "' OR '1'='1"}, [], id="injection-never-widens"),
    pytest.param({"channel": "x' OR 1=1 --"}, [], id="injection-variant-never-widens"),
    pytest.param({"') OR 1=1 --": "x"}, [], id="hostile-key"),
    pytest.param({"priority": 1}, [0], id="number"),
    pytest.param({"priority": "1"}, [], id="a-string-is-not-a-number"),
    pytest.param({"priority": True}, [], id="a-bool-is-not-a-number"),
    pytest.param({"channel": "EMAIL"}, [], id="case-sensitive"),
]


@pytest.mark.parametrize(("where", "expected"), FILTERS)
async def test_list_keeps_exactly_what_derives_from_matching_turns(
    mem: MemorySystem, where: dict[str, Any], expected: list[int]
) -> None:
    turns = _turns(mem)
    matching = _matching(mem, where)
    assert sorted(next(n for n, (text, _) in enumerate(TURNS) if text in turns[r].text) for r in matching) == expected

    everything = (await mem.list(CTX, limit=1000)).items
    kept = (await mem.list(CTX, where=where, limit=1000)).items

    assert [i.id for i in kept] == [i.id for i in everything if _derives(i, matching, _holds(where))]
    assert all(i.tier != "digest" for i in kept)
    if expected:
        assert any(set(i.provenance) & matching for i in kept if i.tier == "semantic")  # facts derive too


async def test_list_with_where_sees_turns_derived_records_only(mem: MemorySystem) -> None:
    kept = (await mem.list(CTX, where={"channel": "email"}, tier="semantic", limit=100)).items
    assert kept and all("Oslo" in i.text or "flight" in i.text for i in kept)
    assert all("Pixel" not in i.text and "sister" not in i.text for i in kept)


async def test_list_pages_through_a_filtered_listing(mem: MemorySystem) -> None:
    where = {"labels": {"contains": "home"}}
    whole = [i.id for i in (await mem.list(CTX, where=where, limit=1000)).items]
    paged: list[str] = []
    cursor = None
    while True:
        page = await mem.list(CTX, where=where, limit=1, cursor=cursor)
        paged += [i.id for i in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert paged == whole and len(whole) >= 2


@pytest.mark.parametrize(("where", "expected"), FILTERS)
async def test_recall_keeps_only_matching_memories(
    mem: MemorySystem, where: dict[str, Any], expected: list[int]
) -> None:
    matching = _matching(mem, where)
    found = await mem.recall(CTX, "Oslo flight conference cat Pixel sister harbour", limit=50, where=where)
    assert all(_derives(i, matching, _holds(where)) for i in found)
    recalled_turns = {i.id for i in found if i.metadata.get("kind") == "turn"}
    assert recalled_turns == matching  # every matching turn is found, no other
    assert isinstance(found.receipt, str)


async def test_recall_without_a_cue_filters_too(mem: MemorySystem) -> None:
    found = await mem.recall(CTX, None, limit=50, where={"channel": "chat"})
    facts = " ".join(i.text for i in found if i.tier == "semantic")
    assert "Pixel" in facts and "flight" not in facts and "sister" not in facts
    assert all(i.tier != "digest" for i in found)
    # The session's episode covers all three turns: it derives in part from the chat turn, so it matches.
    assert [i.tier for i in found if "flight" in i.text] == ["episodic"]


async def test_hostile_filters_leave_the_store_intact(mem: MemorySystem) -> None:
    before = mem.store.count("turns")
    for where in ({"channel": "'; DELETE FROM turns; --"}, {"x') OR ('1'='1": {"in": ["a", "'b'"]}}):
        assert list(await mem.recall(CTX, "Oslo", where=where)) == []
        assert (await mem.list(CTX, where=where)).items == ()
    assert mem.store.count("turns") == before == 3


BAD: list[Any] = [
    pytest.param({"channel": {"like": "%"}}, "unknown operator", id="unknown-operator"),
    pytest.param({"channel": {"$eq": "email"}}, "unknown operator", id="dollar-operator"),
    pytest.param({"channel": ["email", "chat"]}, "is a list", id="bare-list"),
    pytest.param({"channel": {"in": "email"}}, "must be a list", id="in-not-a-list"),
    pytest.param({"channel": {"in": []}}, "must be a list", id="in-empty"),
    pytest.param({"channel": {"eq": {"nested": 1}}}, "must be a string", id="nested-value"),
    pytest.param({"channel": {}}, "no operator", id="no-operator"),
    pytest.param({}, "non-empty dict", id="empty"),
    pytest.param("channel = 'email'", "non-empty dict", id="sql-string"),
    pytest.param({1: "x"}, "keys must be", id="key-not-a-string"),
    pytest.param({"channel": "a\x00b"}, "NUL", id="nul"),
]


@pytest.mark.parametrize(("where", "message"), BAD)
async def test_bad_filters_raise(mem: MemorySystem, where: Any, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        checked_where(where)
    with pytest.raises(InvalidArgumentError, match=message):
        await mem.recall(CTX, "Oslo", where=where)
    with pytest.raises(InvalidArgumentError, match=message):
        await mem.list(CTX, where=where)
