"""The LanceDB store: the home of the engine's adapter, where its errors become ours.

One database per store URI (a folder, ``s3://...`` or ``db://...``). One table per tier plus
edges, turns, aliases, leases and a meta table that pins the schema version and the embedder.
Every filter goes through :func:`sql_literal`, so no id can widen a query. Every write retries a
lost commit race (:mod:`._commits`); merges key on ``id``, the tables' declared primary key, so
concurrent inserts of one id make one row. What a racing create overwrote, the next writer to open
the table brings back (:mod:`._creation`).

:class:`Store` is the one way in. It composes the adapter's parts, the ``_store_*`` modules beside
this one (with it, the only modules that may import LanceDB and Arrow): the opened tables, their
creation, repair and indexes (:mod:`._tables`), the meta table (:mod:`._meta_table`),
writes (:mod:`._writes`), reads by filter (:mod:`._reads`, typed per table by
:mod:`._typed_reads`), table versions (:mod:`._versions`), searches (:mod:`._search`),
compaction and rewrites (:mod:`._maintenance`) and the leases table (:mod:`._lease_table`).
Every part wraps its engine calls in :func:`~._engine_errors.engine_errors`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
from lancedb.table import Table as EngineTable

from .._errors import ConfigurationError, StoreConflictError, StoreNotFoundError
from .._filters import MAX_FILTER_VALUE, Where, sql_literal
from .._identity import Scope
from .._index import CachedSearches, EngineRow, Hit, TableName, VectorCache, Vectors
from .._records import StoredRecord
from ._commits import CommitRetry
from ._fences import ErasureMarks, fenced
from ._lease_table import LeaseTable
from ._maintenance import Maintenance
from ._meta import REEMBEDDING, SCHEMA_VERSION
from ._meta_table import MetaTable, stored_meta
from ._purge import Purges
from ._reads import Reads
from ._search import Searches
from ._tables import Tables, local_uri
from ._typed_reads import TypedReads
from ._user_tables import USER_TABLES
from ._versions import Versions
from ._writes import Writes

__all__ = [
    "MAX_FILTER_VALUE",
    "REEMBEDDING",
    "SCHEMA_VERSION",
    "CommitRetry",
    "Hit",
    "Store",
    "TableName",
    "Where",
    "local_uri",
    "sql_literal",
    "stored_meta",
]

_COMMIT_RETRY = CommitRetry()


class Store(TypedReads):
    """Typed records in and out of one LanceDB database.

    This process sees its own writes at once and other processes' commits within
    ``read_consistency`` (default 0: every read checks for a newer version). A write that loses a
    commit race to another process is retried per ``commit_retry`` before StoreConflictError.
    With ``create=False`` nothing is created: a store without its meta table is StoreNotFoundError
    and a tier table it lacks reads as empty (for read-only use). ``purge_drain``: how long a purge
    waits for other processes' commits and reads in flight (see :mod:`._purge`); longer than any one.
    """

    def __init__(
        self,
        uri: str,
        *,
        embedder_id: str,
        dimensions: int,
        read_consistency: timedelta | None = timedelta(0),
        storage_options: Mapping[str, str] | None = None,
        compact_every: int = 64,
        keep_versions: timedelta = timedelta(minutes=10),
        vector_cache_bytes: int = 256 * 2**20,
        create: bool = True,
        commit_retry: CommitRetry = _COMMIT_RETRY,
        purge_drain: timedelta = timedelta(seconds=5),
    ) -> None:
        if not isinstance(uri, str) or not uri.strip():
            raise ConfigurationError("the store path is empty: give a folder, an s3://... or a db://... URI")
        uri = local_uri(uri)
        if not create and "://" not in uri and not Path(uri).is_dir():
            raise StoreNotFoundError(f"no tiermem store at {uri!r} (no such folder); check the path")
        self._vectors = VectorCache(vector_cache_bytes)
        self._tables = tables = Tables(
            uri,
            embedder_id=embedder_id,
            dimensions=dimensions,
            create=create,
            commit_retry=commit_retry,
            read_consistency=read_consistency,
            storage_options=dict(storage_options or {}),
            vectors=self._vectors,
        )
        self._db = tables.db
        self._meta = MetaTable(tables)
        self._maintenance = Maintenance(tables, self._meta, compact_every=compact_every, keep_versions=keep_versions)
        self._marks = ErasureMarks(tables)
        self._writes = Writes(tables, self._maintenance, self._marks)
        self._versions = Versions(tables, read_consistency)
        self._reads = Reads(tables, self._versions)
        self._search = Searches(tables, self._versions, self._reads)
        self._lease_table = LeaseTable(tables, self._maintenance)
        self._purges = Purges(tables, self._meta, self._lease_table, self._maintenance, drain=purge_drain)
        tables.gate = self._purges.gate
        self._meta.check()

    # -- settings (read-only: the parts hold them) ------------------------------------------

    @property
    def uri(self) -> str:
        return self._tables.uri

    @property
    def dimensions(self) -> int:
        return self._tables.dimensions

    @property
    def embedder_id(self) -> str:
        return self._tables.embedder_id

    @property
    def create(self) -> bool:
        return self._tables.create

    @property
    def commit_retry(self) -> CommitRetry:
        return self._tables.commit_retry

    @property
    def compact_every(self) -> int:
        return self._maintenance.compact_every

    @property
    def keep_versions(self) -> timedelta:
        return self._maintenance.keep_versions

    # -- the meta table ---------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        """The store's meta table (schema version, embedder, store id, recorded options)."""
        return self._meta.read()

    def record_meta(self, key: str, value: str) -> str:
        """Record ``key`` once: the first writer's value stays (of two processes, one wins); returns what is stored."""
        self._meta.write({key: value}, keep=True)
        return self.meta().get(key, value)

    def set_meta(self, values: Mapping[str, str]) -> None:
        """Write ``values`` to the meta table, replacing what those keys held (the access grants live here)."""
        self._meta.write(values)

    def reembed(
        self,
        embedder_id: str,
        dimensions: int,
        vectors: Callable[[str, list[StoredRecord]], Vectors],
        *,
        only: tuple[type, ...] | None = None,
    ) -> dict[str, int]:
        """Rewrite every table's vectors with ``vectors(table, records)`` and record the new embedder.

        ``only``: just the tables holding those record types (a recipe change on the same embedder).

        ``vectors`` embeds each record's ``embedded_text``; the store then records this code's recipe.

        For ``tiermem reembed``; needs the store to itself. While it runs the meta table names neither
        embedder, so nothing opens the store half-migrated; after an interruption, run it again.
        Returns the rows re-embedded per table.
        """
        return self._maintenance.reembed(embedder_id, dimensions, vectors, only=only)

    # -- tables -----------------------------------------------------------------------------

    def table(self, name: str) -> EngineTable:
        return self._tables.table(name)

    # _schema, _table_names, _leases (and _vectors, _db): what the tests and their fault census reach in for.

    def _schema(self, name: str) -> pa.Schema:
        return self._tables.schema(name)

    def _table_names(self) -> set[str]:
        return self._tables.table_names()

    # -- writes -----------------------------------------------------------------------------

    def upsert(self, name: TableName, records: Sequence[StoredRecord], vectors: Vectors | None = None) -> None:
        """Insert or replace records by id, in one batch (of one id given twice, the last wins)."""
        self._writes.write(name, records, vectors, mode="upsert")

    def insert(self, name: TableName, records: Sequence[StoredRecord], vectors: Vectors | None = None) -> None:
        """Append records whose ids are new by construction (about 3x cheaper than an upsert)."""
        self._writes.write(name, records, vectors, mode="append")

    def insert_absent(self, name: TableName, records: Sequence[StoredRecord], vectors: Vectors | None = None) -> int:
        """Insert the records whose id is not in the table yet; returns how many were inserted.

        Rows already there are left untouched. Atomic across processes: of several inserting one new
        id at once, exactly one row results (the id is the table's primary key, so Lance turns the race
        into a commit conflict and the loser's retry finds the row). Of one id given twice, the first wins.
        """
        return self._writes.write(name, records, vectors, mode="absent")

    def delete(self, name: TableName, where: Where) -> None:
        self._writes.delete(name, where)

    # -- erasure fences (see _fences.py) ----------------------------------------------------

    def mark_erased(self, scope: Scope) -> None:
        """Mark the user erased (``erase_user`` does, before it deletes): fenced work begun before this
        raises UserErasedError at its next write of the user instead of writing them back."""
        self._marks.mark(scope)

    def fenced(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Within the block, a write of a user marked erased since the block began raises UserErasedError
        (nested: the outermost block counts). Every write path of the system runs in one."""
        return fenced(self._marks)

    def dedupe(self, name: str, ids: Sequence[str] | None = None) -> int:
        """Delete all but one row per id (of ``ids``, or all; see :func:`duplicate_losers`); returns how many."""
        return self._tables.dedupe(name, ids)

    # -- reads (query and get, typed per table: TypedReads) ---------------------------------

    def column_values(self, name: TableName, where: Where, column: str) -> list[str]:
        """Distinct values of one filterable column (e.g. the subjects a user has), without parsing records."""
        return self._reads.column_values(name, where, column)

    def scopes(self, name: TableName, where: Where | None = None) -> list[tuple[str, str]]:
        """Distinct (namespace, user_id) pairs with rows matching ``where``: how jobs find their users."""
        return self._reads.scopes(name, where)

    def last_activity(self, name: TableName, where: Where | None = None) -> dict[tuple[str, str, str], datetime]:
        """Latest ``updated_at`` per (namespace, user_id, session_id): how jobs find idle sessions."""
        return self._reads.last_activity(name, where)

    def count(self, name: TableName, where: Where | None = None) -> int:
        return self._reads.count(name, where)

    def keys(self, name: TableName, where: Where) -> list[tuple[datetime, str]]:
        """``(created_at, id)`` of the rows matching ``where``, in that order: a stable paging key."""
        return self._reads.keys(name, where)

    def counts(self, name: TableName, where: Where, column: str) -> dict[str, int]:
        """Rows matching ``where`` per value of one filterable column (e.g. per status)."""
        return self._reads.counts(name, where, column)

    # -- versions ---------------------------------------------------------------------------

    def version(self, name: TableName) -> int:
        """The table's current version (moves with every write, from any process)."""
        return self._versions.version(name)

    def pinned_versions(self) -> contextlib.AbstractContextManager[None]:
        """Within the block, this thread reads each table's version once (one recall: one check per table)."""
        return self._versions.pins.pinned()

    # -- searches ---------------------------------------------------------------------------

    def vector_search(self, name: TableName, vector: np.ndarray, where: Where, *, limit: int) -> list[Hit]:
        """Nearest records by cosine within ``where``; the score is the cosine similarity.

        Searches the user's cached vectors when ``where`` names one user (the usual case), else LanceDB.
        """
        return self._search.vector_search(name, vector, where, limit=limit)

    def searched(self, name: TableName, where: Where) -> int:
        """How many rows a vector search within ``where`` compares (recall's gate needs how many it searched).

        Free after a vector search of one user's rows (their vectors are cached), else a count.
        """
        return self._search.searched(name, where)

    def text_search(self, name: TableName, text: str, where: Where, *, limit: int) -> list[Hit]:
        """Full-text (BM25, stemmed, stop words removed) matches within ``where``.

        Any text is a cue, never query syntax: quotes, operators and brackets are dropped, words kept.
        Searches the user's cached words when ``where`` names one user and their index fits the
        vector cache's budget (see :mod:`.._index._lexical`), else LanceDB's full-text index.
        """
        return self._search.text_search(name, text, where, limit=limit)

    def cached_searches(
        self,
        name: TableName,
        text: str,
        vector: np.ndarray | None,
        where: Where,
        *,
        limit: int,
        parsed: Mapping[str, StoredRecord] | None = None,
    ) -> CachedSearches | None:
        """``text_search``, ``vector_search`` (when ``vector``) and ``searched`` at once, in this thread, when the
        one user ``where`` names has their rows and words cached at the table's version; else None.

        ``parsed``: records of the table at that version by id, already parsed (the caller's), used as they are.
        """
        return self._search.cached_searches(name, text, vector, where, limit=limit, parsed=parsed)

    def lance_text_search(self, name: TableName, text: str, where: Where, *, limit: int) -> list[Hit]:
        """Full-text search through LanceDB's index (any scope; what the cached words stand in for)."""
        return self._search.lance_text_search(name, text, where, limit=limit)

    # -- maintenance ------------------------------------------------------------------------

    def optimize(self, *, cleanup_older_than: timedelta | None = None) -> dict[str, int]:
        """Compact files, fold new rows into indexes and drop old versions; returns versions per table."""
        return self._maintenance.optimize(cleanup_older_than=cleanup_older_than)

    def stats(self) -> dict[str, dict[str, int]]:
        """Rows and versions per table, for reports and benchmarks."""
        return self._maintenance.stats()

    def disk_bytes(self) -> int | None:
        """Bytes of every file under the store folder; None when the store is not a local folder."""
        return self._maintenance.disk_bytes()

    def purge(self, *names: TableName) -> None:
        """Make deleted rows of ``names`` unrecoverable now, safely beside other processes (see :mod:`._purge`).

        Rewrites each table from its live rows, rebuilds its indexes and deletes every older version and
        unreferenced file (data, deletion files, indexes, transactions) behind a fence every writer waits
        on; ``optimize`` alone is not enough (compaction keeps a fragment whose deleted share is small,
        index files keep the old tokens, old versions keep everything). Takes twice ``purge_drain`` at
        least; StoreConflictError if another process is purging.
        """
        if not self._purges.run(names):
            raise StoreConflictError("another process is purging this store; purge again once it is done")

    def request_purge(self) -> None:
        """Record that rows about to be deleted must leave the disk (:meth:`purge_pending`, even after a crash)."""
        self._purges.request()

    def purge_pending(self) -> bool:
        """Purge every user table if a purge was requested; True when none is pending any more.

        False when another process holds the purge fence: the request stays, for the next call (the janitor's).
        """
        return self._purges.run_pending(USER_TABLES)

    # -- leases (see _leases.py) ------------------------------------------------------------

    def _leases(self) -> EngineTable:
        return self._lease_table.table()

    def claim(
        self,
        key: str,
        *,
        holder: str,
        token: str,
        expires_at: datetime,
        now: datetime,
        renew: bool = False,
        takeover: str | None = None,
    ) -> bool:
        """Write the lease row of ``key`` if it may be taken; True if it was written.

        It may be taken when absent, expired at ``now`` or held by ``holder``; with ``renew``, only
        when it still carries ``token``; with ``takeover`` (a dead holder's token), when absent or
        still carrying that token. One merge decides, so two processes never both win: a
        concurrent update of the row, or insert of the key, makes the later commit conflict and
        its retry sees the winner's row.
        """
        return self._lease_table.claim(
            key, holder=holder, token=token, expires_at=expires_at, now=now, renew=renew, takeover=takeover
        )

    def unclaim(self, key: str, *, token: str) -> None:
        """Delete the lease row of ``key`` if it still carries ``token`` (else someone took it over)."""
        self._lease_table.unclaim(key, token=token)

    def claim_many(
        self, keys: Sequence[str], *, holder: str, token: str, expires_at: datetime, now: datetime
    ) -> set[str]:
        """:meth:`claim` of several keys in one merge, one ``token`` for all; returns the keys written."""
        return self._lease_table.claim_many(keys, holder=holder, token=token, expires_at=expires_at, now=now)

    def unclaim_many(self, keys: Sequence[str], *, token: str) -> None:
        """:meth:`unclaim` of several keys in one delete."""
        self._lease_table.unclaim_many(keys, token=token)

    def lease_row(self, key: str) -> EngineRow | None:
        """The lease row of ``key`` (id, holder, token, expires_at), or None."""
        return self._lease_table.lease_row(key)
