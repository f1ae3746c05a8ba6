"""``erase_user`` beside work already running: nothing of the user comes back (issue 33 item 3).

The work is held mid-model-call by a gated fake model (the fault suite's healthy answers, each turn's
token carried to every tier) while the user is erased: turns queued for background observation, a
consolidation in this process, and one in another process. Afterwards no table holds a row of the user;
work begun after the erasure writes the same user id afresh.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.faults.model import healthy_reply, token
from tests.subprocesses import clean_env
from tiermem import MemoryContext, MemorySystem, UserErasedError, system
from tiermem.memory._store import USER_TABLES
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, StageCall

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

VICTIM = MemoryContext(user_id="u-victim", session_id="s-1")
BYSTANDER = MemoryContext(user_id="u-bystander", session_id="s-1")
CONSOLIDATION = ("consolidate", "encode_consolidate")  # the latter summarises provisional episodes too


class Gate:
    """Holds every call of the named stages until released; ``entered`` once the first is held."""

    def __init__(self, *stages: str) -> None:
        self.stages = stages
        self.entered = threading.Event()
        self.released = threading.Event()
        self.fake = FunctionModel(function=self._answer)

    async def _answer(self, messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
        if call.stage.name in self.stages:
            self.entered.set()
            await asyncio.to_thread(self.released.wait, 60)
        return healthy_reply(call)


def make(path: Path, gate: Gate) -> MemorySystem:
    return system(model=gate.fake.model, store=str(path), embedder=HashingEmbedder(64), clock=FrozenClock())


def rows_of(mem: MemorySystem, user: str) -> dict[str, int]:
    """Rows of ``user`` per table, every table, read from the engine (no cache)."""
    counts = {}
    for table in USER_TABLES:
        found = mem.store.table(table).to_arrow().to_pylist()
        counts[table] = sum(r["user_id"] == user for r in found)
    return {t: n for t, n in counts.items() if n}


def turn(n: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Remember {token(7, n)} for me."}]


async def test_turns_queued_for_background_observation_do_not_come_back(tmp_path: Path) -> None:
    gate = Gate("observe")
    mem = make(tmp_path / "store", gate)
    await mem.capture(BYSTANDER, turn(99), background=True)
    for n in range(6):  # two held in the model call by the queue's workers, the rest queued behind them
        await mem.capture(VICTIM, turn(n), background=True)
    assert await asyncio.to_thread(gate.entered.wait, 60)
    assert rows_of(mem, VICTIM.user_id)["turns"] == 6

    await mem.erase_user(VICTIM)
    gate.released.set()
    await mem.flush()

    assert rows_of(mem, VICTIM.user_id) == {}
    assert rows_of(mem, BYSTANDER.user_id)["working"] == 1  # the bystander's observation landed
    await mem.aclose()


async def test_a_consolidation_waiting_on_the_model_writes_nothing_back(tmp_path: Path) -> None:
    gate = Gate(*CONSOLIDATION)
    mem = make(tmp_path / "store", gate)
    for n in range(3):
        await mem.capture(VICTIM, turn(n))
    await mem.end_session(VICTIM)
    running = asyncio.ensure_future(mem.consolidate(VICTIM))
    assert await asyncio.to_thread(gate.entered.wait, 60)

    await mem.erase_user(VICTIM)
    gate.released.set()

    with pytest.raises(UserErasedError):
        await running
    assert rows_of(mem, VICTIM.user_id) == {}

    # The same user id afterwards: a new user, written as any other.
    await mem.capture(VICTIM, turn(10))
    await mem.end_session(VICTIM)
    await mem.consolidate(VICTIM)
    assert {"turns", "episodes", "facts"} <= set(rows_of(mem, VICTIM.user_id))


CHILD = """
import asyncio, importlib.util, sys, time
from pathlib import Path
from tiermem import MemoryContext, UserErasedError, system
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder

spec = importlib.util.spec_from_file_location("fault_model", sys.argv[2])
model = sys.modules["fault_model"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(model)
folder = Path(sys.argv[1]).parent

async def answer(messages, call):
    if call.stage.name in ("consolidate", "encode_consolidate"):
        (folder / "entered").touch()
        while not (folder / "release").exists():
            await asyncio.sleep(0.05)
    return model.healthy_reply(call)

async def main():
    fake = FunctionModel(function=answer)
    mem = system(model=fake.model, store=sys.argv[1], embedder=HashingEmbedder(64), clock=FrozenClock())
    try:
        await mem.consolidate(MemoryContext(user_id="u-victim"))
    except UserErasedError:
        print("erased")
        return
    print("written")

asyncio.run(main())
"""


@pytest.mark.slow
async def test_another_processs_consolidation_writes_nothing_back(tmp_path: Path) -> None:
    gate = Gate()  # nothing held in this process
    store = tmp_path / "store"
    mem = make(store, gate)
    for n in range(3):
        await mem.capture(VICTIM, turn(n))
    await mem.end_session(VICTIM)
    fault_model = Path(__file__).parents[1] / "faults" / "model.py"
    here = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}  # the tree tested
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), str(fault_model)],
        cwd=tmp_path,  # never the repository (see tests/subprocesses.py)
        env=clean_env(**here),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not (tmp_path / "entered").exists():
            assert child.poll() is None, child.communicate()[1][-3000:]
            await asyncio.sleep(0.05)

        await mem.erase_user(VICTIM)
        (tmp_path / "release").touch()
        out, err = await asyncio.to_thread(child.communicate, timeout=240)
    finally:
        if child.poll() is None:
            child.kill()

    assert child.returncode == 0, err[-3000:]
    assert out.strip() == "erased"
    assert rows_of(mem, VICTIM.user_id) == {}
