"""The LanceDB store: the only module that imports lancedb, and where its errors become ours.

One database per store URI (a folder, ``s3://...`` or ``db://...``). One table per tier plus
edges, turns, aliases, leases and a meta table that pins the schema version and the embedder.
Every filter goes through :func:`sql_literal`, so no id can widen a query. Every write retries a
lost commit race (:mod:`._commits`); merges key on ``id``, the tables' declared primary key, so
concurrent inserts of one id make one row. What a racing create overwrote, the next writer to open
the table brings back (:mod:`._store_creation`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS, BTree
from lancedb.query import FullTextOperator, MultiMatchQuery
from lancedb.remote.errors import LanceDBClientError
from pydantic import BaseModel

from ._cached_search import CachedSearches, PinnedVersions, VersionWatch, cached_searches
from ._commits import CommitRetry, retry_conflicts
from ._errors import (
    ConfigurationError,
    InvalidArgumentError,
    StoreConflictError,
    StoreMismatchError,
    StoreNotFoundError,
    StoreUnavailableError,
    TiermemError,
)
from ._filters import MAX_FILTER_VALUE, Where, checked_column, fts_cue, sql_literal, sql_timestamp
from ._lexical import query_terms
from ._rows import SPECS, Hit, TableName, duplicate_losers, per_user, row, unique
from ._store_creation import GONE, Stamp, clobbered, is_settled, new_creation, settle, stamp_of, stamped
from ._store_errors import store_error_type
from ._store_meta import REEMBEDDING, SCHEMA_VERSION, check_meta, settled_meta, stamp, wanted_meta, width_mismatch
from ._text import FTS_CONFIG
from ._vectors import COLUMNS, VectorBlock, VectorCache, column_array, top_k

log = logging.getLogger(__name__)

__all__ = [
    "MAX_FILTER_VALUE",
    "REEMBEDDING",
    "SCHEMA_VERSION",
    "CommitRetry",
    "Hit",
    "Store",
    "TableName",
    "Where",
    "sql_literal",
    "stored_meta",
]

T = TypeVar("T")


# Lance dedupes two concurrent merge_inserts of one new key only when the key column is the table's
# (unenforced) primary key: the later commit then conflicts and its retry finds the row (lance#5633).
_PRIMARY_KEY = {"lance-schema:unenforced-primary-key": "true"}
_PK_MARKERS = (b"lance-schema:unenforced-primary-key", b"lance-schema:unenforced-primary-key:position")
_META_SCHEMA = pa.schema(
    [pa.field("key", pa.string(), nullable=False, metadata=_PRIMARY_KEY), pa.field("value", pa.string())]
)
# Leases (see _leases.py): one row per key, ``id`` so the key is the table's primary key like everywhere else.
LEASES = "leases"
_LEASE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False, metadata=_PRIMARY_KEY),
        pa.field("holder", pa.string(), nullable=False),
        pa.field("token", pa.string(), nullable=False),
        pa.field("expires_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
_COMMIT_RETRY = CommitRetry()
_RESULT_COLUMNS = ["id", "record"]
_HIT_COLUMNS = ["id", "record", "vector"]


@contextlib.contextmanager
def _engine_errors(action: str) -> Iterator[None]:
    """Map what LanceDB / Arrow / the OS raise to StoreError subclasses, per kind.

    Our own errors pass through; an exception of no known kind (a bug, ours or the engine's)
    propagates unchanged rather than as a vague "store failed".
    """
    try:
        yield
    except TiermemError:
        raise
    except Exception as exc:
        error_type = store_error_type(exc, unavailable=(LanceDBClientError,))
        if error_type is None:
            raise
        raise error_type(f"store failed to {action}: {exc}") from exc


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
        self.uri = uri = local_uri(uri)
        if not create and "://" not in uri and not Path(uri).is_dir():
            raise StoreNotFoundError(f"no tiermem store at {uri!r} (no such folder); check the path")
        self.dimensions = dimensions
        self.embedder_id = embedder_id
        self.create = create
        self.commit_retry = commit_retry
        self._storage_options = dict(storage_options or {})
        self._pinned_db: Any = None
        with _engine_errors("connect"):
            self._db = lancedb.connect(
                uri, read_consistency_interval=read_consistency, storage_options=self._storage_options
            )
        self._tables: dict[str, Any] = {}
        self._indexed: set[str] = set()
        self._keyed: set[str] = set()
        self._writes: dict[str, int] = {}
        self._write_lock = threading.RLock()
        self.compact_every = compact_every
        self.keep_versions = keep_versions
        self._vectors = VectorCache(vector_cache_bytes)
        self._loads: dict[tuple[str, str, str], threading.Lock] = {}
        self._oversize: set[tuple[str, str, str]] = set()
        self._pins = PinnedVersions()
        # Versions from the folders, not the engine, only where the engine would check on every read.
        self._watch = VersionWatch() if read_consistency == timedelta(0) else None
        self._folders: dict[str, tuple[Any, str | None]] = {}
        self._check_meta()

    # -- schema -----------------------------------------------------------------------------

    def _schema(self, name: str) -> pa.Schema:
        fields = [
            pa.field("id", pa.string(), nullable=False, metadata=_PRIMARY_KEY),
            pa.field("namespace", pa.string(), nullable=False),
            pa.field("user_id", pa.string(), nullable=False),
            pa.field("session_id", pa.string()),
            pa.field("subject", pa.string()),
            pa.field("status", pa.string()),
            pa.field("text", pa.string()),
            pa.field("context", pa.string()),
            pa.field("created_at", pa.timestamp("us", tz="UTC")),
            pa.field("updated_at", pa.timestamp("us", tz="UTC")),
            pa.field("record", pa.string()),
        ]
        if SPECS[name].vectors:
            fields.append(pa.field("vector", pa.list_(pa.float32(), self.dimensions)))
        return pa.schema(fields)

    def _retry(self, action: str, write: Callable[[], T]) -> T:
        return retry_conflicts(write, action=action, policy=self.commit_retry)

    def _table_names(self) -> set[str]:
        names: set[str] = set()
        token: str | None = None
        while True:
            page = self._db.list_tables(page_token=token)
            names.update(page.tables)
            if not (token := page.page_token):
                return names

    def _check_meta(self) -> None:
        """Refuse a store written with another embedder, or without a meta table, before any read or write."""
        wanted = wanted_meta(self.embedder_id, self.dimensions)
        with _engine_errors("open the meta table"):
            names = self._table_names()
            stored = self._listed_meta() if "meta" in names else {}
        if check_meta(self.uri, stored, wanted, tables=names & set(SPECS), create=self.create):
            self._retry("create the meta table", lambda: self._stamp_meta(wanted))
            with _engine_errors("read the meta table"):
                stored = self._settled_meta()
            check_meta(self.uri, stored, wanted, tables=(), create=False)  # a racing opener may have made it

    def _listed_meta(self) -> dict[str, str]:
        """The meta table a listing showed; another process may be creating it, so wait for its first commit."""
        for wait in (0.05, 0.1, 0.2, 0.4, 0.8, 1.6):
            try:
                return self._settled_meta()
            except ValueError as exc:  # listed (its folder exists) but no version committed yet
                if "not found" not in str(exc):
                    raise
                time.sleep(wait)
        return self._settled_meta()

    def _settled_meta(self) -> dict[str, str]:
        """The meta table as all processes read it (:func:`settled_meta`); a writer repairs a clobbered one."""
        values, clobbered = settled_meta(self.uri, *_meta_versions(self._db))
        if clobbered and self.create:
            log.info("store %s: a racing create overwrote its meta table; restoring it", self.uri)
            self._set_meta(values)
        return values

    def _stamp_meta(self, wanted: Mapping[str, str]) -> None:
        with _engine_errors("create the meta table"):
            rows = pa.Table.from_pylist(stamp(wanted), schema=_META_SCHEMA)
            meta = self._db.create_table("meta", data=rows, exist_ok=True)  # created with its stamp, in version 1
            if meta.count_rows() == 0:  # an empty one an older tiermem created, then died before stamping
                meta.merge_insert("key").use_index(False).when_not_matched_insert_all().execute(rows)

    def meta(self) -> dict[str, str]:
        """The store's meta table (schema version, embedder, store id, recorded options)."""
        with _engine_errors("read the meta table"):
            return self._settled_meta()

    def record_meta(self, key: str, value: str) -> str:
        """Record ``key`` once: the first writer's value stays (of two processes, one wins); returns what is stored."""
        self._set_meta({key: value}, keep=True)
        return self.meta().get(key, value)

    def _set_meta(self, values: Mapping[str, str], *, keep: bool = False) -> None:
        """Write ``values`` to the meta table; with ``keep`` only absent keys (insert-if-absent on the primary key)."""

        def write() -> None:
            with _engine_errors("update the meta table"):
                merge = self._open("meta").merge_insert("key").use_index(False)
                (merge if keep else merge.when_matched_update_all()).when_not_matched_insert_all().execute(
                    pa.Table.from_pylist([{"key": k, "value": v} for k, v in values.items()], schema=_META_SCHEMA)
                )

        self._retry("update the meta table", write)

    def _open(self, name: str) -> Any:
        return self._db.open_table(name)

    def reembed(
        self, embedder_id: str, dimensions: int, vectors: Callable[[str, list[Any]], np.ndarray]
    ) -> dict[str, int]:
        """Rewrite every table's vectors with ``vectors(table, records)`` and record the new embedder.

        For ``tiermem reembed``; needs the store to itself. While it runs the meta table names neither
        embedder, so nothing opens the store half-migrated; after an interruption, run it again.
        Returns the rows re-embedded per table.
        """
        marker = REEMBEDDING + embedder_id
        self._set_meta({"embedder_id": marker, "dimensions": str(dimensions)})
        self.embedder_id, self.dimensions = marker, dimensions
        counts: dict[str, int] = {}
        for name, spec in SPECS.items():
            if not spec.vectors:
                continue
            with _engine_errors(f"read {name}"):
                try:
                    stored = self._open(name).to_arrow()
                except (ValueError, FileNotFoundError):  # no such table yet
                    stored = None
            rows = [] if stored is None else stored.select(["record"]).to_pylist()
            records = self._records(name, rows)
            matrix = vectors(name, records) if records else np.zeros((0, dimensions), dtype=np.float32)
            if matrix.shape != (len(records), dimensions):
                raise StoreMismatchError(
                    f"re-embedding {name}: vectors of shape {matrix.shape}, not ({len(records)}, {dimensions})"
                )
            # Carry the table's creation on: a rewrite stamped otherwise would read as a racing create's.
            made = None if stored is None else stamp_of(stored.schema.field("id").metadata)
            schema = _stamp(self._schema(name), made)
            data = pa.Table.from_pylist([row(r, matrix[i]) for i, r in enumerate(records)], schema=schema)

            def rewrite(name: str = name, data: pa.Table = data) -> None:
                with self._write_lock, _engine_errors(f"rewrite {name}"):
                    self._tables[name] = self._db.create_table(name, data, mode="overwrite")
                    self._vectors.drop(name)
                    self._indexed.discard(name)
                    if data.num_rows:
                        self._ensure_indexes(name)

            self._retry(f"rewrite {name}", rewrite)
            counts[name] = len(records)
        self._set_meta({"embedder_id": embedder_id, "dimensions": str(dimensions)})
        self.embedder_id = embedder_id
        return counts

    def table(self, name: str) -> Any:
        if name not in SPECS:
            raise InvalidArgumentError(f"unknown table {name!r}")
        if name in self._tables:
            return self._tables[name]
        with _engine_errors(f"open table {name}"):
            try:
                table = self._open(name)
            except (ValueError, FileNotFoundError):  # lancedb's "table not found"
                if not self.create:  # read-only: an empty stand-in, looked for again on the next call
                    return lancedb.connect("memory://").create_table(name, schema=self._schema(name))
                with self._write_lock:  # threads of this process creating it at once would conflict
                    table = self._retry(f"create table {name}", lambda: self._create(name, self._schema(name)))
            schema = table.schema
        if set(schema.names) != set(self._schema(name).names):
            raise StoreMismatchError(
                f"table {name!r} in {self.uri!r} has columns {sorted(schema.names)}, expected "
                f"{sorted(self._schema(name).names)}: it was written by another tiermem version"
            )
        width = getattr(schema.field("vector").type, "list_size", None) if SPECS[name].vectors else self.dimensions
        if width != self.dimensions and not self.embedder_id.startswith(REEMBEDDING):  # reembed rewrites them
            raise StoreMismatchError(width_mismatch(self.uri, name, width, self.dimensions))
        self._tables[name] = table
        self._restore_overwritten(name, table, schema)
        return table

    def _create(self, name: str, schema: pa.Schema) -> Any:
        """Create the table stamped with a creation of this process's own, or open it if it exists by now."""
        try:
            return self._db.create_table(name, schema=_stamp(schema), mode="create")
        except ValueError as exc:  # "Table 'x' already exists": another process created it meanwhile
            if "already exists" not in str(exc):
                raise
        return self._open(name)

    def _restore_overwritten(self, name: str, table: Any, schema: pa.Schema | None = None) -> None:
        """Bring back the rows a racing create's Overwrite hid, once (see :mod:`._store_creation`); writers only.

        ``schema``: the table's, if just read. A table marked settled at its stamp costs nothing more.
        """
        if not self.create or is_settled((schema or table.schema).field("id").metadata):
            return

        def repair() -> bool:
            with self._write_lock, _engine_errors(f"restore table {name}"):
                pinned = self._unrefreshed().open_table(name)  # commits from its version: a later create conflicts
                if is_settled((schema := pinned.schema).field("id").metadata):
                    return False
                history = self._unrefreshed().open_table(name)
                plan = clobbered(int(pinned.version), lambda version: _stamp_at(history, version))
                if plan is not None:
                    log.warning("store %s: a racing create overwrote %s; restoring %s", self.uri, name, plan.sources)
                    parts = [pa.Table.from_pylist([], schema=schema)]
                    for version in plan.sources:
                        history.checkout(version)
                        if history.schema.equals(schema, check_metadata=False):  # else rewritten (an older reembed)
                            parts.append(history.to_arrow().cast(schema))
                    rows = pa.concat_tables(parts)
                    rows = rows.take(pa.array(unique(rows.column("id").to_pylist(), last=False), type=pa.int64()))
                    if rows.num_rows:
                        pinned.merge_insert("id").use_index(False).when_not_matched_insert_all().execute(rows)
                made = plan.made if plan else stamp_of(schema.field("id").metadata)
                if made is None and name == LEASES:  # made before stamps: an older tiermem opens it with
                    return False  # create_table(exist_ok=True), which refuses a schema of other metadata
                pinned.update_field_metadata({"path": "id", "metadata": settle(made or new_creation())})
                if plan is None:
                    return False
                self._vectors.drop(name)
                self._indexed.discard(name)
                return name in SPECS and pinned.count_rows() > 0

        if self._retry(f"restore table {name}", repair):
            self._index_committed(name)

    def _unrefreshed(self) -> Any:
        """A connection whose tables stay at the version they opened at (the store's check for newer ones)."""
        if self._pinned_db is None:
            with _engine_errors("connect"):
                self._pinned_db = lancedb.connect(self.uri, storage_options=self._storage_options)
        return self._pinned_db

    def _keyed_table(self, name: str) -> Any:
        """The table, its ``id`` declared the primary key first (stores written before tiermem declared it).

        Declaring it also removes duplicate ids such a store may hold (two writers inserting one id at once).
        """
        table = self.table(name)
        if name not in self._keyed:
            if not any(m in (table.schema.field("id").metadata or {}) for m in _PK_MARKERS):

                def declare() -> None:
                    with self._write_lock, _engine_errors(f"declare the key of {name}"):
                        table.set_unenforced_primary_key("id")

                self._retry(f"declare the key of {name}", declare)
                self.dedupe(name)
            self._keyed.add(name)
        return table

    def _ensure_indexes(self, name: str) -> None:
        """Full-text and scalar indexes, built once a table has rows (LanceDB needs data to index)."""
        if name in self._indexed:
            return
        table = self.table(name)

        def build() -> None:
            # Under the write lock: a commit of this process's other threads landing mid-build (a bulk import
            # writes from several) would make each attempt conflict until the retries run out.
            with self._write_lock, _engine_errors(f"index table {name}"):
                existing = {tuple(ix.columns) for ix in table.list_indices()}
                for key in ("user_id", "id"):  # scope filters, and fetching search winners by id
                    if (key,) not in existing:
                        table.create_index(key, config=BTree(), replace=True)
                for column in ("text", "context") if SPECS[name].vectors else ():
                    if (column,) not in existing:
                        table.create_index(column, config=FTS(**FTS_CONFIG))

        self._retry(f"index table {name}", build)
        self._indexed.add(name)

    def _index_committed(self, name: str) -> None:
        """Index a table after a write committed to it: a failure is not the write's (its rows are in).

        Another process building or replacing the same index meanwhile can fail this build with an I/O
        error (seen on S3); the index is then left to this process's next write, or to the next full-text
        search through LanceDB, which builds it first.
        """
        try:
            self._ensure_indexes(name)
        except (StoreUnavailableError, StoreConflictError) as exc:
            log.warning("store %s: indexing %s left for later: %s", self.uri, name, exc)

    # -- writes -----------------------------------------------------------------------------

    def upsert(self, name: TableName, records: Sequence[BaseModel], vectors: np.ndarray | None = None) -> None:
        """Insert or replace records by id, in one batch (of one id given twice, the last wins)."""
        self._write(name, records, vectors, mode="upsert")

    def insert(self, name: TableName, records: Sequence[BaseModel], vectors: np.ndarray | None = None) -> None:
        """Append records whose ids are new by construction (about 3x cheaper than an upsert)."""
        self._write(name, records, vectors, mode="append")

    def insert_absent(self, name: TableName, records: Sequence[BaseModel], vectors: np.ndarray | None = None) -> int:
        """Insert the records whose id is not in the table yet; returns how many were inserted.

        Rows already there are left untouched. Atomic across processes: of several inserting one new
        id at once, exactly one row results (the id is the table's primary key, so Lance turns the race
        into a commit conflict and the loser's retry finds the row). Of one id given twice, the first wins.
        """
        return self._write(name, records, vectors, mode="absent")

    def _write(
        self,
        name: TableName,
        records: Sequence[BaseModel],
        vectors: np.ndarray | None,
        *,
        mode: Literal["append", "upsert", "absent"],
    ) -> int:
        if not records:
            return 0
        spec = SPECS[name]
        if spec.vectors:
            if vectors is None or len(vectors) != len(records):
                raise InvalidArgumentError(f"table {name} needs one vector per record")
            if vectors.ndim != 2 or vectors.shape[1] != self.dimensions:
                raise StoreMismatchError(f"vectors have shape {vectors.shape}, store has {self.dimensions} dimensions")
        for record in records:
            if not isinstance(record, spec.model):
                raise InvalidArgumentError(f"table {name} holds {spec.model.__name__}, not {type(record).__name__}")
        keep = unique([cast(Any, r).id for r in records], last=mode != "absent")
        vectors = None if vectors is None else np.asarray(vectors)[keep]
        rows = [row(records[i], None if vectors is None else vectors[n]) for n, i in enumerate(keep)]
        data = pa.Table.from_pylist(rows, schema=self._schema(name))
        table = self.table(name) if mode == "append" else self._keyed_table(name)

        def commit() -> int:
            with self._write_lock, _engine_errors(f"write to {name}"):
                before = int(table.version)
                if mode == "append":
                    table.add(data)
                    written = len(rows)
                else:
                    # The scan, not the id index: Lance's indexed merge skips the new-key conflict check.
                    merge = table.merge_insert("id").use_index(False)
                    if mode == "upsert":
                        merge = merge.when_matched_update_all()
                    result = merge.when_not_matched_insert_all().execute(data)
                    written = int(result.num_inserted_rows) + int(result.num_updated_rows)
                after = int(table.version)
                if vectors is not None and after == before + 1 and (mode != "absent" or written == len(rows)):
                    self._vectors.wrote(name, before=before, after=after, rows=per_user(rows, vectors))
                else:  # someone else committed in between, or rows were skipped: cached blocks may be wrong
                    self._vectors.drop(name)
                return written

        written = self._retry(f"write to {name}", commit)
        if mode == "upsert" and written > len(rows):  # the table held an id twice (written before the key)
            self.dedupe(name, [r["id"] for r in rows])
        self._index_committed(name)
        self._after_write(name, table)
        return written

    def delete(self, name: TableName, where: Where) -> None:
        def commit() -> None:
            with self._write_lock, _engine_errors(f"delete from {name}"):
                self.table(name).delete(where.sql())
                self._vectors.drop(name)

        self._retry(f"delete from {name}", commit)
        self._after_write(name, self.table(name))

    def dedupe(self, name: str, ids: Sequence[str] | None = None) -> int:
        """Delete all but one row per id (of ``ids``, or all; see :func:`duplicate_losers`); returns how many."""

        def commit() -> int:
            with self._write_lock, _engine_errors(f"remove duplicates from {name}"):
                query = self.table(name).search().with_row_id(True)
                if ids is not None:
                    query = query.where(Where(eq={}, isin={"id": list(ids)}).sql())
                rows = query.select(["id", "updated_at"]).limit(None).to_arrow().to_pylist()
                losers = duplicate_losers(rows)
                if losers:  # row ids are integers; each paired with its id, so a stale address deletes nothing
                    pairs = (f"(id = {sql_literal(i)} AND _rowid = {r:d})" for i, r in losers)
                    self.table(name).delete(" OR ".join(pairs))
                    self._vectors.drop(name)
                return len(losers)

        return self._retry(f"remove duplicates from {name}", commit)

    def _after_write(self, name: str, table: Any) -> None:
        """Every write adds a fragment and a version; many small ones slow every read down.

        So every ``compact_every`` writes from this process the table is compacted and its
        indexes caught up (versions younger than ``keep_versions`` stay for concurrent readers;
        the janitor's storage compaction does the rest). The write has committed by then: a
        compaction that keeps losing commit races to other writers is left for the next time
        (it rewrites what they are changing), never the write's failure.
        """
        self._writes[name] = self._writes.get(name, 0) + 1
        if self.compact_every and self._writes[name] >= self.compact_every:
            self._writes[name] = 0

            def compact() -> None:
                with self._write_lock, _engine_errors(f"compact {name}"):
                    table.optimize(cleanup_older_than=self.keep_versions, delete_unverified=False)
                    self._vectors.drop(name)

            try:
                self._restore_overwritten(name, table)  # first: the versions compaction cleans up may hold rows
                self._retry(f"compact {name}", compact)
            except StoreConflictError as exc:
                log.warning("compaction of %s left for later: %s", name, exc)

    # -- reads ------------------------------------------------------------------------------

    def _records(self, name: str, rows: list[dict[str, Any]]) -> list[Any]:
        model = SPECS[name].model
        return [model.model_validate_json(r["record"]) for r in rows]

    def query(self, name: TableName, where: Where, *, limit: int | None = None) -> list[Any]:
        """Records matching ``where`` (no order guaranteed)."""
        with _engine_errors(f"read {name}"):
            q = self.table(name).search().where(where.sql()).select(_RESULT_COLUMNS)
            rows = (q.limit(limit) if limit else q.limit(None)).to_list()
        return self._records(name, rows)

    def column_values(self, name: TableName, where: Where, column: str) -> list[str]:
        """Distinct values of one filterable column (e.g. the subjects a user has), without parsing records."""
        with _engine_errors(f"read {name}"):
            rows = self.table(name).search().where(where.sql()).select([checked_column(column)]).limit(None).to_arrow()
        return sorted({v for v in rows.column(column).to_pylist() if v is not None})

    def scopes(self, name: TableName, where: Where | None = None) -> list[tuple[str, str]]:
        """Distinct (namespace, user_id) pairs with rows matching ``where``: how jobs find their users."""
        with _engine_errors(f"read {name}"):
            q = self.table(name).search()
            if where is not None:
                q = q.where(where.sql())
            rows = q.select(["namespace", "user_id"]).limit(None).to_arrow()
        pairs = zip(rows.column("namespace").to_pylist(), rows.column("user_id").to_pylist(), strict=True)
        return sorted(set(pairs))

    def last_activity(self, name: TableName, where: Where | None = None) -> dict[tuple[str, str, str], datetime]:
        """Latest ``updated_at`` per (namespace, user_id, session_id): how jobs find idle sessions."""
        keys = ["namespace", "user_id", "session_id"]
        with _engine_errors(f"read {name}"):
            q = self.table(name).search()
            if where is not None:
                q = q.where(where.sql())
            rows = q.select([*keys, "updated_at"]).limit(None).to_arrow()
            grouped = rows.group_by(keys).aggregate([("updated_at", "max")]).to_pylist()
        return {(r["namespace"], r["user_id"], r["session_id"]): r["updated_at_max"] for r in grouped}

    def get(self, name: TableName, where: Where, ids: Sequence[str]) -> list[Any]:
        if not ids:
            return []
        scoped = Where(eq=where.eq, isin={**(where.isin or {}), "id": list(ids)})
        return self.query(name, scoped)

    def version(self, name: TableName) -> int:
        """The table's current version (moves with every write, from any process)."""
        with _engine_errors(f"read {name}"):
            return self._pins.read(name, lambda: self._engine_version(name))

    def _engine_version(self, name: str) -> int:
        """The table's latest version: the engine's, unless its versions folder shows no commit since it last said."""
        table = self.table(name)
        if self._watch is None:
            return int(table.version)
        return self._watch.read(self._versions_folder(name, table), lambda: int(table.version))

    def _versions_folder(self, name: str, table: Any) -> str | None:
        """The local folder of ``table``'s versions; None for a URI or a read-only stand-in for a missing table."""
        if name not in self._tables or self._tables[name] is not table:
            return None
        opened, folder = self._folders.get(name, (None, None))
        if opened is not table:  # first asked, or opened again (reembed rewrites a table)
            uri = str(table.uri)
            folder = None if "://" in uri else os.path.join(uri, "_versions")
            self._folders[name] = (table, folder)
        return folder

    def pinned_versions(self) -> contextlib.AbstractContextManager[None]:
        """Within the block, this thread reads each table's version once (one recall: one check per table)."""
        return self._pins.pinned()

    def count(self, name: TableName, where: Where | None = None) -> int:
        with _engine_errors(f"count {name}"):
            return int(self.table(name).count_rows(where.sql() if where else None))

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
        versions: dict[str, int] = {}
        for name in SPECS:
            table = self._keyed_table(name)  # declaring the key also removes duplicate ids of an older store
            self._restore_overwritten(name, table)  # first: the versions cleaned up may hold rows an Overwrite hid
            self._vectors.drop(name)
            with _engine_errors(f"count {name}"):
                if table.count_rows() == 0:
                    continue
            self._ensure_indexes(name)

            def compact(table: Any = table, name: str = name) -> int:
                with self._write_lock, _engine_errors(f"optimize {name}"):
                    table.optimize(
                        cleanup_older_than=self.keep_versions if cleanup_older_than is None else cleanup_older_than,
                        delete_unverified=False,
                    )
                    return len(table.list_versions())

            versions[name] = self._retry(f"optimize {name}", compact)
        return versions

    def stats(self) -> dict[str, Any]:
        """Rows and versions per table, for reports and benchmarks."""
        out: dict[str, Any] = {}
        for name in SPECS:
            table = self.table(name)
            with _engine_errors(f"describe {name}"):
                out[name] = {"rows": table.count_rows(), "versions": len(table.list_versions())}
        return out

    def keys(self, name: TableName, where: Where) -> list[tuple[datetime, str]]:
        """``(created_at, id)`` of the rows matching ``where``, in that order: a stable paging key."""
        with _engine_errors(f"read {name}"):
            rows = self.table(name).search().where(where.sql()).select(["created_at", "id"]).limit(None).to_arrow()
        return sorted(zip(rows.column("created_at").to_pylist(), rows.column("id").to_pylist(), strict=True))

    def counts(self, name: TableName, where: Where, column: str) -> dict[str, int]:
        """Rows matching ``where`` per value of one filterable column (e.g. per status)."""
        with _engine_errors(f"count {name}"):
            rows = self.table(name).search().where(where.sql()).select([checked_column(column)]).limit(None).to_arrow()
            grouped = rows.group_by(column).aggregate([(column, "count")]).to_pylist()
        return {str(r[column]): int(r[f"{column}_count"]) for r in grouped}

    def disk_bytes(self) -> int | None:
        """Bytes of every file under the store folder; None when the store is not a local folder."""
        if "://" in self.uri and not self.uri.startswith("file://"):
            return None
        root = Path(self.uri.removeprefix("file://"))
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())

    def purge(self, name: TableName) -> None:
        """Make deleted rows unrecoverable: rewrite the table from its live rows, rebuild its indexes and
        delete every older version and unreferenced file (data, deletion files, indexes, transactions).

        ``optimize`` alone is not enough: compaction keeps a fragment whose deleted share is small (and
        skips empty tables), index files keep the old tokens, and old versions keep everything. Needs the
        store to itself: a reader or writer in another process still on an older version fails.
        """
        table = self.table(name)

        def rewrite() -> None:
            with self._write_lock, _engine_errors(f"purge {name}"), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=r".*cleanup_older_than=0.*", category=UserWarning)
                live = table.to_arrow()
                table.add(live, mode="overwrite")
                self._vectors.drop(name)
                self._indexed.discard(name)
                if live.num_rows:
                    self._ensure_indexes(name)
                table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)

        self._retry(f"purge {name}", rewrite)

    # -- leases (see _leases.py) ------------------------------------------------------------

    def _leases(self) -> Any:
        if LEASES not in self._tables:
            with _engine_errors("open the leases table"):
                try:
                    table = self._open(LEASES)
                except (ValueError, FileNotFoundError):  # lancedb's "table not found"
                    with self._write_lock:
                        table = self._retry("create the leases table", lambda: self._create(LEASES, _LEASE_SCHEMA))
            self._tables[LEASES] = table
            self._restore_overwritten(LEASES, table)
        return self._tables[LEASES]

    def claim(
        self, key: str, *, holder: str, token: str, expires_at: datetime, now: datetime, renew: bool = False
    ) -> bool:
        """Write the lease row of ``key`` if it may be taken; True if it was written.

        It may be taken when absent, expired at ``now`` or held by ``holder``; with ``renew``, only
        when it still carries ``token``. One merge decides, so two processes never both win: a
        concurrent update of the row, or insert of the key, makes the later commit conflict and
        its retry sees the winner's row.
        """
        table = self._leases()
        row = pa.Table.from_pylist(
            [{"id": key, "holder": holder, "token": token, "expires_at": expires_at}], schema=_LEASE_SCHEMA
        )
        if renew:
            condition = f"target.token = {sql_literal(token)}"
        else:
            condition = f"target.expires_at <= {sql_timestamp(now)} OR target.holder = {sql_literal(holder)}"

        def commit() -> int:
            with self._write_lock, _engine_errors("write a lease"):
                merge = table.merge_insert("id").use_index(False).when_matched_update_all(where=condition)
                result = (merge if renew else merge.when_not_matched_insert_all()).execute(row)
                return int(result.num_inserted_rows) + int(result.num_updated_rows)

        won = self._retry("write a lease", commit) == 1
        self._after_write(LEASES, table)
        return won

    def unclaim(self, key: str, *, token: str) -> None:
        """Delete the lease row of ``key`` if it still carries ``token`` (else someone took it over)."""
        table = self._leases()

        def commit() -> None:
            with self._write_lock, _engine_errors("release a lease"):
                table.delete(f"id = {sql_literal(key)} AND token = {sql_literal(token)}")

        self._retry("release a lease", commit)
        self._after_write(LEASES, table)

    def claim_many(
        self, keys: Sequence[str], *, holder: str, token: str, expires_at: datetime, now: datetime
    ) -> set[str]:
        """:meth:`claim` of several keys in one merge, one ``token`` for all; returns the keys written."""
        table = self._leases()
        rows = pa.Table.from_pylist(
            [{"id": k, "holder": holder, "token": token, "expires_at": expires_at} for k in keys], schema=_LEASE_SCHEMA
        )
        condition = f"target.expires_at <= {sql_timestamp(now)} OR target.holder = {sql_literal(holder)}"

        def commit() -> int:
            with self._write_lock, _engine_errors("write leases"):
                merge = table.merge_insert("id").use_index(False).when_matched_update_all(where=condition)
                result = merge.when_not_matched_insert_all().execute(rows)
                return int(result.num_inserted_rows) + int(result.num_updated_rows)

        won = self._retry("write leases", commit)
        self._after_write(LEASES, table)
        if won >= len(set(keys)):
            return set(keys)
        # Some were held by others: ours are the rows that carry this token (read back, one key at a time).
        return {k for k in keys if (row := self.lease_row(k)) is not None and row["token"] == token}

    def unclaim_many(self, keys: Sequence[str], *, token: str) -> None:
        """:meth:`unclaim` of several keys in one delete."""
        if not keys:
            return
        table = self._leases()
        ids = ", ".join(sql_literal(k) for k in keys)

        def commit() -> None:
            with self._write_lock, _engine_errors("release leases"):
                table.delete(f"id IN ({ids}) AND token = {sql_literal(token)}")

        self._retry("release leases", commit)
        self._after_write(LEASES, table)

    def lease_row(self, key: str) -> dict[str, Any] | None:
        """The lease row of ``key`` (id, holder, token, expires_at), or None."""
        with _engine_errors("read a lease"):
            rows = self._leases().search().where(f"id = {sql_literal(key)}").limit(None).to_list()
        return {k: rows[0][k] for k in _LEASE_SCHEMA.names} if rows else None


