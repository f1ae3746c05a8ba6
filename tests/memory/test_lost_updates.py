"""Lost updates: a memory has at most one active version under concurrent writes (issue 33 item 5).

Two ``update`` calls on one fact at once (coroutines, threads, processes), and a correction, pin or
feedback made while a consolidation of the same user waits on the model (a gated fake whose answer
reinforces or updates that fact): afterwards the fact's chain has exactly one active version, and
the pin, the correction and the feedback are all still there. A janitor compaction waiting on the model
does not merge away a fact pinned or corrected meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.faults.model import healthy_reply, token
from tests.subprocesses import clean_env
from tiermem import Fact, InvalidArgumentError, MemoryContext, MemorySystem, system
from tiermem.jobs import run_janitor
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, StageCall
from tiermem.prompts import compact

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

CTX = MemoryContext(user_id="u-1", session_id="s-1")
LATER = MemoryContext(user_id="u-1", session_id="s-2")
CONSOLIDATION = ("consolidate", "encode_consolidate")
Ops = Callable[[str], list[dict[str, Any]]]


class Scripted:
    """The fault suite's healthy answers; once armed, consolidation answers ``ops(target)`` and waits for release."""

    def __init__(self) -> None:
        self.target: str | None = None
        self.ops: Ops | None = None
        self.entered = threading.Event()
        self.released = threading.Event()
        self.fake = FunctionModel(function=self._answer)

    def arm(self, target: str, ops: Ops) -> None:
        self.target, self.ops = target, ops

    async def _answer(self, messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
        reply = healthy_reply(call)
        if call.stage.name in CONSOLIDATION and self.ops is not None and self.target is not None:
            reply["operations"] = self.ops(self.target)
            self.entered.set()
            await asyncio.to_thread(self.released.wait, 60)
        return reply


def reinforce(target: str) -> list[dict[str, Any]]:
    return [{"op": "reinforce", "subject": "user", "target_id": target}]


def update(target: str) -> list[dict[str, Any]]:
    return [{"op": "update", "subject": "user", "target_id": target, "text": "The user moved to Lisbon."}]


def make(path: Path, model: Scripted) -> MemorySystem:
    return system(model=model.fake.model, store=str(path), embedder=HashingEmbedder(64), clock=FrozenClock())


async def seeded(mem: MemorySystem) -> Fact:
    """One consolidated fact of the user; a second session ended, pending consolidation."""
    await mem.capture(CTX, [{"role": "user", "content": f"Remember {token(5, 0)} for me."}])
    await mem.end_session(CTX)
    await mem.consolidate(CTX)
    (fact,) = mem.capability.tiers.facts(CTX)
    await mem.capture(LATER, [{"role": "user", "content": f"Remember {token(5, 1)} for me."}])
    await mem.end_session(LATER)
    return fact


def active_versions(mem: MemorySystem, fid: str) -> list[Fact]:
    """The active facts whose history includes ``fid`` (itself included), read from the store."""
    governance = mem.capability.governance
    facts = governance.facts_by_id(CTX)
    before = governance.predecessors(facts)
    return [f for f in facts.values() if f.status == "active" and fid in governance.ancestors(f.id, before)]


async def test_two_concurrent_updates_leave_one_active_version(tmp_path: Path) -> None:
    mem = make(tmp_path / "store", Scripted())
    fact = await seeded(mem)
    for trial in range(3):
        results = await asyncio.gather(
            mem.update(CTX, fact.id, text=f"The user lives in city {trial}a."),
            mem.update(CTX, fact.id, text=f"The user lives in city {trial}b."),
            return_exceptions=True,
        )
        won = [r for r in results if isinstance(r, Fact)]
        assert len(won) == 1, results  # the later one finds the fact superseded: refused, nothing written
        assert all(isinstance(r, InvalidArgumentError) for r in results if not isinstance(r, Fact)), results
        assert [f.id for f in active_versions(mem, fact.id)] == [won[0].id]
        fact = won[0]


def test_two_threads_updating_one_fact_leave_one_active_version(tmp_path: Path) -> None:
    mem = make(tmp_path / "store", Scripted())
    blocking = mem.blocking()
    blocking.capture(CTX, [{"role": "user", "content": f"Remember {token(6, 0)} for me."}])
    blocking.end_session(CTX)
    blocking.consolidate(CTX)
    (fact,) = mem.capability.tiers.facts(CTX)
    start = threading.Barrier(2)
    results: list[object] = []

    def correct(text: str) -> None:
        start.wait()
        try:
            results.append(blocking.update(CTX, fact.id, text=text))
        except InvalidArgumentError as exc:
            results.append(exc)

    threads = [threading.Thread(target=correct, args=(f"The user lives in town {n}.",)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    won = [r for r in results if isinstance(r, Fact)]
    assert len(won) == 1 and len(results) == 2, results
    assert [f.id for f in active_versions(mem, fact.id)] == [won[0].id]


CHILD = """
import sys, time
from pathlib import Path
from tiermem import InvalidArgumentError, MemoryContext, system
from tiermem.memory.testing import FrozenClock, HashingEmbedder

store, fid, text = sys.argv[1:4]
mem = system(model="rules", store=store, embedder=HashingEmbedder(64), clock=FrozenClock()).blocking()
go = Path(store).parent / "go"
while not go.exists():
    time.sleep(0.01)
try:
    print(mem.update(MemoryContext(user_id="u-1"), fid, text=text).id)
except InvalidArgumentError:
    print("refused")
"""


@pytest.mark.slow  # two interpreters importing tiermem: 10-25 s on a loaded machine
async def test_two_processes_updating_one_fact_leave_one_active_version(tmp_path: Path) -> None:
    store = tmp_path / "store"
    mem = make(store, Scripted())
    fact = await seeded(mem)
    here = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}  # the tree tested
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(store), fact.id, f"The user lives in village {n}."],
            cwd=tmp_path,  # never the repository (see tests/subprocesses.py)
            env=clean_env(**here),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    try:
        (tmp_path / "go").touch()  # both start polling for it while importing; the one that sees it first leads
        outputs = [await asyncio.to_thread(c.communicate, timeout=120) for c in children]
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
    assert all(c.returncode == 0 for c in children), [err[-3000:] for _, err in outputs]
    said = sorted(out.strip() for out, _ in outputs)
    assert said[-1] == "refused" and said[0].startswith("fact_"), said
    assert [f.id for f in active_versions(mem, fact.id)] == [said[0]]


@pytest.mark.parametrize("ops", [reinforce, update], ids=["consolidation-reinforces", "consolidation-updates"])
async def test_a_pin_during_consolidation_survives_it(tmp_path: Path, ops: Ops) -> None:
    model = Scripted()
    mem = make(tmp_path / "store", model)
    fact = await seeded(mem)
    model.arm(fact.id, ops)
    running = asyncio.ensure_future(mem.consolidate(CTX))
    assert await asyncio.to_thread(model.entered.wait, 60)

    await mem.pin(CTX, fact.id)
    model.released.set()
    result = await running

    assert result.episodes == 1 and not result.refusals, result
    (current,) = active_versions(mem, fact.id)
    assert current.pinned
    if ops is update:
        assert current.text == "The user moved to Lisbon."


@pytest.mark.parametrize("ops", [reinforce, update], ids=["consolidation-reinforces", "consolidation-updates"])
async def test_a_correction_during_consolidation_keeps_one_active_version(tmp_path: Path, ops: Ops) -> None:
    model = Scripted()
    mem = make(tmp_path / "store", model)
    fact = await seeded(mem)
    model.arm(fact.id, ops)
    running = asyncio.ensure_future(mem.consolidate(CTX))
    assert await asyncio.to_thread(model.entered.wait, 60)

    corrected = await mem.update(CTX, fact.id, text="The user lives in Porto.")
    model.released.set()
    result = await running

    versions = active_versions(mem, fact.id)
    assert len(versions) == 1, versions
    if ops is reinforce:  # a reinforcement of what the user corrected meanwhile: refused, the correction holds
        assert versions[0].id == corrected.id
        assert any("superseded now" in r for r in result.refusals), result.refusals
    else:  # the update changes what holds now: the correction stays as its history
        assert versions[0].text == "The user moved to Lisbon."
        history = [v.item.id for v in await mem.history(CTX, versions[0].id)]
        assert {fact.id, corrected.id, versions[0].id} <= set(history)


async def test_feedback_during_consolidation_is_kept(tmp_path: Path) -> None:
    model = Scripted()
    mem = make(tmp_path / "store", model)
    fact = await seeded(mem)
    recalled = await mem.recall(CTX, fact.text)
    assert fact.id in [r.id for r in recalled]
    model.arm(fact.id, reinforce)
    running = asyncio.ensure_future(mem.consolidate(CTX))
    assert await asyncio.to_thread(model.entered.wait, 60)

    report = await mem.feedback(CTX, recalled.receipt, unhelpful=[fact.id])
    model.released.set()
    await running

    assert report.lowered == (fact.id,)
    (current,) = active_versions(mem, fact.id)
    assert [e["signal"] for e in current.metadata.get("feedback", [])] == ["unhelpful"]
    assert current.reinforcements > fact.reinforcements  # the consolidation's reinforcement, on top


@pytest.mark.parametrize("change", ["pin", "update"], ids=["pinned-meanwhile", "corrected-meanwhile"])
async def test_a_change_during_compaction_is_not_merged_away(tmp_path: Path, change: str) -> None:
    entered, released = threading.Event(), threading.Event()
    sources: list[str] = []

    async def answer(messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
        assert call.stage is compact.STAGE
        entered.set()
        await asyncio.to_thread(released.wait, 60)
        return {"merges": [{"source_ids": sources, "text": "The user ran 5 km and 10 km races."}]}

    fake = FunctionModel(function=answer)
    mem = system(
        model=fake.model, store=str(tmp_path / "store"), embedder=HashingEmbedder(64), clock=FrozenClock(),
        semantic={"max_facts": 10},
    )  # fmt: skip
    facts = [await mem.add_semantic_fact(CTX, f"The user ran a {k} km race.") for k in range(5, 16)]  # one too many
    sources += [facts[0].id, facts[1].id]
    running = asyncio.ensure_future(run_janitor(mem))
    assert await asyncio.to_thread(entered.wait, 60)

    if change == "pin":
        await mem.pin(CTX, facts[0].id)
    else:
        await mem.update(CTX, facts[0].id, text="The user ran a 6 km race.")
    released.set()
    report = await running

    assert (report.facts_merged, report.compaction_failed) == (0, 1)  # left for the next run, which sees the change
    active = await mem.facts(CTX)
    assert not any(f.metadata.get("merged_from") for f in active)
    assert len(active_versions(mem, facts[0].id)) == 1
    if change == "pin":
        assert [f.pinned for f in active if f.id == facts[0].id] == [True]
