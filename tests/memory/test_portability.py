"""Export to JSON Lines, import into another store or user, fork: round trips, idempotence, independence."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.prebuilt import prebuilt
from tiermem import InvalidArgumentError, MemoryContext, MemorySystem, system
from tiermem.memory.testing import FrozenClock, HashingEmbedder

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

COPY = MemoryContext(user_id="u-copy", session_id="s-1")
ELSEWHERE = MemoryContext(namespace="tenant-b", user_id="u-1", session_id="s-1")


def make(path: Path, clock: FrozenClock, embedder: HashingEmbedder | None = None) -> MemorySystem:
    return system(
        model="rules", store=str(path), embedder=embedder or HashingEmbedder(256), clock=clock,
        semantic={"relations": True},
    )  # fmt: skip


SOURCE = MemoryContext(user_id="u-1", session_id="s-1")  # conftest's ctx, the source's user
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)  # conftest's clock


def write_source(folder: Path) -> None:
    async def write() -> None:
        ctx, clock = SOURCE, FrozenClock(START)
        mem = make(folder, clock)
        await mem.add_alias(ctx, "Caroline")
        for text in ("My wife Moni is allergic to shellfish.", "I work at Acme Corp as a data engineer."):
            await mem.capture(ctx, [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
        await mem.end_session(ctx)
        await mem.consolidate(ctx)
        await mem.digest(ctx)
        clock.advance(days=2)
        acme = next(f for f in await mem.facts(ctx) if "Acme" in f.text)
        await mem.pin(ctx, (await mem.update(ctx, acme.id, text="The user works at Initech as a data engineer.")).id)
        await mem.capture(ctx.model_copy(update={"session_id": "s-2"}), [{"role": "user", "content": "Hi there."}])

    asyncio.run(write())


@pytest.fixture
def source(tmp_path_factory: pytest.TempPathFactory, clock: FrozenClock, ctx: MemoryContext) -> MemorySystem:
    """The source user's memory, written once per test session (tests/prebuilt.py): each test opens its
    own copy, with the clock two days on, where the writing left it."""
    assert (ctx, clock.now()) == (SOURCE, START)
    clock.advance(days=2)
    return make(prebuilt(tmp_path_factory, "portability-source", write_source), clock)


async def export_text(mem: MemorySystem, ctx: MemoryContext) -> list[str]:
    buffer = io.StringIO()
    await mem.export(ctx, buffer)
    return buffer.getvalue().splitlines()


def natural_key(kind: str, r: dict[str, Any]) -> str:
    parts = {
        "fact": ("subject", "text"),
        "turn": ("session_id", "seq"),
        "episode": ("session_id",),
        "edge": ("source", "relation", "target"),
        "alias": ("name",),
        "digest": (),
        "working": ("session_id", "subject", "text"),
    }[kind]
    return kind + ":" + "|".join(str(r[p]) for p in parts)


def modulo_scope(lines: list[str]) -> list[str]:
    """The records with scope and scope-derived ids replaced by what they stand for."""
    rows = [json.loads(line) for line in lines[1:]]
    names = {row["record"]["id"]: natural_key(row["kind"], row["record"]) for row in rows}

    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return names.get(value, value)
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items() if k not in ("namespace", "user_id")}
        return value

    return sorted(json.dumps(norm(row), sort_keys=True) for row in rows)


async def test_export_writes_a_header_then_every_record(source: MemorySystem, ctx: MemoryContext) -> None:
    lines = await export_text(source, ctx)

    header = json.loads(lines[0])
    kinds = [json.loads(line)["kind"] for line in lines[1:]]
    assert header["format"] == "tiermem-export" and header["export_version"] == 1
    assert header["embedder_id"] == source.store.embedder_id and header["schema_version"]
    assert header["tiermem_version"] and (header["namespace"], header["user_id"]) == ("default", "u-1")
    assert set(kinds) == {"alias", "turn", "working", "episode", "fact", "edge", "digest"}
    facts = [json.loads(line)["record"] for line in lines[1:] if json.loads(line)["kind"] == "fact"]
    superseded = next(f for f in facts if f["status"] == "superseded")
    current = next(f for f in facts if f["id"] == superseded["superseded_by"])
    assert superseded["valid_to"] and current["valid_from"] and current["pinned"]
    assert superseded["id"] in current["provenance"] and superseded["provenance"]


async def test_export_import_export_round_trips(
    source: MemorySystem, ctx: MemoryContext, tmp_path: Path, clock: FrozenClock
) -> None:
    path = tmp_path / "u-1.jsonl"
    exported = await source.export(ctx, path)
    fresh = make(tmp_path / "fresh", clock)

    imported = await fresh.import_(ctx, path)

    again = await export_text(fresh, ctx)
    assert again[1:] == path.read_text().splitlines()[1:]  # the same user: the very same records
    assert imported.records == exported.records


@pytest.mark.parametrize("target", [COPY, ELSEWHERE], ids=["other-user", "other-namespace"])
async def test_import_into_another_user_is_the_same_memory_modulo_scope_and_idempotent(
    source: MemorySystem, ctx: MemoryContext, tmp_path: Path, clock: FrozenClock, target: MemoryContext
) -> None:
    original = await export_text(source, ctx)
    fresh = make(tmp_path / "fresh", clock, HashingEmbedder(128))  # another embedder: re-embedded

    await fresh.import_(target, io.StringIO("\n".join(original)))
    first = await export_text(fresh, target)
    await fresh.import_(target, original)  # a second import writes nothing new
    second = await export_text(fresh, target)

    assert modulo_scope(first) == modulo_scope(original)
    assert second == first
    assert all(json.loads(line)["record"]["user_id"] == target.user_id for line in first[1:])
    recalled = await fresh.recall(target, "What is Moni allergic to?")
    assert any("shellfish" in i.text for i in recalled)
    assert await fresh.connections(target, "moni")
    assert await fresh.latest_digest(target) is not None  # found by the id the library derives for the target


BAD_LINES: dict[str, list[str]] = {
    "empty": [],
    "no-header": ['{"kind": "fact", "record": {}}'],
    "wrong-format": ['{"kind": "header", "format": "mem0", "export_version": 1}'],
    "future-version": ['{"kind": "header", "format": "tiermem-export", "export_version": 99}'],
    "not-json": ["HEADER", "{nope"],
    "unknown-kind": ["HEADER", '{"kind": "secret", "record": {}}'],
    "invalid-record": ["HEADER", '{"kind": "fact", "record": {"id": "f"}}'],
    "other-user": ["HEADER", "FACT:u-9"],
    "bad-subject": ["HEADER", "FACT:u-1:Not A Subject!"],
}


def materialise(lines: list[str], good: list[str]) -> list[str]:
    header = good[0]
    fact = next(line for line in good if json.loads(line)["kind"] == "fact")
    out = []
    for line in lines:
        if line == "HEADER":
            out.append(header)
        elif line.startswith("FACT:"):
            _, user, *subject = line.split(":")
            record = json.loads(fact)["record"] | {"user_id": user}
            if subject:
                record["subject"] = subject[0]
            out.append(json.dumps({"kind": "fact", "record": record}))
        else:
            out.append(line)
    return out + good[1:]  # valid records after the bad line: none of them may be written


@pytest.mark.parametrize("case", list(BAD_LINES), ids=list(BAD_LINES))
async def test_a_bad_export_is_refused_and_nothing_is_written(
    source: MemorySystem, ctx: MemoryContext, tmp_path: Path, clock: FrozenClock, case: str
) -> None:
    good = await export_text(source, ctx)
    lines = materialise(BAD_LINES[case], good) if BAD_LINES[case] else []
    fresh = make(tmp_path / "fresh", clock)

    with pytest.raises(InvalidArgumentError):
        await fresh.import_(COPY, lines)

    stats = await fresh.stats(COPY)
    assert all(not counts for counts in stats.counts.values())


async def test_import_refuses_a_missing_file(source: MemorySystem, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="no export file"):
        await source.import_(COPY, tmp_path / "missing.jsonl")


# -- fork -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", [COPY, ELSEWHERE], ids=["other-user", "other-namespace"])
async def test_a_fork_is_independent_of_its_source(
    source: MemorySystem, ctx: MemoryContext, target: MemoryContext
) -> None:
    before = await export_text(source, ctx)

    await source.fork(ctx, target)
    forked = await export_text(source, target)
    assert modulo_scope(forked) == modulo_scope(before)

    copied = next(f for f in await source.facts(target) if "shellfish" in f.text)
    await source.forget(target, copied.id)
    await source.add_semantic_fact(target, "The copy likes jazz.")
    assert await export_text(source, ctx) == before  # writing to the fork leaves the source alone

    original = next(f for f in await source.facts(ctx) if "Initech" in f.text)
    await source.update(ctx, original.id, text="The user works at Globex as a data engineer.")
    assert not any("Globex" in f.text for f in await source.facts(target))  # and the other way round


async def test_a_fork_continues_the_same_sessions(source: MemorySystem, ctx: MemoryContext) -> None:
    await source.fork(ctx, COPY)
    episodes = len((await source.list(COPY, tier="episodic")).items)

    await source.capture(COPY, [{"role": "user", "content": "We adopted a cat called Miso."}])
    await source.end_session(COPY)

    assert (await source.stats(COPY)).counts["turns"]["observed"] == 4  # numbering went on from the copy
    assert len((await source.list(COPY, tier="episodic")).items) == episodes  # the session's episode, re-encoded


@pytest.mark.parametrize("target", ["self", "non-empty"], ids=["self", "non-empty"])
async def test_fork_refuses_itself_and_a_user_with_memories(
    source: MemorySystem, ctx: MemoryContext, target: str
) -> None:
    dst = ctx if target == "self" else COPY
    if target == "non-empty":
        await source.add_semantic_fact(COPY, "The copy likes jazz.")
    before = await export_text(source, dst)

    with pytest.raises(InvalidArgumentError):
        await source.fork(ctx, dst)

    assert (await export_text(source, dst))[1:] == before[1:]