def _rest(where: Where) -> dict[str, str]:
    """The equality tests of ``where`` beyond the user's scope (a cached block holds one user)."""
    return {k: v for k, v in where.eq.items() if k not in ("namespace", "user_id")}


def _fts_query(cue: str) -> MultiMatchQuery:
    """Both columns, as plain words: a query object, so nothing in the cue is parsed as syntax."""
    return MultiMatchQuery(cue, ["text", "context"], boosts=[1.0, 1.0], operator=FullTextOperator.OR)


def local_uri(uri: str) -> str:
    """A folder path with ``~`` expanded (MCP hosts and config files pass it unexpanded); URIs as given."""
    return uri if "://" in uri else str(Path(uri).expanduser())


def stored_meta(uri: str, *, storage_options: Mapping[str, str] | None = None) -> dict[str, str]:
    """The meta table of the store at ``uri`` (schema_version, embedder_id, dimensions, ...); {} if none yet."""
    uri = local_uri(uri)
    if "://" not in uri and not Path(uri).exists():
        return {}
    with _engine_errors("read the meta table"):
        try:
            versions = _meta_versions(lancedb.connect(uri, storage_options=dict(storage_options or {})))
        except (ValueError, FileNotFoundError):  # lancedb's "table not found"
            return {}
        return settled_meta(uri, *versions)[0]


