"""Documents in a shared scope: a writer of the team ingests into it, every reader of the team recalls its
passages (labelled with the scope), no one else does; a reader cannot ingest there; erasing the scope takes
its documents and chunks too. Real LanceDB; the choke point is Access.check as for every other path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem import AccessDeniedError, MemoryContext, MemorySystem, system
from tiermem.memory.testing import HashingEmbedder

TEAM = "team:eng"
RUNBOOK = """# Deploy runbook

## Rollback

To roll back a release, run the Kestrel script from the ops host and page the on-call engineer.
"""


def _ctx(user: str, **scopes: Any) -> MemoryContext:
    return MemoryContext(user_id=user, session_id="s-1", **scopes)


WRITER = _ctx("wendy", read_scopes=(TEAM,), write_scope=TEAM)
READER = _ctx("rhea", read_scopes=(TEAM,))


@pytest.fixture
async def mem(tmp_path: Path) -> MemorySystem:
    built = system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256))
    await built.grant("default", "wendy", TEAM, "write")
    await built.grant("default", "rhea", TEAM, "read")
    return built


def _team_rows(mem: MemorySystem, table: str) -> list[dict[str, Any]]:
    return [r for r in mem.store.table(table).to_arrow().to_pylist() if r["user_id"] == TEAM]


async def test_a_writer_shares_a_document_every_reader_of_the_team_recalls(mem: MemorySystem) -> None:
    report = await mem.ingest(WRITER, RUNBOOK.encode(), name="runbook.md", shared=True)

    assert report.document.user_id == TEAM and report.written >= 1
    assert await mem.documents(WRITER) == []  # not wendy's own
    assert [d.id for d in await mem.documents(WRITER, shared=True)] == [report.document.id]
    for ctx in (WRITER, READER):
        found = await mem.recall(ctx, "how do I roll back a release with the Kestrel script?")
        assert [(i.tier, i.metadata.get("scope")) for i in found][:1] == [("document", TEAM)]
    assert not await mem.recall(_ctx("olga"), "Kestrel script")  # holds no grant, reads only her own


@pytest.mark.parametrize(
    ("ctx", "shared"),
    [
        (READER.model_copy(update={"write_scope": TEAM}), True),  # a read grant only
        (READER, True),  # names no write scope
        (_ctx("nick", read_scopes=(TEAM,)), False),  # asks to read a scope never granted, even for his own
    ],
    ids=["read-grant-only", "no-write-scope", "not-granted"],
)
async def test_no_document_is_written_without_the_grant(mem: MemorySystem, ctx: MemoryContext, shared: bool) -> None:
    with pytest.raises(AccessDeniedError):
        await mem.ingest(ctx, RUNBOOK.encode(), name="runbook.md", shared=shared)
    assert mem.store.count("documents") == mem.store.count("chunks") == 0


async def test_a_shared_document_is_forgotten_by_a_writer_and_erased_with_its_scope(mem: MemorySystem) -> None:
    first = await mem.ingest(WRITER, RUNBOOK.encode(), name="runbook.md", shared=True)
    with pytest.raises(AccessDeniedError):
        await mem.forget_document(READER, first.document.id, shared=True)
    assert await mem.forget_document(WRITER, first.document.id, shared=True) == first.written
    assert _team_rows(mem, "chunks") == [] and _team_rows(mem, "documents") == []

    await mem.ingest(WRITER, RUNBOOK.encode(), name="runbook.md", shared=True)
    await mem.erase_scope("default", TEAM)
    assert _team_rows(mem, "chunks") == [] and _team_rows(mem, "documents") == []
