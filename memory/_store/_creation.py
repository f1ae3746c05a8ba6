"""Which rows of a table a racing create overwrote, and how a table is stamped so that it can tell.

Creating a table is not atomic in Lance (lance#4451). Processes that all found a table absent all
create it; a create that commits after another's is rebased onto the table that now exists and
commits as an Overwrite (at version 2 or later), so the rows written before it read as gone. Nothing
conflicts: the late process succeeds, as does every other.

So each create stamps the table's ``id`` field with a creation of its own (:data:`CREATED_BY`).
Every later write keeps the schema's metadata (appends, merges, deletes, indexes, compaction; ``purge``
and ``reembed`` rewrite a table and carry the stamp on), and version 1 is committed once, by the
creation that made the table. A latest version stamped otherwise (or not at all) is a racing
create's Overwrite; :func:`clobbered` says which older versions hold the rows it hid. The store
(:mod:`._tables`, where the engine calls are) inserts those rows whose id is absent, newest first,
then stamps the table with the creation of version 1 again, so the repair is done once.

Reading version 1 costs requests on every open, so the first writer to check a table also marks it
:data:`SETTLED` with the stamp it checked. A racing create's Overwrite brings a schema of its own,
without the mark, so a table whose mark names its stamp (:func:`is_settled`, read from the schema
every open reads anyway) needs no check. Both commits are made from the version checked: a create
landing in between makes them conflict, and the check runs again.

A writer checks a table on its first open in the process (the late process right after its create)
and before compaction cleans old versions up. What insert-if-absent on ``id`` (the tables' primary key)
means for what happened after the Overwrite: a row written again since keeps its newer value, none is
doubled, and a row that a delete *by predicate* (erasing a user, TTL hygiene) would have removed, had
it not been hidden, comes back; the window is the late process's own create, as it repairs before it
returns the table. Nothing is restored in a table whose version 1 is unstamped (made before stamps:
marked settled with a fresh stamp, except the leases table, which an older tiermem could then no
longer open) or cleaned up (the race, at its creation, was long ago, and compaction checks first).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = [
    "CREATED_BY",
    "GONE",
    "SETTLED",
    "Repair",
    "Stamp",
    "clobbered",
    "is_settled",
    "new_creation",
    "settle",
    "stamp_of",
    "stamped",
]

CREATED_BY = "tiermem:created-by"
"""The ``id`` field's metadata key naming the creation that committed the version's table."""
SETTLED = "tiermem:settled"
"""The ``id`` field's metadata key naming the stamp a writer found no racing create's Overwrite over."""


class _Gone(enum.Enum):
    GONE = "gone"


GONE = _Gone.GONE
"""A version cleaned up from the table's history."""

Stamp = str | None | _Gone
"""A version's creation: its stamp, None when unstamped (an older tiermem), or GONE."""


@dataclass(frozen=True, kw_only=True)
class Repair:
    """What to restore in a table a racing create overwrote."""

    made: str
    """The stamp of version 1: the creation that made the table, stamped on it again once repaired."""
    sources: tuple[int, ...]
    """The versions whose rows an Overwrite hid, newest first (of one id in several, the newest wins)."""


def stamped(metadata: Mapping[bytes, bytes] | None, made: str | None = None) -> dict[bytes, bytes]:
    """The ``id`` field's metadata stamped with creation ``made``: a fresh one (a create) if None."""
    return {**(metadata or {}), CREATED_BY.encode(): (made or new_creation()).encode()}


def new_creation() -> str:
    return uuid.uuid4().hex


def settle(made: str) -> dict[str, str]:
    """The ``id`` field's metadata to commit once a table is checked: stamped ``made``, and settled there."""
    return {CREATED_BY: made, SETTLED: made}


def is_settled(metadata: Mapping[bytes, bytes] | None) -> bool:
    """Whether a writer checked this table's stamp (no Overwrite by a racing create since: it would drop the mark)."""
    made = stamp_of(metadata)
    return made is not None and (metadata or {}).get(SETTLED.encode()) == made.encode()


def stamp_of(metadata: Mapping[bytes, bytes] | None) -> str | None:
    value = (metadata or {}).get(CREATED_BY.encode())
    return None if value is None else value.decode()


def clobbered(latest: int, stamp: Callable[[int], Stamp]) -> Repair | None:
    """What a racing create overwrote in the table whose latest version is ``latest``; None if nothing.

    ``stamp(version)`` reads one version's stamp. Walking back from the latest version while the
    stamp is not version 1's, each change of stamp between two versions is a create's Overwrite of
    the older one: that one's rows are to restore. The walk stops at the newest version stamped
    like version 1, whose rows are restored too, so a table repaired before is not repaired again.
    """
    if latest <= 1:
        return None
    made = stamp(1)
    newer = stamp(latest)
    if not isinstance(made, str) or newer == made:  # unstamped (older) or cleaned-up history; or no race
        return None
    sources: list[int] = []
    for version in range(latest - 1, 0, -1):
        older = made if version == 1 else stamp(version)
        if older is GONE:  # cleaned up: what it held is gone from the history too
            break
        if older != newer:
            sources.append(version)
        if older == made:
            break
        newer = older
    return Repair(made=made, sources=tuple(sources))
