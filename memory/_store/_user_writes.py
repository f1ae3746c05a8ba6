"""One read-modify-write of a user's memories at a time, across threads and processes.

A correction (update, pin, feedback, forget), a consolidation applying its plan and the janitor's
pass each read some of a user's rows, decide, and write whole rows back: two at once would each
write what it read, and the later commit would undo the earlier (a lost pin, two active versions of
one fact). Each holds the user's write lease from its read to its commit, and never across a model
call. The lease is kept in the store like every lease (see :mod:`._leases`), so processes on other
machines wait too; threads of one process queue on a lock first, so the store sees one claim per
process at a time. A conditional write per row would not do: a correction writes two rows (the new
version and the one it supersedes) that must land together or not at all, and LanceDB applies a
merge's condition row by row.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta

from .._blocking import run_blocking
from .._errors import StoreConflictError
from .._identity import Scope, lease_key
from ._leases import Lease, Leases
from ._store import Store

__all__ = ["WRITE_TTL", "user_writes", "user_writes_async"]

WRITE_TTL = timedelta(seconds=30)
"""How long a dead writer's lease blocks the user's other writers (a live one holds it for one commit)."""
_WAIT = 90.0  # seconds: longer than WRITE_TTL, so a dead holder's lease expires while we wait
_STRIPES = tuple(threading.RLock() for _ in range(64))  # bounded: a lock per user would grow without end
_held = threading.local()


@contextmanager
def user_writes(store: Store, scope: Scope, *, wait: float = _WAIT) -> Iterator[None]:
    """Hold ``scope``'s user's write lease for the block (blocking: call it off the event loop).

    Re-entrant in one thread. Raises :class:`StoreConflictError` after ``wait`` seconds without it.
    """
    key = lease_key("write", scope)
    held: set[str] = _held.__dict__.setdefault("keys", set())
    if key in held:
        yield
        return
    with _STRIPES[hash(key) % len(_STRIPES)]:
        leases = Leases(store)
        lease = _acquire(leases, key, wait)
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
            leases.release(lease)


@asynccontextmanager
async def user_writes_async(store: Store, scope: Scope, *, wait: float = _WAIT) -> AsyncIterator[None]:
    """:func:`user_writes` for a block of several ``run_blocking`` steps (not re-entrant: it spans threads)."""
    leases = Leases(store)
    lease = await run_blocking(_acquire, leases, lease_key("write", scope), wait)
    try:
        yield
    finally:
        await run_blocking(leases.release, lease)


def _acquire(leases: Leases, key: str, wait: float) -> Lease:
    holder = f"{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"  # one per hold: never re-entered
    deadline, delay = time.monotonic() + wait, 0.005
    while (lease := leases.acquire(key, holder=holder, ttl=WRITE_TTL)) is None:
        if time.monotonic() > deadline:
            raise StoreConflictError(f"another writer held this user's memories for over {wait:.0f} s")
        time.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 0.25)
    return lease