def _meta_versions(db: Any) -> tuple[int, Callable[[int], list[dict[str, str]] | None]]:
    """The meta table's latest version and a reader of any version's rows (None for a cleaned-up one)."""
    latest = (table := db.open_table("meta")).version
    table.checkout(latest)  # its rows and number from one version, whatever commits meanwhile

    def read(version: int) -> list[dict[str, str]] | None:
        older = table if version == latest else db.open_table("meta")
        if not _checked_out(older, version):
            return None
        return cast(list[dict[str, str]], older.to_arrow().to_pylist())

    return latest, read


def _stamp(schema: pa.Schema, made: str | None = None) -> pa.Schema:
    """``schema`` with its ``id`` field stamped with creation ``made`` (a fresh one if None)."""
    field = schema.field("id")
    return schema.set(schema.get_field_index("id"), field.with_metadata(stamped(field.metadata, made)))


def _stamp_at(table: Any, version: int) -> Stamp:
    """The creation stamped on one version of ``table`` (checked out there), GONE if cleaned up."""
    return stamp_of(table.schema.field("id").metadata) if _checked_out(table, version) else GONE


def _checked_out(table: Any, version: int) -> bool:
    """Check ``table`` out at ``version``; False when that version was cleaned up."""
    try:
        table.checkout(version)
    except ValueError as exc:
        if "no longer exists" in str(exc):
            return False
        raise
    return True
