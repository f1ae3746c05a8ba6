"""``erase_user``: every row of the user in every table, and its bytes on disk, are gone.

The secret is written in plain text (a turn, a working entry, an episode, a fact, an edge, an alias,
the digest and an ingested document) and every file under the store folder is scanned for its raw bytes. A positive
control first checks that the scan finds it before the erase, so a compressed or encoded copy
could not make the zero-hits check pass vacuously.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import tiermem
from tests.fakes import messages_of
from tests.subprocesses import clean_env
from tiermem import Fact, MemoryContext, MemorySystem, Store, system
from tiermem.jobs import run_janitor
from tiermem.memory._store._leases import Leases
from tiermem.memory._store._purge import FENCE, PENDING, RECHECK
from tiermem.memory.testing import FrozenClock, HashingEmbedder

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

SECRET = "Qzxvorplum"  # a first name, so it becomes a subject, an edge endpoint and an alias
VICTIM = MemoryContext(user_id="u-erase-7f3k", session_id="s-1")
BYSTANDER = MemoryContext(user_id="u-keep", session_id="s-1")


def needles() -> list[bytes]:
    """The secret as written and as the full-text index stores it, and the erased user's id."""
    return [SECRET.encode(), SECRET.lower().encode(), VICTIM.user_id.encode()]


def scan(root: Path) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path.relative_to(root)}: {n.decode()}" for n in needles() if n in data]
    return hits


def opened(root: Path, embedder: HashingEmbedder) -> Store:
    """The store of one process: no other's commit or read to wait for, so the purge waits for none."""
    return Store(str(root), embedder_id=embedder.id, dimensions=embedder.dimensions, purge_drain=timedelta(0))


async def populate(mem: MemorySystem, ctx: MemoryContext, name: str) -> None:
    await mem.add_alias(ctx, f"{name}son")
    await mem.capture(ctx, [{"role": "user", "content": f"My wife {name} is allergic to shellfish."}])
    await mem.capture(ctx, [{"role": "user", "content": "I work at Acme Corp as a data engineer."}])
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    await mem.digest(ctx)
    await mem.add_semantic_fact(ctx, f"{name} likes the colour teal.", subject=name.lower())
    await mem.ingest(ctx, f"{name} keeps the spare keys in the blue box.".encode(), name=f"{name}-notes.txt")


@pytest.mark.parametrize("bystander", [True, False], ids=["other-user-present", "only-user"])
async def test_erase_leaves_zero_bytes_of_the_secret_on_disk(
    tmp_path: Path, clock: FrozenClock, embedder: HashingEmbedder, bystander: bool
) -> None:
    root = tmp_path / "store"
    store = opened(root, embedder)
    mem = system(model="rules", store=store, embedder=embedder, clock=clock, semantic={"relations": True})
    if bystander:
        await populate(mem, BYSTANDER, "Moni")
    await populate(mem, VICTIM, SECRET)
    forgotten = await mem.add_semantic_fact(VICTIM, f"{SECRET} once forgot her keys.", subject=SECRET.lower())
    await mem.forget(VICTIM, forgotten.id)  # deleted earlier: its bytes still sit in old versions
    before = await mem.stats(VICTIM)
    assert all(before.counts[t] for t in ("working", "episodic", "semantic", "digest", "relation", "turns", "aliases"))
    assert scan(root), "positive control: the secret must be visible on disk before the erase"
    kept_before = await mem.stats(BYSTANDER)

    report = await mem.erase_user(VICTIM)

    assert report.purged and scan(root) == []
    assert set(report.rows) == {
        "working", "episodes", "facts", "digests", "edges", "turns", "aliases", "chunks", "documents",
    }  # fmt: skip
    assert all(report.rows.values())
    after = await mem.stats(VICTIM)
    assert all(not counts for counts in after.counts.values())
    assert (await mem.list(VICTIM)).items == ()
    kept = await mem.stats(BYSTANDER)
    assert kept.counts == kept_before.counts
    if bystander:
        recalled = await mem.recall(BYSTANDER, "What is Moni allergic to?")
        assert any("shellfish" in i.text for i in recalled)
        assert await mem.connections(BYSTANDER, "moni")


