"""The LanceDB store: the home of the engine's adapter, where its errors become ours.

One database per store URI (a folder, ``s3://...`` or ``db://...``). One table per tier plus
edges, turns, aliases, leases and a meta table that pins the schema version and the embedder.
Every filter goes through :func:`sql_literal`, so no id can widen a query. Every write retries a
lost commit race (:mod:`._commits`); merges key on ``id``, the tables' declared primary key, so
concurrent inserts of one id make one row. What a racing create overwrote, the next writer to open
the table brings back (:mod:`._store_creation`).

:class:`Store` is the one way in; it composes the adapter's parts, each a ``_store_*`` module beside
this one that alone may import LanceDB and Arrow with it: the opened tables, their creation, repair
and indexes (:mod:`._store_tables`), the meta table (:mod:`._store_meta_table`), writes
(:mod:`._store_writes`), reads by filter (:mod:`._store_reads`), table versions
(:mod:`._store_versions`), searches (:mod:`._store_search`), compaction and rewrites
(:mod:`._store_maintenance`) and the leases table (:mod:`._store_leases`). Every part wraps its
engine calls in :func:`~._store_errors.engine_errors`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from lancedb.query import FullTextOperator, MultiMatchQuery
from pydantic import BaseModel

from ._cached_search import CachedSearches, cached_searches
from ._commits import CommitRetry
from ._errors import ConfigurationError, StoreNotFoundError
from ._filters import MAX_FILTER_VALUE, Where, fts_cue, sql_literal
from ._lexical import query_terms
from ._rows import SPECS, Hit, TableName, records_in
from ._store_errors import engine_errors as _engine_errors
from ._store_leases import LeaseTable
from ._store_maintenance import Maintenance
from ._store_meta import REEMBEDDING, SCHEMA_VERSION
from ._store_meta_table import MetaTable, stored_meta
from ._store_reads import Reads
from ._store_tables import Tables, local_uri
from ._store_versions import Versions
from ._store_writes import Writes
from ._vectors import COLUMNS, VectorBlock, VectorCache, column_array, top_k

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
_HIT_COLUMNS = ["id", "record", "vector"]


class Store:
    """Typed records in and out of one LanceDB database.

    This process sees its own writes at once and other processes' commits within
    ``read_consistency`` (default 0: every read checks for a newer version). A write that loses a
    commit race to another process is retried per ``commit_retry`` before StoreConflictError.
    With ``create=False`` nothing is created: a store without its meta table is StoreNotFoundError
    and a tier table it lacks reads as empty (for read-only use).
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
        self._writes = Writes(tables, self._maintenance)
        self._reads = Reads(tables)
        self._versions = Versions(tables, read_consistency)
        # The searches' state, here until they move to a part of their own.
        self._pins = self._versions.pins
        self._indexed = tables.indexed
        self._loads: dict[tuple[str, str, str], threading.Lock] = {}
        self._oversize: set[tuple[str, str, str]] = set()
        self._lease_table = LeaseTable(tables, self._maintenance)
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

    def reembed(
        self, embedder_id: str, dimensions: int, vectors: Callable[[str, list[Any]], np.ndarray]
    ) -> dict[str, int]:
        """Rewrite every table's vectors with ``vectors(table, records)`` and record the new embedder.

        For ``tiermem reembed``; needs the store to itself. While it runs the meta table names neither
        embedder, so nothing opens the store half-migrated; after an interruption, run it again.
        Returns the rows re-embedded per table.
        """
        return self._maintenance.reembed(embedder_id, dimensions, vectors)

    # -- tables -----------------------------------------------------------------------------

    def table(self, name: str) -> Any:
        return self._tables.table(name)

    def _schema(self, name: str) -> pa.Schema:
        return self._tables.schema(name)

    def _table_names(self) -> set[str]:
        return self._tables.table_names()

    # -- writes -----------------------------------------------------------------------------

    def upsert(self, name: TableName, records: Sequence[BaseModel], vectors: np.ndarray | None = None) -> None:
        """Insert or replace records by id, in one batch (of one id given twice, the last wins)."""
        self._writes.write(name, records, vectors, mode="upsert")

    def insert(self, name: TableName, records: Sequence[BaseModel], vectors: np.ndarray | None = None) -> None:
        """Append records whose ids are new by construction (about 3x cheaper than an upsert)."""
        self._writes.write(name, records, vectors, mode="append")

    def insert_absent(self, name: TableName, records: Sequence[BaseModel], vectors: np.ndarray | None = None) -> int:
        """Insert the records whose id is not in the table yet; returns how many were inserted.

        Rows already there are left untouched. Atomic across processes: of several inserting one new
        id at once, exactly one row results (the id is the table's primary key, so Lance turns the race
        into a commit conflict and the loser's retry finds the row). Of one id given twice, the first wins.
        """
        return self._writes.write(name, records, vectors, mode="absent")

    def delete(self, name: TableName, where: Where) -> None:
        self._writes.delete(name, where)

    def dedupe(self, name: str, ids: Sequence[str] | None = None) -> int:
        """Delete all but one row per id (of ``ids``, or all; see :func:`duplicate_losers`); returns how many."""
        return self._tables.dedupe(name, ids)

    # -- reads ------------------------------------------------------------------------------

    def query(self, name: TableName, where: Where, *, limit: int | None = None) -> list[Any]:
        """Records matching ``where`` (no order guaranteed)."""
        return self._reads.query(name, where, limit=limit)

    def column_values(self, name: TableName, where: Where, column: str) -> list[str]:
        """Distinct values of one filterable column (e.g. the subjects a user has), without parsing records."""
        return self._reads.column_values(name, where, column)

    def scopes(self, name: TableName, where: Where | None = None) -> list[tuple[str, str]]:
        """Distinct (namespace, user_id) pairs with rows matching ``where``: how jobs find their users."""
        return self._reads.scopes(name, where)

    def last_activity(self, name: TableName, where: Where | None = None) -> dict[tuple[str, str, str], datetime]:
        """Latest ``updated_at`` per (namespace, user_id, session_id): how jobs find idle sessions."""
        return self._reads.last_activity(name, where)

    def get(self, name: TableName, where: Where, ids: Sequence[str]) -> list[Any]:
        return self._reads.get(name, where, ids)

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

    # -- searches (what they use of the parts, until they move to a part of their own) --------

    def _engine_version(self, name: str) -> int:
        return self._versions.engine_version(name)

    def _ensure_indexes(self, name: str) -> None:
        self._tables.ensure_indexes(name)

    def _records(self, name: str, rows: list[dict[str, Any]]) -> list[Any]:
        return records_in(name, rows)

    def vector_search(self, name: TableName, vector: np.ndarray, where: Where, *, limit: int) -> list[Hit]:
        """Nearest records by cosine within ``where``; the score is the cosine similarity.

        Searches the user's cached vectors when ``where`` names one user (the usual case), else LanceDB.
        """
        namespace, user = where.eq.get("namespace"), where.eq.get("user_id")
        if namespace is None or user is None or self._vectors.max_bytes <= 0:
            return self._lance_vector_search(name, vector, where, limit=limit)
        key = (name, namespace, user)
        with _engine_errors(f"search {name}"):
            block = self._cached_block(key)
        rest = {k: v for k, v in where.eq.items() if k not in ("namespace", "user_id")}
        keep = block.mask(rest, where.isin or {}, where.ne or {})
        parse = SPECS[name].model.model_validate_json
        return [
            Hit(record=block.record(row, parse), score=score, vector=block.matrix[row])
            for row, score in top_k(block, vector, keep, limit)
        ]

    def searched(self, name: TableName, where: Where) -> int:
        """How many rows a vector search within ``where`` compares (recall's gate needs how many it searched).

        Free after a vector search of one user's rows (their vectors are cached), else a count.
        """
        namespace, user = where.eq.get("namespace"), where.eq.get("user_id")
        block = self._vectors.peek((name, namespace, user)) if namespace is not None and user is not None else None
        if block is not None:
            rest = {k: v for k, v in where.eq.items() if k not in ("namespace", "user_id")}
            return int(block.mask(rest, where.isin or {}, where.ne or {}).sum())
        return self.count(name, where)

    def _cached_block(self, key: tuple[str, str, str]) -> VectorBlock:
        """The user's block at the table's current version, loaded once however many searches ask at once."""

        def current() -> int:
            return self._engine_version(key[0])

        block = self._vectors.get(key, self._pins.read(key[0], current))
        if block is None:  # stale, or a write of this process moved it since pinned: check the engine again
            version = self._pins.refresh(key[0], current)
            with self._loads.setdefault(key, threading.Lock()):  # recall's text and vector searches run together
                block = self._vectors.get(key, version) or self._load_block(*key, version)
        return block

    def _load_block(self, name: str, namespace: str, user: str, version: int) -> VectorBlock:
        where = Where(eq={"namespace": namespace, "user_id": user})
        rows = self.table(name).search().where(where.sql()).select([*COLUMNS, "vector"]).limit(None).to_arrow()
        vectors = rows.column("vector").to_numpy(zero_copy_only=False)
        matrix = np.stack(vectors).astype(np.float32) if len(vectors) else np.zeros((0, self.dimensions), np.float32)
        block = VectorBlock(
            version=version,
            columns={c: column_array(c, rows.column(c).to_pylist()) for c in COLUMNS},
            matrix=matrix,
        )
        self._vectors.put((name, namespace, user), block)
        if self._vectors.peek((name, namespace, user)) is not block:  # over the budget: full-text search goes to
            self._oversize.add((name, namespace, user))  # the engine rather than load these rows twice a query
        return block

    def _lance_vector_search(self, name: TableName, vector: np.ndarray, where: Where, *, limit: int) -> list[Hit]:
        with _engine_errors(f"search {name}"):
            rows = (
                self.table(name)
                .search(vector.astype(np.float32), vector_column_name="vector")
                .distance_type("cosine")
                .where(where.sql(), prefilter=True)
                .select([*_HIT_COLUMNS, "_distance"])
                .limit(limit)
                .to_list()
            )
        return self._hits(name, rows, lambda row: 1.0 - float(row["_distance"]))

    def text_search(self, name: TableName, text: str, where: Where, *, limit: int) -> list[Hit]:
        """Full-text (BM25, stemmed, stop words removed) matches within ``where``.

        Any text is a cue, never query syntax: quotes, operators and brackets are dropped, words kept.
        Searches the user's cached words when ``where`` names one user and their index fits the
        vector cache's budget (see :mod:`._lexical`), else LanceDB's full-text index.
        """
        block = self._lexical_block(name, where)
        if block is not None:
            keep = block.mask(_rest(where), where.isin or {}, where.ne or {})
            parse = SPECS[name].model.model_validate_json
            return [
                Hit(record=block.record(row, parse), score=score, vector=block.matrix[row])
                for row, score in block.words().top(query_terms(text), keep, limit)
            ]
        return self.lance_text_search(name, text, where, limit=limit)

    def _lexical_block(self, name: TableName, where: Where) -> VectorBlock | None:
        """The cached block of the one user ``where`` names, its BM25 index built; None when it cannot serve."""
        namespace, user = where.eq.get("namespace"), where.eq.get("user_id")
        if namespace is None or user is None or self._vectors.max_bytes <= 0:
            return None
        key = (name, namespace, user)
        if key in self._oversize:
            return None
        with _engine_errors(f"full-text search {name}"):
            block = self._cached_block(key)
        if self._vectors.peek(key) is not block:  # too big for the cache even without its words
            return None
        if block.lexical is None and not block.lexical_refused:
            block.words()
            if block.nbytes > self._vectors.max_bytes:  # too big with its words: vectors only, the engine for words
                block.lexical, block.lexical_refused = None, True
            else:
                self._vectors.put(key, block)  # it grew: the least recently used others may go
        return None if block.lexical_refused else block

    def cached_searches(
        self,
        name: TableName,
        text: str,
        vector: np.ndarray | None,
        where: Where,
        *,
        limit: int,
        parsed: Mapping[str, Any] | None = None,
    ) -> CachedSearches | None:
        """``text_search``, ``vector_search`` (when ``vector``) and ``searched`` at once, in this thread, when the
        one user ``where`` names has their rows and words cached at the table's version; else None.

        ``parsed``: records of the table at that version by id, already parsed (the caller's), used as they are.
        """
        namespace, user = where.eq.get("namespace"), where.eq.get("user_id")
        if namespace is None or user is None or self._vectors.max_bytes <= 0:
            return None
        with _engine_errors(f"search {name}"):
            version = self._pins.read(name, lambda: self._engine_version(name))
        block = self._vectors.get((name, namespace, user), version)
        if block is None or block.lexical is None or block.lexical_refused:
            return None
        parse = SPECS[name].model.model_validate_json
        return cached_searches(block, parse, where, text, vector, limit=limit, parsed=parsed)

    def lance_text_search(self, name: TableName, text: str, where: Where, *, limit: int) -> list[Hit]:
        """Full-text search through LanceDB's index (any scope; what the cached words stand in for)."""
        cue = fts_cue(text)
        if not cue or (name not in self._indexed and self.count(name) == 0):
            return []
        self._ensure_indexes(name)
        with _engine_errors(f"full-text search {name}"):
            rows = (
                self.table(name)
                .search(_fts_query(cue), query_type="fts")
                .where(where.sql(), prefilter=True)
                .select([*_HIT_COLUMNS, "_score"])
                .limit(limit)
                .to_list()
            )
        return self._hits(name, rows, lambda row: float(row["_score"]))

    def _hits(self, name: str, rows: list[dict[str, Any]], score: Any) -> list[Hit]:
        records = self._records(name, rows)
        return [
            Hit(record=rec, score=score(row), vector=np.asarray(row["vector"], dtype=np.float32))
            for rec, row in zip(records, rows, strict=True)
        ]

    # -- maintenance ------------------------------------------------------------------------

    def optimize(self, *, cleanup_older_than: timedelta | None = None) -> dict[str, int]:
        """Compact files, fold new rows into indexes and drop old versions; returns versions per table."""
        return self._maintenance.optimize(cleanup_older_than=cleanup_older_than)

    def stats(self) -> dict[str, Any]:
        """Rows and versions per table, for reports and benchmarks."""
        return self._maintenance.stats()

    def disk_bytes(self) -> int | None:
        """Bytes of every file under the store folder; None when the store is not a local folder."""
        return self._maintenance.disk_bytes()

    def purge(self, name: TableName) -> None:
        """Make deleted rows unrecoverable: rewrite the table from its live rows, rebuild its indexes and
        delete every older version and unreferenced file (data, deletion files, indexes, transactions).

        ``optimize`` alone is not enough: compaction keeps a fragment whose deleted share is small (and
        skips empty tables), index files keep the old tokens, and old versions keep everything. Needs the
        store to itself: a reader or writer in another process still on an older version fails.
        """
        self._maintenance.purge(name)

    # -- leases (see _leases.py) ------------------------------------------------------------

    def _leases(self) -> Any:
        return self._lease_table.table()

    def claim(
        self, key: str, *, holder: str, token: str, expires_at: datetime, now: datetime, renew: bool = False
    ) -> bool:
        """Write the lease row of ``key`` if it may be taken; True if it was written.

        It may be taken when absent, expired at ``now`` or held by ``holder``; with ``renew``, only
        when it still carries ``token``. One merge decides, so two processes never both win: a
        concurrent update of the row, or insert of the key, makes the later commit conflict and
        its retry sees the winner's row.
        """
        return self._lease_table.claim(key, holder=holder, token=token, expires_at=expires_at, now=now, renew=renew)

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

    def lease_row(self, key: str) -> dict[str, Any] | None:
        """The lease row of ``key`` (id, holder, token, expires_at), or None."""
        return self._lease_table.lease_row(key)


def _rest(where: Where) -> dict[str, str]:
    """The equality tests of ``where`` beyond the user's scope (a cached block holds one user)."""
    return {k: v for k, v in where.eq.items() if k not in ("namespace", "user_id")}


def _fts_query(cue: str) -> MultiMatchQuery:
    """Both columns, as plain words: a query object, so nothing in the cue is parsed as syntax."""
    return MultiMatchQuery(cue, ["text", "context"], boosts=[1.0, 1.0], operator=FullTextOperator.OR)
