"""One user's writes never change another's rows: the store matches a merge on id within its scope, and an
import gives every record an id of the target scope, whatever ids its file names (issue 33 item 2)."""

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
from tiermem.memory._identity import digest_id, episode_id
from tiermem.memory._store import USER_TABLES
from tiermem.memory.testing import FrozenClock, HashingEmbedder

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

VICTIM = MemoryContext(user_id="victim", session_id="s-1")
ATTACKER = MemoryContext(user_id="attacker", session_id="s-1")
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
KINDS = ["alias", "turn", "working", "episode", "fact", "edge", "digest"]


def make(path: Path, clock: FrozenClock) -> MemorySystem:
    return system(model="rules", store=str(path), embedder=HashingEmbedder(256), clock=clock,
                  semantic={"relations": True})  # fmt: skip


def write_users(folder: Path) -> None:
    """Both users with every kind of record: aliases, turns, working entries, episodes, facts, edges, digest."""

    async def write() -> None:
        mem = make(folder, FrozenClock(START))
        for ctx, name, spouse, firm in (
            (VICTIM, "Caroline", "Moni", "Acme Corp"),
            (ATTACKER, "Mallory", "Bob", "Globex"),
        ):
            await mem.add_alias(ctx, name)
            for text in (f"My wife {spouse} is allergic to shellfish.", f"I work at {firm} as a data engineer."):
                await mem.capture(ctx, [{"role": "user", "content": text}, {"role": "assistant", "content": "Ok."}])
            await mem.add_working_memory(ctx, f"{spouse} prefers tea.", subject=spouse.lower())
            await mem.end_session(ctx)
            await mem.consolidate(ctx)
            await mem.digest(ctx)
            await mem.capture(ctx.model_copy(update={"session_id": "s-2"}), [{"role": "user", "content": "Hi."}])

    asyncio.run(write())


@pytest.fixture
def mem(tmp_path_factory: pytest.TempPathFactory) -> MemorySystem:
    return make(prebuilt(tmp_path_factory, "tenancy-users", write_users), FrozenClock(START))


def dump(mem: MemorySystem, user: str) -> dict[str, list[dict[str, Any]]]:
    """Every stored row of ``user``, every column (vectors included), per table, in id order."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for table in USER_TABLES:
        found = mem.store.table(table).to_arrow().to_pylist()
        rows[table] = sorted((r for r in found if r["user_id"] == user), key=lambda r: str(r["id"]))
    return rows


async def export_lines(mem: MemorySystem, ctx: MemoryContext) -> list[str]:
    buffer = io.StringIO()
    await mem.export(ctx, buffer)
    return buffer.getvalue().splitlines()


def crafted(victim: list[str], header: str, kind: str) -> tuple[list[str], set[str]]:
    """A file whose header names the attacker, holding the victim's records of ``kind`` with their ids kept
    and the scope rewritten; plus, for episodes and the digest, ids computed for the victim. Returns the
    lines and the victim ids they name."""
    lines, named = [header], set()
    for line in victim[1:]:
        row = json.loads(line)
        if row["kind"] != kind:
            continue
        row["record"] |= {"user_id": ATTACKER.user_id, "text": "planted"} if kind == "fact" else {}
        row["record"]["user_id"] = ATTACKER.user_id
        named.add(row["record"]["id"])
        lines.append(json.dumps(row))
    template = json.loads(lines[-1])["record"] if len(lines) > 1 else None
    if kind == "episode" and template is not None:  # a session the victim has not ended yet: no squatting
        future = episode_id(VICTIM, session_id="s-future")
        lines.append(json.dumps({"kind": kind, "record": template | {"id": future, "session_id": "s-future"}}))
        named.add(future)
    if kind == "digest":
        assert digest_id(VICTIM) in named  # the victim's digest id, computable from their user id
    return lines, named


@pytest.mark.parametrize("kind", KINDS, ids=KINDS)
async def test_a_crafted_import_changes_no_other_users_row(mem: MemorySystem, kind: str) -> None:
    victim = await export_lines(mem, VICTIM)
    header = (await export_lines(mem, ATTACKER))[0]
    lines, named = crafted(victim, header, kind)
    assert len(lines) > 1, f"the victim has no {kind}"
    before, had = dump(mem, VICTIM.user_id), dump(mem, ATTACKER.user_id)

    report = await mem.import_(ATTACKER, lines)

    assert dump(mem, VICTIM.user_id) == before  # byte for byte, vectors included
    assert report.records[kind] == len(lines) - 1
    mine = dump(mem, ATTACKER.user_id)
    table = {"alias": "aliases", "working": "working", "digest": "digests"}.get(kind, kind + "s")
    assert mine[table] != had[table]  # the import landed in the attacker's account
    assert not {r["id"] for rows in mine.values() for r in rows} & named  # under ids of the attacker's scope
    if kind == "episode":  # the victim's own later session still gets its episode
        future = VICTIM.model_copy(update={"session_id": "s-future"})
        await mem.capture(future, [{"role": "user", "content": "We adopted a cat called Miso."}])
        await mem.end_session(future)
        assert episode_id(VICTIM, session_id="s-future") in {r["id"] for r in dump(mem, VICTIM.user_id)["episodes"]}


async def test_a_user_importing_their_own_export_keeps_its_ids(mem: MemorySystem, tmp_path: Path) -> None:
    lines = await export_lines(mem, ATTACKER)
    fresh = make(tmp_path / "fresh", FrozenClock(START))

    await fresh.import_(ATTACKER, lines)
    await fresh.import_(ATTACKER, lines)  # and again: nothing new

    assert (await export_lines(fresh, ATTACKER))[1:] == lines[1:]


@pytest.mark.parametrize("mode", ["upsert", "insert_absent"], ids=["upsert", "insert-absent"])
async def test_the_store_refuses_an_id_of_another_scope(mem: MemorySystem, mode: str) -> None:
    """Below the import: a write naming another user's id changes nothing of theirs and says so."""
    before = dump(mem, VICTIM.user_id)
    theirs = next(f for f in await mem.facts(VICTIM))
    own = next(f for f in await mem.facts(ATTACKER))
    planted = theirs.model_copy(update={"user_id": ATTACKER.user_id, "text": "planted"})
    vectors = mem.embedder.embed([planted.text, own.text])

    with pytest.raises(InvalidArgumentError, match="belong to another user"):
        getattr(mem.store, mode)("facts", [planted, own], vectors)

    assert dump(mem, VICTIM.user_id) == before
    assert not any(f.text == "planted" for f in await mem.facts(ATTACKER))
