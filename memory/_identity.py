"""Deterministic ids, every recipe in one place: the same input always names the same record, so reruns
upsert instead of duplicating.

Each record kind has its own function; nothing else in tiermem hashes parts into an id. An id is the
kind's prefix plus a 32-hex-digit BLAKE2b digest of its parts. Changing a recipe orphans stored records,
so the recipes (prefixes, parts and their order) are frozen.

Working entries have two recipes on purpose, for two different identities:

- :func:`observation_id`: an observation is anchored to the turn it came from and its position in
  the observer's answer, so observing the same turn again replaces it whatever the wording;
- :func:`working_entry_id`: an entry the application adds by hand is anchored to its content, so adding
  the same note twice is idempotent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

__all__ = [
    "Scope",
    "alias_id",
    "capture_keys",
    "chunk_id",
    "content_hash",
    "digest_id",
    "document_id",
    "edge_id",
    "episode_id",
    "erasure_key",
    "fact_id",
    "fact_set_fingerprint",
    "lease_key",
    "observation_id",
    "turn_id",
    "working_entry_id",
]


class Scope(Protocol):
    """Whose record it is: a ``MemoryContext`` or any record of the user."""

    @property
    def namespace(self) -> str: ...

    @property
    def user_id(self) -> str: ...


class _TurnLike(Scope, Protocol):
    @property
    def session_id(self) -> str: ...

    @property
    def id(self) -> str: ...


class _Versioned(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def updated_at(self) -> datetime: ...


def _stable_id(kind: str, *parts: str) -> str:
    """``kind`` prefix plus a 32-hex-digit digest of the parts (unambiguously joined)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=16).hexdigest()
    return f"{kind}_{digest}"


def _fold(text: str) -> str:
    """Case and spacing ignored."""
    return " ".join(text.lower().split())


def turn_id(scope: Scope, *, session_id: str, key: str) -> str:
    """The captured turn of a session named by its idempotency ``key`` (see :func:`capture_keys`).

    Not by its position: two processes capturing into one session at once must never name their
    turns alike, and a rerun of the same capture must name its turn alike.
    """
    return _stable_id("turn", scope.namespace, scope.user_id, session_id, "key", key)


def capture_keys(
    messages: Iterable[tuple[str, str | None, str]],
    *,
    key: str | None,
    at: datetime | None,
    now: datetime,
    window: timedelta,
    previous: Sequence[str] = (),
) -> list[str]:
    """The idempotency keys a capture may already be journaled under; the first names a new turn.

    The caller's ``key`` when given; else the messages with the turn's own time ``at``; else the
    messages, the turn they follow (``previous``: the ids of the session's latest turns, newest first)
    and ``now`` in ``window``-wide buckets. A rerun of a capture whose outcome was unknown finds its
    turn (journaled after the turn before the latest one, in this window or the one before); the same
    words said again later in the session, after another turn, are a new turn.
    """
    if key is not None:
        return [f"caller\x1f{key}"]
    content = _stable_id("msgs", *("\x1e".join((role, name or "", text)) for role, name, text in messages))
    if at is not None:
        return [f"at\x1f{content}\x1f{at.isoformat()}"]
    bucket = int(now.timestamp() // window.total_seconds())
    after = list(dict.fromkeys([*previous[:2], ""]))[:2]  # "": the session's start
    return [f"window\x1f{content}\x1f{p}\x1f{b}" for p in after for b in (bucket, bucket - 1)]


def observation_id(turn: _TurnLike, *, index: int) -> str:
    """The ``index``-th observation the observer made of one turn."""
    return _stable_id("wm", turn.namespace, turn.user_id, turn.session_id, turn.id, str(index))


def working_entry_id(scope: Scope, *, session_id: str, subject: str, text: str) -> str:
    """A working-memory entry added by hand: the same text about the same subject is the same entry (case ignored)."""
    return _stable_id("wm", scope.namespace, scope.user_id, session_id, subject, text.lower())


def episode_id(scope: Scope, *, session_id: str) -> str:
    """One episode per session, so re-encoding replaces instead of duplicating."""
    return _stable_id("ep", scope.namespace, scope.user_id, session_id)


def fact_id(scope: Scope, *, subject: str, text: str) -> str:
    """The same fact about the same subject always gets the same id (case and spacing ignored)."""
    return _stable_id("fact", scope.namespace, scope.user_id, subject, _fold(text))


def content_hash(data: bytes) -> str:
    """A document's bytes named: the same bytes, the same hash."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def document_id(scope: Scope, *, content: str, chunking: str) -> str:
    """One document per content hash and chunking recipe: ingesting the same bytes the same way again is a no-op."""
    return _stable_id("doc", scope.namespace, scope.user_id, content, chunking)


def chunk_id(scope: Scope, *, document_id: str, index: int) -> str:
    """The ``index``-th chunk of a document: a rerun after a crash names each chunk alike."""
    return _stable_id("chunk", scope.namespace, scope.user_id, document_id, str(index))


def edge_id(scope: Scope, *, source: str, relation: str, target: str) -> str:
    """One edge per (source, relation, target)."""
    return _stable_id("edge", scope.namespace, scope.user_id, source, relation, target)


def digest_id(scope: Scope) -> str:
    """One digest per user."""
    return _stable_id("digest", scope.namespace, scope.user_id)


def alias_id(scope: Scope, *, name: str) -> str:
    """One alias per display name (lowercased by the caller)."""
    return _stable_id("alias", scope.namespace, scope.user_id, name)


def fact_set_fingerprint(facts: Iterable[_Versioned]) -> str:
    """Names a set of facts at their current versions: it changes when any fact is added, removed or updated."""
    return _stable_id("facts", *sorted(f"{f.id}@{f.updated_at.isoformat()}" for f in facts))


def lease_key(kind: str, scope: Scope, *, session_id: str | None = None) -> str:
    """The lease on one user's (or session's) ``kind`` of work; hashed, so no id lingers in the leases table."""
    return _stable_id(f"lease-{kind}", scope.namespace, scope.user_id, session_id or "")


def erasure_key(scope: Scope) -> str:
    """The mark of a user's erasure (see ``Store.mark_erased``); hashed, so the erased id lingers nowhere."""
    return _stable_id("erased", scope.namespace, scope.user_id)
