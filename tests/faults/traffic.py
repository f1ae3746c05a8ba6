"""One process of the governance scenario (``tests/faults/governed.py``), run by ``child.py traffic``.

Three kinds of work at once, on one event loop:

- its own users side by side: each turn captured, each session ended, the user consolidated;
- governance of other processes' users, on facts as they appear: pin, update, forget, feedback (after a
  recall), two updates of one fact at once, and an attempt on another user's fact under the wrong user;
- erasure of some users once their capturing process is half way through them.

Every piece of work on a user begins inside the store's erasure fence, entered while holding a shared
``flock`` of the user's lock file after checking that nobody is erasing the user. The eraser first
marks the user as being erased (a file), takes the lock exclusively once (so work checking just then
has entered its fence), and only then calls ``erase_user``. So each piece of work either began before
the erasure or never starts, and anything of an erased user found afterwards is the library's doing.

Each piece of governance is logged as one JSON line (``ops-<index>.jsonl``), each erasure likewise
(``erased.jsonl``): the census (``tests/faults/governance_census.py``) checks each against the store.
Loaded by its file path: it imports only the standard library and tiermem.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from tiermem import InvalidArgumentError, MemoryContext, MemoryNotFoundError, MemorySystem, UserErasedError

KINDS = ("pin", "update", "forget", "feedback", "update twice", "cross-user")
_WAIT = 240.0  # seconds a piece of governance waits for a fact to act on: a bound, not an expectation


class Traffic:
    """The shared folder's files: locks, erase marks, progress and the logs."""

    def __init__(self, mem: MemorySystem, folder: Path, index: int) -> None:
        self.mem = mem
        self.folder = folder
        self.index = index
        self.failures: list[str] = []
        self._busy = 0

    def _path(self, kind: str, user: str) -> Path:
        return self.folder / f"{kind}-{user}"

    def erasing(self, user: str) -> bool:
        return self._path("erasing", user).exists()

    @asynccontextmanager
    async def begun(self, user: str) -> AsyncIterator[bool]:
        """True: the block's work on ``user`` began in the erasure fence before any erasure of them."""
        if self.erasing(user):  # no new shared lock once marked: the eraser's exclusive one is not starved
            yield False
            return
        with self._path("lock", user).open("a") as lock:
            await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_SH)
            if self.erasing(user):
                fcntl.flock(lock, fcntl.LOCK_UN)
                yield False
                return
            async with self.mem.store.fenced():
                fcntl.flock(lock, fcntl.LOCK_UN)
                self._busy += 1
                busy = self.folder / f"busy-{user}.{self.index}.{self._busy}"  # the eraser waits for one
                busy.touch()
                try:
                    yield True
                finally:
                    busy.unlink()

    def log(self, name: str, record: dict[str, Any]) -> None:
        line = json.dumps({**record, "process": self.index}) + "\n"
        fd = os.open(self.folder / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    async def attempt(self, what: str, user: str, work: Callable[[], Awaitable[object]]) -> str:
        """Run ``work`` on ``user`` if it may begin: "ok", "skipped" (being erased), "erased" or "not found"."""
        async with self.begun(user) as may:
            if not may:
                return "skipped"
            try:
                await work()
            except UserErasedError:
                return "erased"
            except MemoryNotFoundError:
                return "not found" if self.erasing(user) else self._failed(what, "MemoryNotFoundError")
            except Exception as exc:  # every other failure is reported, not raised
                return self._failed(what, f"{type(exc).__name__}: {exc}")
        return "ok"

    def _failed(self, what: str, why: str) -> str:
        self.failures.append(f"{what}: {why}"[:400])
        return "failed"

    # -- capture and consolidation of this process's users ---------------------------------------

    async def capture(self, specs: Sequence[dict[str, Any]]) -> None:
        """Each user's turns in order, users side by side (one of them always has work in flight)."""
        users: dict[str, list[dict[str, Any]]] = {}
        for spec in specs:
            users.setdefault(spec["user_id"], []).append(spec)
        await asyncio.gather(*(self._user(user, turns) for user, turns in users.items()))

    async def _user(self, user: str, specs: Sequence[dict[str, Any]]) -> None:
        sessions: dict[str, list[dict[str, Any]]] = {}
        for spec in specs:
            sessions.setdefault(spec["session_id"], []).append(spec)
        for sid, turns in sessions.items():
            ctx = MemoryContext(user_id=user, session_id=sid)
            for spec in turns:
                outcome = await self.attempt(f"capture {user}", user, partial(self.mem.capture, ctx, spec["messages"]))
                if outcome == "ok":
                    with self._path("progress", user).open("a") as out:
                        out.write(f"{spec['token']}\n")
            await self.attempt(f"end {user}", user, partial(self.mem.end_session, ctx))
            await self.attempt(f"consolidate {user}", user, partial(self.mem.consolidate, ctx))

    # -- erasure mid-run ----------------------------------------------------------------------------

    async def erase(self, user: str, after: int, seed: int) -> None:
        """Erase ``user`` once ``after`` of their turns were captured, while work on them is under way."""
        deadline = time.monotonic() + _WAIT
        progress = self._path("progress", user)
        while time.monotonic() < deadline:
            if progress.exists() and len(progress.read_text().split()) >= after:
                break
            await asyncio.sleep(0.05)
        while time.monotonic() < deadline and not list(self.folder.glob(f"busy-{user}.*")):
            await asyncio.sleep(0.005)
        await asyncio.sleep(random.Random(seed).uniform(0, 0.05))  # early in that work, before its model call ends
        self._path("erasing", user).touch()
        with self._path("lock", user).open("a") as lock:  # work that checked before the mark is fenced now
            await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
            fcntl.flock(lock, fcntl.LOCK_UN)
        captured = len(progress.read_text().split()) if progress.exists() else 0
        try:
            report = await self.mem.erase_user(MemoryContext(user_id=user))
        except Exception as exc:  # reported, not raised
            self._failed(f"erase {user}", f"{type(exc).__name__}: {exc}")
            return
        self.log("erased.jsonl", {"user": user, "captured before": captured, **report.model_dump(mode="json")})

    # -- governance of other processes' users -----------------------------------------------------

    async def govern(self, users: Sequence[str], ops: int, seed: int) -> None:
        """``ops`` pieces of governance over ``users`` in turn, each on a fact nobody governed yet."""
        if not users:
            return
        rng = random.Random(seed)
        used: set[str] = set()
        for n in range(ops):
            user = users[n % len(users)]
            kind = KINDS[n % len(KINDS)]
            other = users[(n + 1) % len(users)]
            if kind == "cross-user" and other == user:
                continue
            facts = await self._facts(user if kind != "cross-user" else other, used)
            if facts is None:
                self.log(f"ops-{self.index}.jsonl", {"kind": kind, "user": user, "outcome": "no fact"})
                continue
            fact = facts[rng.randrange(len(facts))]
            used.add(fact["id"])
            record = {"kind": kind, "user": user, "fact": fact["id"], "text": fact["text"]}
            if kind == "cross-user":  # the fact is ``other``'s; asked for as ``user``'s
                record |= {"owner": other, **await self._cross_user(user, fact["id"], n)}
            else:
                record |= await self._govern_one(kind, user, fact, n, seed)
                used |= {record.get("new"), *record.get("won", ())} - {None}  # a new version is governed too
            self.log(f"ops-{self.index}.jsonl", record)

    async def _facts(self, user: str, used: set[str]) -> list[dict[str, str]] | None:
        """``user``'s active facts nobody governed yet, once there are some; None if the user is erased."""
        ctx = MemoryContext(user_id=user)
        deadline = time.monotonic() + _WAIT
        while time.monotonic() < deadline and not self.erasing(user):
            page = await self.mem.list(ctx, tier="semantic", status="active", limit=1000)
            free = [{"id": i.id, "text": i.text} for i in page.items if i.id not in used]
            if free:
                return free
            await asyncio.sleep(0.1)
        return None

    async def _govern_one(self, kind: str, user: str, fact: dict[str, str], n: int, seed: int) -> dict[str, Any]:
        ctx = MemoryContext(user_id=user)
        fid = fact["id"]
        done: dict[str, Any] = {}
        new_text = f"The user now says tk{(seed * 100_000 + self.index * 1000 + n) % 16**10:010x}."

        async def work() -> None:
            if kind == "pin":
                await self.mem.pin(ctx, fid)
            elif kind == "update":
                done["new"] = (await self.mem.update(ctx, fid, text=new_text)).id
            elif kind == "forget":
                await self.mem.forget(ctx, fid)
            elif kind == "feedback":
                found = await self.mem.recall(ctx, fact["text"], tiers=["semantic"], limit=50)
                if fid not in {i.id for i in found}:
                    done["recalled"] = False
                    return
                done["receipt"] = found.receipt
                await self.mem.feedback(ctx, found.receipt, used=[fid])
            else:  # "update twice": two corrections of one fact at once, one must win
                texts = [new_text, new_text.replace("now says", "says instead")]
                updates = (self.mem.update(ctx, fid, text=t) for t in texts)
                results = await asyncio.gather(*updates, return_exceptions=True)
                done["won"] = [r.id for r in results if not isinstance(r, BaseException)]
                refused = [r for r in results if isinstance(r, InvalidArgumentError)]  # "already superseded"
                done["refused"] = len(refused)
                errors = [r for r in results if isinstance(r, BaseException) and r not in refused]
                if errors:
                    raise errors[0]

        if kind in ("update", "update twice"):
            done["new_text"] = new_text
        done["outcome"] = await self.attempt(f"{kind} {user}", user, work)
        return done

    async def _cross_user(self, user: str, fid: str, n: int) -> dict[str, Any]:
        """Pin, update or forget another user's fact by id: each must be refused as not found."""
        ctx = MemoryContext(user_id=user)
        how = ("pin", "update", "forget")[n % 3]
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "pin": partial(self.mem.pin, ctx, fid),
            "update": partial(self.mem.update, ctx, fid, text="The user was here."),
            "forget": partial(self.mem.forget, ctx, fid),
        }
        async with self.begun(user) as may:
            if not may:
                return {"how": how, "outcome": "skipped"}
            try:
                await calls[how]()
            except MemoryNotFoundError:
                return {"how": how, "outcome": "refused"}
            except UserErasedError:
                return {"how": how, "outcome": "erased"}
        return {"how": how, "outcome": "done"}  # the census counts it: another user's fact changed


async def run(mem: MemorySystem, config: dict[str, Any], index: int) -> dict[str, Any]:
    """This process's share of the scenario (``config`` written by ``governed.py``)."""
    traffic = Traffic(mem, Path(config["folder"]), index)
    specs = json.loads(Path(config["specs"]).read_text())
    await asyncio.gather(
        traffic.capture(specs),
        traffic.govern(config["govern"], config["ops"], config["seed"] + index),
        *(traffic.erase(user, after, config["seed"]) for user, after in config["erase"]),
    )
    return {"failures": traffic.failures, "captured": len(specs)}
