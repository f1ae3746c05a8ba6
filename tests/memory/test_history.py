"""Importing past conversations: dated by the history, resumable after a crash, checked before writing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tiermem import HistoryProgress, InvalidArgumentError, MemoryContext, system
from tiermem.memory._store import Where
from tiermem.memory._system import MemorySystem
from tiermem.memory.testing import FrozenClock, HashingEmbedder

START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
LINES = [
    ["I live in Porto.", "I work at Acme Corp as a nurse."],
    ["My sister Ana plays the cello.", "I adopted a cat named Miso."],
    ["I started learning Japanese.", "I run every morning before work."],
]


class _Crash(Exception):
    """Stands in for the process dying mid-import."""


def _history() -> list[dict[str, Any]]:
    return [
        {
            "session_id": f"old-{i}",
            "turns": [
                {
                    "at": (START + timedelta(days=7 * i, minutes=t)).isoformat(),
                    "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
                }
                for t, text in enumerate(lines)
            ],
        }
        for i, lines in enumerate(LINES)
    ]


def _census(mem: MemorySystem, ctx: MemoryContext) -> dict[str, int]:
    where = Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})
    return {table: len(mem.store.query(table, where)) for table in ("turns", "working", "episodes", "facts")}  # type: ignore[arg-type]


@pytest.fixture
def mem(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> MemorySystem:
    return system(model="rules", store=store_path, embedder=embedder, clock=clock)


@pytest.mark.parametrize("concurrency", [1, 3], ids=["sequential", "concurrent"])
async def test_an_imported_history_is_dated_by_it(mem: MemorySystem, concurrency: int) -> None:
    ctx = MemoryContext(user_id="u-hist")
    seen: list[HistoryProgress] = []
    report = await mem.import_conversations(ctx, _history(), concurrency=concurrency, on_progress=seen.append)

    assert (report.conversations, report.turns, report.duplicates, report.episodes) == (3, 6, 0, 3)
    assert seen[-1].turns_done == seen[-1].turns_total == 6 and seen[-1].conversations_done == 3
    episodes = mem.store.query("episodes", Where(eq={"namespace": "default", "user_id": "u-hist"}))
    assert {e.status for e in episodes} == {"consolidated"}
    assert all(e.started_at.year == 2024 and e.created_at.year == 2024 for e in episodes)
    facts = await mem.facts(ctx)
    assert facts and all(f.created_at.year == 2024 and f.reinforced_at.year == 2024 for f in facts)


async def test_an_interrupted_import_is_finished_by_running_it_again(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, tmp_path: Any
) -> None:
    clean = system(model="rules", store=str(tmp_path / "clean"), embedder=embedder, clock=clock)
    ctx = MemoryContext(user_id="u-hist")
    await clean.import_conversations(ctx, _history())

    mem = system(model="rules", store=store_path, embedder=embedder, clock=clock)

    def crash(progress: HistoryProgress) -> None:
        if progress.turns_done == 3:
            raise _Crash("the process died here")

    with pytest.raises(_Crash):
        await mem.import_conversations(ctx, _history(), concurrency=1, on_progress=crash)
    report = await mem.import_conversations(ctx, _history(), concurrency=1)

    assert report.duplicates == 3
    assert _census(mem, ctx) == _census(clean, ctx)
    assert sorted(f.text for f in await mem.facts(ctx)) == sorted(f.text for f in await clean.facts(ctx))


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param({"session_id": "", "turns": []}, id="empty-session-id"),
        pytest.param({"session_id": "s", "turns": [{"at": "yesterday", "messages": []}]}, id="bad-time"),
        pytest.param(
            {"session_id": "s", "turns": [{"at": "2024-01-01", "messages": [{"role": "x"}]}]}, id="bad-message"
        ),
        pytest.param({"session_id": "s", "turns": "hello"}, id="turns-not-a-list"),
    ],
)
async def test_a_bad_history_raises_and_writes_nothing(mem: MemorySystem, broken: dict[str, Any]) -> None:
    ctx = MemoryContext(user_id="u-hist")
    with pytest.raises(InvalidArgumentError):
        await mem.import_conversations(ctx, [*_history(), broken])
    assert _census(mem, ctx) == {"turns": 0, "working": 0, "episodes": 0, "facts": 0}
