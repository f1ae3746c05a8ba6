"""An import rerun right after a crash finishes the work, or says what is still leased and until when
(issue 33 item 6).

A real import in another process is killed with SIGKILL while its consolidation waits on the model,
its lease on the user's consolidation live for ten more minutes. The rerun on the same machine sees that
the holder is gone, takes the lease over and carries every turn to a fact. A lease whose holder may be
alive (another machine's) is not taken: the report names the work, the holder and the expiry, and
``tiermem import-history`` exits 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tiermem
from tests.faults.model import healthy_reply, token, tokens_in
from tests.subprocesses import clean_env
from tiermem import MemoryContext, MemorySystem, system
from tiermem.memory._cli._main import cli
from tiermem.memory._identity import lease_key
from tiermem.memory._store import Leases, process_holder
from tiermem.memory._store._holders import dead_here
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, StageCall

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

USER = MemoryContext(user_id="u-1")
FAULT_MODEL = Path(__file__).parents[1] / "faults" / "model.py"


def history(sessions: int = 10, turns: int = 4) -> list[dict[str, Any]]:
    """``sessions`` past sessions of ``turns`` turns, each turn saying a token of its own (40 in all)."""
    return [
        {
            "session_id": f"s-{s:02d}",
            "turns": [
                {
                    "at": f"2024-05-{s + 1:02d}T10:{t:02d}:00+00:00",
                    "messages": [{"role": "user", "content": f"Remember {token(6, s, t)} for me."}],
                }
                for t in range(turns)
            ],
        }
        for s in range(sessions)
    ]


def healthy(path: Path) -> MemorySystem:
    async def answer(messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
        return healthy_reply(call)

    model = FunctionModel(function=answer).model
    return system(model=model, store=str(path), embedder=HashingEmbedder(64), clock=FrozenClock())


CHILD = """
import asyncio, importlib.util, json, sys
from pathlib import Path
from tiermem import MemoryContext, system
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder

