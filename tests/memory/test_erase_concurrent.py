"""``erase_user`` beside writers and readers in other processes: nobody fails, nothing breaks, the bytes go.

Two writer processes capture and recall for other users while a third erases one user, all
released at one moment (:func:`run_together`), on a local folder and on moto's S3 server. Every
capture and recall must succeed, every table must stay readable afterwards, the other users keep
every turn they captured, and once the erase reports its purge done no file of a local store holds
the erased user's text.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import tiermem
from tests.object_storage import store_at
from tests.subprocesses import run_together
from tiermem import MemoryContext, system

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")]

SECRET = "Qzxvorplum"
VICTIM = MemoryContext(user_id="u-erase-7f3k", session_id="s-1")
CAPTURES = 30  # per writer: they write all through the erase (some 12 s)

WORKER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from pathlib import Path
    from tiermem import MemoryContext, system

    store, options, role = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    me, go = int(sys.argv[4]), Path(sys.argv[5])
    mem = system(model="rules", store=store, storage_options=options, embedder="hashing")
    victim = MemoryContext(user_id="u-erase-7f3k", session_id="s-1")

    async def main():
        out = {"failures": [], "captured": 0, "report": None, "seconds": 0.0}
        await mem.stats(victim)  # opened: the store and its tables
        (go.parent / f"ready-{me}").touch()
        while not go.exists():
            time.sleep(0.005)
        start = time.monotonic()
        try:
            return await work(out)
        finally:
            out["seconds"] = round(time.monotonic() - start, 1)

    async def work(out):
        if role == "erase":
            await asyncio.sleep(0.5)  # the writers are mid-stream
            try:
                out["report"] = (await mem.erase_user(victim)).model_dump(mode="json")
            except Exception as exc:
                out["failures"].append(f"erase: {type(exc).__name__}: {exc}"[:300])
            return out
        for i in range(%(captures)d):
            ctx = MemoryContext(user_id=f"u-w{me}-{i %% 4}", session_id="s-1")
            try:
                await mem.capture(ctx, [{"role": "user", "content": f"Writer {me} note {i}: I like tea number {i}."}])
                out["captured"] += 1
                await mem.recall(ctx, "tea")
            except Exception as exc:
                out["failures"].append(f"{type(exc).__name__}: {exc}"[:300])
        return out

    print(json.dumps(asyncio.run(main())))
    """
) % {"captures": CAPTURES}


def scan(root: Path) -> list[str]:
    needles = [SECRET.encode(), SECRET.lower().encode(), VICTIM.user_id.encode()]
    return [
        f"{path.relative_to(root)}: {n.decode()}"
        for path in root.rglob("*")
        if path.is_file()
        for n in needles
        if n in path.read_bytes()
    ]


@pytest.mark.parametrize("where", ["local", "s3"], ids=["local-folder", "s3-server"])
async def test_erase_beside_two_writers_fails_no_one_and_leaves_no_bytes(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    uri, options = store_at(where, tmp_path, request)
    mem = system(model="rules", store=uri, storage_options=options, embedder="hashing")
    await mem.capture(VICTIM, [{"role": "user", "content": f"My wife {SECRET} is allergic to shellfish."}])
    await mem.add_semantic_fact(VICTIM, f"{SECRET} likes the colour teal.", subject=SECRET.lower())
    for me in range(2):
        for u in range(4):
            ctx = MemoryContext(user_id=f"u-w{me}-{u}", session_id="s-1")
            await mem.capture(ctx, [{"role": "user", "content": "I live in Lisbon."}])
    if where == "local":
        assert scan(Path(uri)), "positive control: the secret is on disk before the erase"

    env = {"PYTHONPATH": str(Path(tiermem.__file__).parents[1])}  # the tree under test
    args = [[uri, json.dumps(options), role] for role in ("write", "write", "erase")]
    outs = [json.loads(o) for o in run_together(WORKER, args, tmp_path, env=env)]

    failures = [f for o in outs for f in o["failures"]]
    assert failures == [], f"{len(failures)} failures, first: {failures[:3]}"
    report = outs[2]["report"]
    assert report["rows"]["turns"] == 1 and report["rows"]["facts"] >= 1
    reopened = system(model="rules", store=uri, storage_options=options, embedder="hashing")
    for me in range(2):  # every table readable, and every capture of the others kept
        turns = 0
        for u in range(4):
            ctx = MemoryContext(user_id=f"u-w{me}-{u}", session_id="s-1")
            stats = await reopened.stats(ctx)
            turns += sum(stats.counts["turns"].values())
            await reopened.recall(ctx, "tea")
        assert turns == 4 + CAPTURES
    assert all(not c for c in (await reopened.stats(VICTIM)).counts.values())
    if where == "local":
        assert report["purged"], "the purge ran once no writer could need the old versions"
        assert scan(Path(uri)) == []
