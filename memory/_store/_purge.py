"""Purging deleted rows from disk beside writers and readers in other processes: a fence they respect.

Deleting rows is an ordinary commit; their bytes stay in older versions, deletion files, index files
and files of abandoned commits until the table is rewritten and every other file removed. Removing
those is safe only when no commit in flight will still reference a file (an uncommitted data file
looks exactly like an abandoned one) and no read still uses an old version. So a purge runs behind
a *fence*: a lease row (:data:`FENCE`) in the leases table that every writer checks before each
commit attempt (:meth:`Purges.gate`, at most every :data:`RECHECK` seconds) and waits on while it
is held. The purger (named by :func:`process_holder`) then

1. takes the fence (if another process holds it, that purge does the work: the request stays pending);
2. waits ``drain``: a writer that checked just before finishes its commit;
3. rewrites each table from its live rows and rebuilds its indexes (no one else commits meanwhile);
4. waits ``drain`` again: a reader still on an old version finishes;
5. deletes every older version and every unreferenced file, clears the request, releases the fence.

A request (:meth:`Purges.request`, recorded in the meta table before the rows are deleted) survives
a crash: the next purge, the janitor's or the next erase's, does it. A purger that dies holding the
fence blocks writers only until it expires, or, on its own machine, not at all: a process there that
finds the holder gone (:func:`dead_here`) passes the fence, and a purge takes it over. ``drain`` must
exceed :data:`RECHECK` plus the longest single commit attempt or read (seconds on object storage):
that is the bound this safety rests on.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from .._errors import InvalidArgumentError, StoreConflictError
from .._index import EngineRow, TableName
from ._engine_errors import engine_errors
from ._holders import dead_here, process_holder
from ._lease_table import LeaseTable
from ._maintenance import Maintenance
from ._meta_table import MetaTable
from ._tables import Tables

__all__ = ["FENCE", "PENDING", "RECHECK", "Purges"]

log = logging.getLogger(__name__)

FENCE = "store:purge"
"""The lease key writers check before each commit; held while a purge rewrites and cleans up."""
PENDING = "purge_requested_at"
"""Meta key: when a purge was requested (ISO time), empty once done."""
RECHECK = 1.0
"""Seconds a writer trusts having seen no fence; ``drain`` must be longer than this plus one commit."""
_POLL = 0.1  # seconds between looks at a held fence


def _now() -> datetime:
    return datetime.now(UTC)


class Purges:
    """The fence, the pending request and the purge itself, for one store."""

    def __init__(
        self, tables: Tables, meta: MetaTable, leases: LeaseTable, maintenance: Maintenance, *, drain: timedelta
    ) -> None:
        if not isinstance(drain, timedelta) or drain < timedelta(0):
            raise InvalidArgumentError(f"purge_drain must be a timedelta of at least 0, not {drain!r}")
        self._tables = tables
        self._meta = meta
        self._leases = leases
        self._maintenance = maintenance
        self.drain = drain
        self._ttl = 4 * drain + timedelta(minutes=2)  # the waits, and the rewrites between renewals
        self._clear_until = 0.0  # monotonic: no fence was seen this recently
        self._purger: int | None = None  # the thread of this process holding the fence
        self._lock = threading.Lock()

    # -- writers ----------------------------------------------------------------------------

    def gate(self) -> None:
        """Return once no other purge holds the fence (this process's purging thread passes at once)."""
        if self._purger == threading.get_ident() or time.monotonic() < self._clear_until:
            return
        while held := self._held_by(None):
            log.debug("write waits for the purge of %s (%s)", self._tables.uri, held)
            time.sleep(_POLL)
        self._clear_until = time.monotonic() + RECHECK

    def _held_by(self, token: str | None) -> str | None:
        """The holder of a live fence whose token is not ``token``, or None (a dead process here holds none)."""
        rows = self._live(token)
        return next((r["holder"] for r in rows if not dead_here(r["holder"])), None)

    def _live(self, token: str | None) -> list[EngineRow]:
        now = _now()
        return [r for r in self._leases.lease_rows(FENCE) if r["expires_at"] > now and r["token"] != token]

    def _take_over(self, holder: str, token: str, expires_at: datetime) -> bool:
        """Take the fence from a purger that died on this machine; False while its holder may live."""
        rows = self._live(token)
        if len(rows) != 1 or not dead_here(rows[0]["holder"]):
            return False
        dead = rows[0]
        won = self._leases.claim(
            FENCE, holder=holder, token=token, expires_at=expires_at, now=_now(), takeover=dead["token"]
        )
        if won:
            log.warning(
                "purge fence of %s taken over from %s, a process that is gone", self._tables.uri, dead["holder"]
            )
        return won

    # -- requests ---------------------------------------------------------------------------

    def request(self) -> None:
        """Record that deleted rows await a purge (before deleting them: a crash leaves the request)."""
        self._meta.write({PENDING: _now().isoformat()})

    def pending(self) -> bool:
        return bool(self._meta.read().get(PENDING))

    def run_pending(self, names: Sequence[TableName]) -> bool:
        """Purge ``names`` if a purge was requested; True when none is pending any more."""
        if not self.pending():
            return True
        return self.run(names, clear=True)

    # -- the purge --------------------------------------------------------------------------

    def run(self, names: Sequence[TableName], *, clear: bool = False) -> bool:
        """Rewrite ``names`` and delete their old versions and files behind the fence; False if another held it.

        ``clear``: also clear the pending request (under the fence, so a request made meanwhile, whose
        rows were deleted before the fence, is covered by this purge).
        """
        for name in names:  # opened (created if missing) before the fence: no create races the cleanup
            self._tables.table(name)
        with self._lock:  # one purge per process at a time
            token, holder = uuid.uuid4().hex, process_holder()
            now = _now()
            won = self._leases.claim(FENCE, holder=holder, token=token, expires_at=now + self._ttl, now=now)
            won = won or self._take_over(holder, token, now + self._ttl)
            if not won or self._held_by(token):  # read back: no other live row of the key, however it got there
                if won:
                    self._leases.unclaim(FENCE, token=token)
                log.info("purge of %s left pending: another process is purging", self._tables.uri)
                return False
            self._purger = threading.get_ident()
            try:
                time.sleep(self.drain.total_seconds())  # writers that saw no fence finish their commits
                if clear and not self.pending():  # another purge finished it meanwhile
                    return True
                for name in names:
                    self._maintenance.rewrite(name)
                    self._renew(holder, token)
                time.sleep(self.drain.total_seconds())  # readers still on an old version finish
                for name in names:
                    self._cleanup(name)
                if clear:
                    self._meta.write({PENDING: ""})
                return True
            finally:
                self._purger = None
                self._leases.unclaim(FENCE, token=token)

    def _renew(self, holder: str, token: str) -> None:
        now = _now()
        if not self._leases.claim(FENCE, holder=holder, token=token, expires_at=now + self._ttl, now=now, renew=True):
            raise StoreConflictError(
                "the purge fence expired mid-purge (another process took it); the purge stays pending"
            )

    def _cleanup(self, name: TableName) -> None:
        """Every version but the latest and every unreferenced file: safe only behind the fence."""
        table = self._tables.table(name)

        def cleanup() -> None:
            with self._tables.write_lock, engine_errors(f"purge {name}"), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=r".*cleanup_older_than=0.*", category=UserWarning)
                table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
                self._tables.drop_cached(name)

        self._tables.retry(f"purge {name}", cleanup)