spec = importlib.util.spec_from_file_location("fault_model", sys.argv[2])
model = sys.modules["fault_model"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(model)
folder = Path(sys.argv[1]).parent

async def answer(messages, call):
    if call.stage.name in ("consolidate", "encode_consolidate"):
        (folder / "entered").touch()
        await asyncio.sleep(3600)  # killed here, its consolidation lease held
    return model.healthy_reply(call)

async def main():
    mem = system(model=FunctionModel(function=answer).model, store=sys.argv[1], embedder=HashingEmbedder(64),
                 clock=FrozenClock())
    conversations = json.loads(Path(sys.argv[3]).read_text())
    await mem.import_conversations(MemoryContext(user_id="u-1"), conversations, observe_window=1)

asyncio.run(main())
"""


async def _import_killed_mid_consolidation(tmp_path: Path, store: Path) -> int:
    """Run the import in another process and SIGKILL it inside its first consolidation; its pid."""
    conversations = tmp_path / "history.json"
    conversations.write_text(json.dumps(history()))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), str(FAULT_MODEL), str(conversations)],
        cwd=tmp_path,  # never the repository (see tests/subprocesses.py)
        env=clean_env(PYTHONPATH=str(Path(tiermem.__file__).parents[1])),  # the tree under test
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not (tmp_path / "entered").exists():
            assert child.poll() is None, child.communicate()[1][-3000:]
            await asyncio.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        await asyncio.to_thread(child.communicate, timeout=60)
    assert child.returncode == -signal.SIGKILL
    return child.pid


@pytest.mark.slow
async def test_a_rerun_right_after_kill_9_takes_the_dead_holders_lease_and_reaches_every_fact(tmp_path: Path) -> None:
    store = tmp_path / "store"
    pid = await _import_killed_mid_consolidation(tmp_path, store)
    mem = healthy(store)
    left = Leases(mem.store).holder(lease_key("consolidate", USER))
    assert left is not None and left.holder.split(":")[1] == str(pid)  # the crashed run's lease, still live

    report = await mem.import_conversations(USER, history(), observe_window=1)

    said = {token(6, s, t) for s in range(10) for t in range(4)}
    assert report.leased == [] and report.errors == []
    assert set(tokens_in(f.text for f in await mem.facts(USER))) == said  # every turn reached a fact
    await mem.aclose()


ELSEWHERE = "another-host:4242:abcd1234:0123456789abcdef:99"
"""A holder on another machine: whether it lives cannot be known here."""


async def test_a_lease_held_elsewhere_is_reported_with_its_expiry_and_the_cli_exits_1(tmp_path: Path) -> None:
    store = tmp_path / "store"
    mem = system(model="rules", store=str(store), embedder=HashingEmbedder(64))
    leases = Leases(mem.store)
    held = leases.acquire(lease_key("consolidate", USER), holder=ELSEWHERE, ttl=timedelta(minutes=10))
    assert held is not None

    report = await mem.import_conversations(USER, history(sessions=2), observe_window=1)
    (work,) = report.leased
    assert (work.what, work.holder, work.until) == ("consolidation", ELSEWHERE, held.expires_at)
    await mem.aclose()

    conversations = tmp_path / "history.json"
    conversations.write_text(json.dumps(history(sessions=2)))
    args = ["--store", str(store), "import-history", "u-1", str(conversations), "--model", "rules"]
    result = await asyncio.to_thread(CliRunner().invoke, cli, args, catch_exceptions=False)  # it runs its own loop
    assert result.exit_code == 1, result.output
    assert f"consolidation is leased by {ELSEWHERE} (until {held.expires_at.isoformat(timespec='seconds')})" in (
        result.output
    )
    assert "tiermem: error: not done" in result.output


def _gone_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _with(holder: str, **parts: str) -> str:
    host, pid, rand, machine, start = holder.split(":")
    named = {"host": host, "pid": pid, "rand": rand, "machine": machine, "start": start} | parts
    return ":".join(named.values())


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a holder's death is known only with /proc")
@pytest.mark.parametrize(
    ("change", "dead"),
    [
        ({}, False),
        ({"pid": "gone"}, True),
        ({"start": "1"}, True),  # its pid now names another process
        ({"host": "another-host", "pid": "gone"}, False),
        ({"machine": "0123456789abcdef", "pid": "gone"}, False),  # another container or boot
        ({"start": ""}, False),  # no /proc where it ran
    ],
    ids=["alive", "gone", "pid-reused", "other-host", "other-machine", "unknown-start"],
)
def test_a_holder_is_dead_only_when_this_machine_can_tell(change: dict[str, str], dead: bool) -> None:
    parts = {k: (str(_gone_pid()) if v == "gone" else v) for k, v in change.items()}
    assert dead_here(_with(process_holder(), **parts)) is dead
    assert socket.gethostname() in process_holder() and str(os.getpid()) in process_holder()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a holder's death is known only with /proc")
async def test_a_dead_holders_leases_are_taken_over_one_or_many_and_its_release_is_a_no_op(tmp_path: Path) -> None:
    mem = system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(64))
    leases, ttl = Leases(mem.store), timedelta(minutes=10)
    dead = _with(process_holder(), pid=str(_gone_pid()))
    gone = [leases.acquire(key, holder=dead, ttl=ttl) for key in ("k-1", "k-2", "k-3")]
    live = leases.acquire("k-4", holder=ELSEWHERE, ttl=ttl)

    one = leases.acquire("k-1", holder=process_holder(), ttl=ttl)
    many = leases.acquire_many(["k-2", "k-3", "k-4"], holder=process_holder(), ttl=ttl)

    assert one is not None and set(many) == {"k-2", "k-3"}  # k-4's holder may live: not taken
    for lease in gone:
        assert lease is not None
        leases.release(lease)  # the dead holder's token: changes nothing
    assert leases.holder("k-1") == one and leases.holder("k-4") == live
    assert {k: leases.holder(k) for k in many} == many
    await mem.aclose()
