"""Leases: at most one holder of a key at a time, across processes and machines, kept in the store.

A lease is a row of the store's ``leases`` table (key, holder, token, expiry), written only by
conditional merges (see :meth:`Store.claim`), so it works wherever the store does: a local folder
or object storage, with no file locks and no lock service. A holder that dies blocks the key only
until its lease expires, or, for a holder named by :func:`process_holder`, until a process of the same
machine asks for the key and finds the holder gone (see :mod:`._holders`). Leases run on the wall clock
(UTC), not the library's injectable clock: other processes' clocks are wall clocks too. Keys such as
``"consolidate:<namespace>:<user_id>"`` go into filters only through :func:`sql_literal`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .._errors import InvalidArgumentError
from .._filters import MAX_FILTER_VALUE
from ._holders import dead_here
from ._store import Store

__all__ = ["Lease", "Leases"]

log = logging.getLogger(__name__)


def _wall_clock() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True)
class Lease:
    """A held lease: who holds ``key``, the token proving it, and until when."""

    key: str
    """What is leased, e.g. ``"consolidate:default:u-1"``."""
    holder: str
    """Who holds it (e.g. host and process id), for logs and for re-acquiring one's own lease."""
    token: str
    """Unique per acquisition: renew and release act only while the row still carries it."""
    expires_at: datetime
    """When another holder may take it (UTC)."""


class Leases:
    """Acquire, renew and release leases kept in ``store``."""

    def __init__(self, store: Store, *, now: Callable[[], datetime] = _wall_clock) -> None:
        self.store = store
        self._now = now

    def acquire(self, key: str, *, holder: str, ttl: timedelta) -> Lease | None:
        """A new lease on ``key`` for ``ttl``, or None while another holder's lease is live.

        An expired lease is taken over, as is one whose holder is a dead process of this machine;
        ``holder``'s own live lease is replaced (its old token stops working).
        """
        _check(key=key, holder=holder, ttl=ttl)
        now = self._now()
        lease = Lease(key=key, holder=holder, token=uuid.uuid4().hex, expires_at=now + ttl)
        won = self.store.claim(key, holder=holder, token=lease.token, expires_at=lease.expires_at, now=now)
        won = won or self._take_over(key, holder=holder, token=lease.token, expires_at=lease.expires_at)
        log.debug("lease %s %s by %s", key, "acquired" if won else "busy, not acquired", holder)
        return lease if won else None

    def _take_over(self, key: str, *, holder: str, token: str, expires_at: datetime) -> bool:
        """Take ``key`` from a holder that died on this machine; False while its holder may live."""
        dead = self.holder(key)
        if dead is None or not dead_here(dead.holder):
            return False
        now = self._now()
        won = self.store.claim(key, holder=holder, token=token, expires_at=expires_at, now=now, takeover=dead.token)
        if won:
            log.warning("lease %s taken over from %s, a process that is gone (until %s)", key, dead.holder,
                        dead.expires_at.isoformat())  # fmt: skip
        return won

    def renew(self, lease: Lease, *, ttl: timedelta) -> Lease | None:
        """``lease`` extended to now + ``ttl``, or None if it was lost (expired and taken, or released)."""
        _check(key=lease.key, holder=lease.holder, ttl=ttl)
        now = self._now()
        renewed = Lease(key=lease.key, holder=lease.holder, token=lease.token, expires_at=now + ttl)
        kept = self.store.claim(
            lease.key, holder=lease.holder, token=lease.token, expires_at=renewed.expires_at, now=now, renew=True
        )
        if not kept:
            log.info("lease %s of %s was lost before renewal", lease.key, lease.holder)
        return renewed if kept else None

    def release(self, lease: Lease) -> None:
        """Give ``lease`` up; a no-op if it was already lost to another holder."""
        self.store.unclaim(lease.key, token=lease.token)

    def acquire_many(self, keys: Sequence[str], *, holder: str, ttl: timedelta) -> dict[str, Lease]:
        """:meth:`acquire` of several keys in one store commit; the leases won, by key (the others are busy)."""
        for key in keys:
            _check(key=key, holder=holder, ttl=ttl)
        if not keys:
            return {}
        now, token = self._now(), uuid.uuid4().hex
        won = self.store.claim_many(keys, holder=holder, token=token, expires_at=now + ttl, now=now)
        won |= {k for k in set(keys) - won if self._take_over(k, holder=holder, token=token, expires_at=now + ttl)}
        log.debug("leases %s acquired by %s, %d busy", sorted(won), holder, len(set(keys) - won))
        return {k: Lease(key=k, holder=holder, token=token, expires_at=now + ttl) for k in keys if k in won}

    def release_many(self, leases: Sequence[Lease]) -> None:
        """:meth:`release` of several leases of one :meth:`acquire_many` in one store commit."""
        for token in dict.fromkeys(lease.token for lease in leases):
            self.store.unclaim_many([lease.key for lease in leases if lease.token == token], token=token)

    def holder(self, key: str) -> Lease | None:
        """The live lease on ``key``, or None when it is free (absent or expired)."""
        row = self.store.lease_row(key)
        if row is None or row["expires_at"] <= self._now():
            return None
        return Lease(key=key, holder=row["holder"], token=row["token"], expires_at=row["expires_at"])

    @contextmanager
    def hold(self, key: str, *, holder: str, ttl: timedelta) -> Iterator[Lease | None]:
        """Acquire for the ``with`` block and release after it; yields None (and waits for nothing) if busy.

        The block must finish (or :meth:`renew`) within ``ttl``: after that another holder may take the key.
        """
        lease = self.acquire(key, holder=holder, ttl=ttl)
        try:
            yield lease
        finally:
            if lease is not None:
                self.release(lease)


def _check(*, key: str, holder: str, ttl: timedelta) -> None:
    if not isinstance(key, str) or not key or len(key) > MAX_FILTER_VALUE or "\x00" in key:
        raise InvalidArgumentError(f"a lease key must be a non-empty string of at most {MAX_FILTER_VALUE} characters")
    if not isinstance(holder, str) or not holder or len(holder) > MAX_FILTER_VALUE or "\x00" in holder:
        raise InvalidArgumentError("a lease holder must be a non-empty string")
    if not isinstance(ttl, timedelta) or ttl <= timedelta(0):
        raise InvalidArgumentError(f"a lease ttl must be a positive timedelta, not {ttl!r}")
