"""Shared scopes are kept like a user's memory: the janitor decays, expires and compacts a team's facts, and
feedback on a team fact a recall returned reaches it (any reader's "used"; only a writer's "unhelpful")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tiermem import MemoryContext, MemorySystem, system
from tiermem.jobs import run_janitor
from tiermem.memory.testing import FrozenClock, HashingEmbedder

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TEAM = "team:eng"
SHARED: dict[str, Any] = {"read_scopes": (TEAM,), "write_scope": TEAM}


def _ctx(user: str, **scopes: Any) -> MemoryContext:
    return MemoryContext(user_id=user, session_id="s-1", **scopes)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(START)


@pytest.fixture
async def mem(tmp_path: Path, clock: FrozenClock) -> MemorySystem:
    built = system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256), clock=clock)
    await built.grant("default", "wendy", TEAM, "write")
    await built.grant("default", "rhea", TEAM, "read")
    own = await built.remember(_ctx("wendy"), "Deploys go out on Tuesdays after the standup.")
    await built.share(_ctx("wendy", **SHARED), own.id, TEAM)
    return built


def _team_facts(mem: MemorySystem) -> list[dict[str, Any]]:
    return [r for r in mem.store.table("facts").to_arrow().to_pylist() if r["user_id"] == TEAM]


async def test_the_janitor_decays_a_team_fact_like_a_users(mem: MemorySystem, clock: FrozenClock) -> None:
    [fact] = _team_facts(mem)
    assert fact["status"] == "active"
    clock.advance(timedelta(days=3 * 365))  # long past the half-life, unreinforced: under the archive floor

    report = await run_janitor(mem, force=True)

    assert report.users == 2  # wendy's own memory and the team's
    assert [r["status"] for r in _team_facts(mem)] == ["archived"]
    assert [f.status for f in await mem.facts(_ctx("wendy"))] == []  # hers went the same way


async def test_a_team_fact_kept_in_use_by_its_readers_outlives_the_janitor(
    mem: MemorySystem, clock: FrozenClock
) -> None:
    for _ in range(6):  # read and found useful every half year
        clock.advance(timedelta(days=180))
        found = await mem.recall(_ctx("rhea", read_scopes=(TEAM,)), "when do deploys go out?")
        [team] = [item.id for item in found if item.metadata.get("scope") == TEAM]
        report = await mem.feedback(_ctx("rhea", read_scopes=(TEAM,)), found.receipt, used=[team])
        assert report.reinforced == (team,)

    await run_janitor(mem, force=True)

    [fact] = _team_facts(mem)
    assert fact["status"] == "active"
    history = await mem.history(_ctx("rhea", read_scopes=(TEAM,)), fact["id"])
    assert history  # each reinforcement is in the fact's record


@pytest.mark.parametrize(("user", "right", "lowered"), [("wendy", "write", True), ("rhea", "read", False)],
                         ids=["writer-lowers", "reader-cannot"])  # fmt: skip
async def test_only_a_writer_lowers_a_team_fact(mem: MemorySystem, user: str, right: str, lowered: bool) -> None:
    ctx = _ctx(user, read_scopes=(TEAM,))
    found = await mem.recall(ctx, "when do deploys go out?")
    [team] = [item.id for item in found if item.metadata.get("scope") == TEAM]
    [before] = _team_facts(mem)

    report = await mem.feedback(ctx, found.receipt, unhelpful=[team])

    [after] = _team_facts(mem)
    assert (report.lowered == (team,)) is lowered
    assert (after["record"] != before["record"]) is lowered
    assert report.unchanged == (() if lowered else (team,))


async def test_feedback_after_the_grant_is_revoked_reaches_nothing(mem: MemorySystem) -> None:
    ctx = _ctx("rhea", read_scopes=(TEAM,))
    found = await mem.recall(ctx, "when do deploys go out?")
    [team] = [item.id for item in found if item.metadata.get("scope") == TEAM]
    await mem.revoke("default", "rhea", TEAM)
    [before] = _team_facts(mem)

    with pytest.raises(Exception, match="grant"):
        await mem.feedback(ctx, found.receipt, used=[team])
    report = await mem.feedback(_ctx("rhea"), found.receipt, used=[team])  # her own scope: the team's is not there

    assert report.unchanged == (team,)
    assert _team_facts(mem) == [before]


async def test_the_digest_stays_the_users_own(mem: MemorySystem) -> None:
    reader = _ctx("rhea", read_scopes=(TEAM,))
    await mem.remember(_ctx("rhea"), "Rhea keeps bees on her balcony.")

    await mem.digest(reader)

    digest = await mem.latest_digest(reader)
    assert digest is not None and digest.user_id == "rhea"
    assert "bees" in digest.text and "Tuesdays" not in digest.text  # the team's fact is not rolled into hers
    assert await mem.latest_digest(_ctx("wendy")) is None  # nor is a digest written for the team's sharer