async def test_the_store_keeps_working_after_an_erase(
    tmp_path: Path, clock: FrozenClock, embedder: HashingEmbedder
) -> None:
    root = tmp_path / "store"
    mem = system(
        model="rules", store=opened(root, embedder), embedder=embedder, clock=clock, semantic={"relations": True}
    )
    await populate(mem, VICTIM, SECRET)
    await mem.erase_user(VICTIM)

    await populate(mem, VICTIM, "Moni")  # the same user starts again from nothing

    recalled = await mem.recall(VICTIM, "shellfish allergy")
    assert any("Moni" in i.text for i in recalled)
    stats = await mem.stats(VICTIM)
    assert stats.counts["turns"] == {"observed": 2}
    reopened = system(model="rules", store=str(root), embedder=embedder, clock=clock)
    assert (await reopened.stats(VICTIM)).counts == stats.counts


async def test_an_erase_while_another_process_purges_is_pending_until_the_janitor_purges(
    tmp_path: Path, clock: FrozenClock, embedder: HashingEmbedder
) -> None:
    root = tmp_path / "store"
    store = opened(root, embedder)
    mem = system(model="rules", store=store, embedder=embedder, clock=clock, semantic={"relations": True})
    await populate(mem, VICTIM, SECRET)
    other = Leases(store).acquire(FENCE, holder="another process purging", ttl=timedelta(minutes=5))
    assert other is not None

    report = await mem.erase_user(VICTIM)

    assert not report.purged and all(report.rows.values())  # the rows are gone, their bytes not yet
    assert all(not counts for counts in (await mem.stats(VICTIM)).counts.values())
    assert scan(root) and store.meta()[PENDING]
    Leases(store).release(other)
    await run_janitor(mem)
    assert scan(root) == [] and not store.meta()[PENDING]


def test_a_write_waits_while_another_process_holds_the_purge_fence(tmp_path: Path, embedder: HashingEmbedder) -> None:
    store = opened(tmp_path / "store", embedder)
    assert store.count("facts") == 0  # the table made first, as in a store in use: making one waits at the fence too
    fence = Leases(store).acquire(FENCE, holder="another process purging", ttl=timedelta(minutes=5))
    assert fence is not None
    # Making the tables passed the fence a moment ago, and a writer trusts that look for RECHECK seconds
    # (a purger's drain covers it); past that, every commit attempt looks again.
    time.sleep(RECHECK + 0.2)
    now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    fact = Fact(
        id="f-1", namespace="default", user_id="u-1", subject="user", text="I like tea.",
        created_at=now, updated_at=now, reinforced_at=now,
    )  # fmt: skip
    landed = threading.Event()

    def write() -> None:
        store.upsert("facts", [fact], np.ones((1, embedder.dimensions), dtype=np.float32))
        landed.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert not landed.wait(1.5)  # held: the write cannot have committed, however long it waits
    assert store.count("facts") == 0
    Leases(store).release(fence)
    writer.join(timeout=60)
    assert landed.is_set() and store.count("facts") == 1


PURGER = """
import sys
from datetime import timedelta
from tiermem import Store
from tiermem.memory.testing import HashingEmbedder

embedder = HashingEmbedder(256)  # the embedder fixture's
store = Store(sys.argv[1], embedder_id=embedder.id, dimensions=embedder.dimensions, purge_drain=timedelta(seconds=30))
store.request_purge()
store.purge_pending()  # takes the fence, then waits out the drain: killed there
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a holder's death is known only with /proc")
async def test_a_purger_killed_holding_the_fence_blocks_no_write_and_its_purge_is_taken_over(
    tmp_path: Path, clock: FrozenClock, embedder: HashingEmbedder
) -> None:
    root = tmp_path / "store"
    store = opened(root, embedder)
    mem = system(model="rules", store=store, embedder=embedder, clock=clock, semantic={"relations": True})
    await populate(mem, VICTIM, SECRET)
    env = clean_env(PYTHONPATH=str(Path(tiermem.__file__).resolve().parents[1]))  # the tree under test
    purger = subprocess.Popen([sys.executable, "-c", PURGER, str(root)], cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    leases = Leases(store)
    deadline = time.monotonic() + 120  # a bound for a slow machine, not an expected duration
    while leases.holder(FENCE) is None and purger.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    held = leases.holder(FENCE)
    assert held is not None, purger.stderr.read() if purger.stderr else ""
    purger.send_signal(signal.SIGKILL)
    purger.wait(timeout=60)
    assert leases.holder(FENCE) == held  # its fence stays, live for minutes more

    await mem.capture(MemoryContext(user_id="u-other", session_id="s-1"), messages_of("I like tea."))
    assert leases.holder(FENCE) == held  # the write passed the dead purger's fence, not waiting for it to expire
    report = await mem.erase_user(VICTIM)

    assert report.purged and scan(root) == []  # the dead purger's fence taken over, the purge done
    assert not store.meta()[PENDING] and leases.holder(FENCE) is None
