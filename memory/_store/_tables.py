"""The tables of one store as this process opened them: the shared part every other part of the store uses.

:class:`Tables` holds the connection, the tables opened so far, the write lock and the commit-retry
policy; it opens a table (creating it, stamped, when absent), brings back what a racing create hid
(see :mod:`._creation`), declares ``id`` the primary key, removes duplicate ids and builds indexes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import lancedb
import pyarrow as pa
from lancedb.db import DBConnection
from lancedb.index import FTS, BTree
from lancedb.table import Table as EngineTable

from .._errors import InvalidArgumentError, StoreConflictError, StoreMismatchError, StoreUnavailableError
from .._filters import Where, sql_literal
from .._index import REPLY_VECTOR, SENTENCE_VECTORS, SPECS, ReadCache, VectorCache, duplicate_losers, unique
from .._text import FTS_CONFIG
from ._commits import CommitRetry, retry_conflicts
from ._creation import GONE, Stamp, clobbered, is_settled, new_creation, settle, stamp_of, stamped
from ._engine_errors import engine_errors
from ._meta import REEMBEDDING, width_mismatch

log = logging.getLogger(__name__)

__all__ = ["LEASES", "PRIMARY_KEY", "Tables", "checked_out", "local_uri", "stamped_schema"]

T = TypeVar("T")

# Lance dedupes two concurrent merge_inserts of one new key only when the key column is the table's
# (unenforced) primary key: the later commit then conflicts and its retry finds the row (lance#5633).
PRIMARY_KEY = {"lance-schema:unenforced-primary-key": "true"}
_PK_MARKERS = (b"lance-schema:unenforced-primary-key", b"lance-schema:unenforced-primary-key:position")
# The leases table (its schema and rows: :mod:`._lease_table`), repaired like the tier tables.
LEASES = "leases"


class Tables:
    """One database's connection and the tables this process opened in it.

    ``vectors``: the store's vector cache, whose blocks of a table a repair or a dedupe makes stale.
    ``dimensions`` and ``embedder_id`` change while ``reembed`` runs.
    """

    def __init__(
        self,
        uri: str,
        *,
        embedder_id: str,
        dimensions: int,
        create: bool,
        commit_retry: CommitRetry,
        read_consistency: timedelta | None,
        storage_options: dict[str, str],
        vectors: VectorCache,
    ) -> None:
        self.uri = uri
        self.dimensions = dimensions
        self.embedder_id = embedder_id
        self.create = create
        self.commit_retry = commit_retry
        self.vectors = vectors
        self.held = ReadCache()  # small reads of this process, kept in step by its writes
        self._storage_options = storage_options
        self._pinned_db: DBConnection | None = None
        with engine_errors("connect"):
            self.db = lancedb.connect(
                uri, read_consistency_interval=read_consistency, storage_options=self._storage_options
            )
        self.opened: dict[str, EngineTable] = {}
        self.indexed: set[str] = set()
        # Tables of records with two sides (turns) made before they had a vector each: one vector serves
        # both until ``tiermem reembed`` rewrites them (the store's older recipe is reported).
        self.one_sided: set[str] = set()
        # Tables of such records made before their sentences had a vector each (recipe 4): sides only.
        self.unsplit: set[str] = set()
        self.keyed: set[str] = set()
        self.write_lock = threading.RLock()
        self.gate: Callable[[], None] = _open  # waits while a purge holds its fence (set by the store: _purge)

    def schema(self, name: str, *, full: bool = False) -> pa.Schema:
        """The columns of ``name`` as this code makes it (``full``), else as the opened table has them."""
        fields = [
            pa.field("id", pa.string(), nullable=False, metadata=PRIMARY_KEY),
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
        if SPECS[name].sides and (full or name not in self.one_sided):
            fields.append(pa.field(REPLY_VECTOR, pa.list_(pa.float32(), self.dimensions)))
        if SPECS[name].sides and (full or name not in self.one_sided | self.unsplit):
            fields.append(pa.field(SENTENCE_VECTORS, pa.list_(pa.list_(pa.float32(), self.dimensions))))
        return pa.schema(fields)

    def sides(self, name: str) -> bool:
        """Whether ``name``'s rows hold a vector for each side of their record (see :data:`REPLY_VECTOR`)."""
        if not SPECS[name].sides:
            return False
        self.table(name)  # opened once: its columns tell
        return name not in self.one_sided

    def sentences(self, name: str) -> bool:
        """Whether ``name``'s rows hold their sentences' vectors too (see :data:`SENTENCE_VECTORS`)."""
        return self.sides(name) and name not in self.unsplit

    def vector_columns(self, name: str) -> list[str]:
        """The vector columns ``name``'s rows have."""
        if not self.sides(name):
            return ["vector"]
        return ["vector", REPLY_VECTOR] + ([] if name in self.unsplit else [SENTENCE_VECTORS])

    def retry(self, action: str, write: Callable[[], T], *, gated: bool = True) -> T:
        """``write()``, retried on lost commit races; each attempt first passes the purge fence unless not ``gated``.

        Ungated: the leases and meta tables (no purge touches them; the fence itself is a lease) and
        callers that passed the gate before taking the write lock (a fence must not wait under it).
        """
        if not gated:
            return retry_conflicts(write, action=action, policy=self.commit_retry)

        def attempt() -> T:
            self.gate()
            return write()

        return retry_conflicts(attempt, action=action, policy=self.commit_retry)

    def table_names(self) -> set[str]:
        names: set[str] = set()
        token: str | None = None
        while True:
            page = self.db.list_tables(page_token=token)
            names.update(page.tables)
            if not (token := page.page_token):
                return names

    def open(self, name: str) -> EngineTable:
        return self.db.open_table(name)

    def drop_cached(self, name: str) -> None:
        """Forget this process's cached vectors, words and reads of ``name`` (a change they cannot follow)."""
        self.vectors.drop(name)
        self.held.drop(name)

    def table(self, name: str) -> EngineTable:
        if name not in SPECS:
            raise InvalidArgumentError(f"unknown table {name!r}")
        if name in self.opened:
            return self.opened[name]
        with engine_errors(f"open table {name}"):
            try:
                table = self.open(name)
            except (ValueError, FileNotFoundError):  # lancedb's "table not found"
                if not self.create:  # read-only: an empty stand-in, looked for again on the next call
                    return lancedb.connect("memory://").create_table(name, schema=self.schema(name))
                self.gate()  # not under the write lock, which a purging thread of this process needs
                with self.write_lock:  # threads of this process creating it at once would conflict
                    create = lambda: self.create_table(name, self.schema(name))  # noqa: E731
                    table = self.retry(f"create table {name}", create, gated=False)
            schema = table.schema
        expected = set(self.schema(name, full=True).names)
        if SPECS[name].sides and set(schema.names) == expected - {REPLY_VECTOR, SENTENCE_VECTORS}:
            self.one_sided.add(name)  # written before a turn's sides had a vector each
        elif SPECS[name].sides and set(schema.names) == expected - {SENTENCE_VECTORS}:
            self.unsplit.add(name)  # written before a turn's sentences had a vector each
        elif set(schema.names) != expected:
            raise StoreMismatchError(
                f"table {name!r} in {self.uri!r} has columns {sorted(schema.names)}, expected "
                f"{sorted(expected)}: it was written by another tiermem version"
            )
        width = getattr(schema.field("vector").type, "list_size", None) if SPECS[name].vectors else self.dimensions
        if width != self.dimensions and not self.embedder_id.startswith(REEMBEDDING):  # reembed rewrites them
            raise StoreMismatchError(width_mismatch(self.uri, name, width, self.dimensions))
        self.opened[name] = table
        self.restore_overwritten(name, table, schema)
        return table

    def auxiliary(self, name: str, schema: pa.Schema, *, create: bool, gated: bool = True) -> EngineTable | None:
        """A table of the store's own bookkeeping (leases, erasures), opened once found; made when ``create``,
        else None while it does not exist. ``gated``: the making waits at the purge fence first (see :meth:`retry`)."""
        if name in self.opened:
            return self.opened[name]
        with engine_errors(f"open the {name} table"):
            try:
                table = self.open(name)
            except (ValueError, FileNotFoundError):  # lancedb's "table not found"
                if not create:
                    return None
                if gated:
                    self.gate()  # not under the write lock, which a purging thread of this process needs
                with self.write_lock:
                    made = lambda: self.create_table(name, schema)  # noqa: E731
                    table = self.retry(f"create the {name} table", made, gated=False)
        self.opened[name] = table
        self.restore_overwritten(name, table)
        return table

    def create_table(self, name: str, schema: pa.Schema) -> EngineTable:
        """Create the table stamped with a creation of this process's own, or open it if it exists by now.

        A create that lost a commit race raises StoreConflictError here, inside the caller's retry: the
        retry then finds the table made and opens it (CI saw a raw engine conflict escape the retry).
        """
        with engine_errors(f"create table {name}"):
            try:
                return self.db.create_table(name, schema=stamped_schema(schema), mode="create")
            except ValueError as exc:  # "Table 'x' already exists": another process created it meanwhile
                if "already exists" not in str(exc):
                    raise
            return self.open(name)

    def restore_overwritten(self, name: str, table: EngineTable, schema: pa.Schema | None = None) -> None:
        """Bring back the rows a racing create's Overwrite hid, once (see :mod:`._creation`); writers only.

        ``schema``: the table's, if just read. A table marked settled at its stamp costs nothing more.
        """
        if not self.create or is_settled((schema or table.schema).field("id").metadata):
            return

        def repair() -> bool:
            with self.write_lock, engine_errors(f"restore table {name}"):
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
                self.drop_cached(name)
                self.indexed.discard(name)
                return name in SPECS and pinned.count_rows() > 0

        if self.retry(f"restore table {name}", repair, gated=name in SPECS):
            self.index_committed(name)

    def _unrefreshed(self) -> DBConnection:
        """A connection whose tables stay at the version they opened at (the store's check for newer ones)."""
        if self._pinned_db is None:
            with engine_errors("connect"):
                self._pinned_db = lancedb.connect(self.uri, storage_options=self._storage_options)
        return self._pinned_db

    def keyed_table(self, name: str) -> EngineTable:
        """The table, its ``id`` declared the primary key first (stores written before tiermem declared it).

        Declaring it also removes duplicate ids such a store may hold (two writers inserting one id at once).
        """
        table = self.table(name)
        if name not in self.keyed:
            if not any(m in (table.schema.field("id").metadata or {}) for m in _PK_MARKERS):

                def declare() -> None:
                    with self.write_lock, engine_errors(f"declare the key of {name}"):
                        # A local table (LanceTable) has it; the engine's Table base does not declare it.
                        table.set_unenforced_primary_key("id")  # type: ignore[attr-defined]

                self.retry(f"declare the key of {name}", declare)
                self.dedupe(name)
            self.keyed.add(name)
        return table

    def dedupe(self, name: str, ids: Sequence[str] | None = None) -> int:
        """Delete all but one row per id (of ``ids``, or all; see :func:`duplicate_losers`); returns how many."""

        def commit() -> int:
            with self.write_lock, engine_errors(f"remove duplicates from {name}"):
                query = self.table(name).search().with_row_id(True)
                if ids is not None:
                    query = query.where(Where(eq={}, isin={"id": list(ids)}).sql())
                rows = query.select(["id", "updated_at"]).limit(None).to_arrow().to_pylist()
                losers = duplicate_losers(rows)
                if losers:  # row ids are integers; each paired with its id, so a stale address deletes nothing
                    pairs = (f"(id = {sql_literal(i)} AND _rowid = {r:d})" for i, r in losers)
                    self.table(name).delete(" OR ".join(pairs))
                    self.drop_cached(name)
                return len(losers)

        return self.retry(f"remove duplicates from {name}", commit)

    def ensure_indexes(self, name: str) -> None:
        """Full-text and scalar indexes, built once a table has rows (LanceDB needs data to index)."""
        if name in self.indexed:
            return
        table = self.table(name)

        def build() -> None:
            # Under the write lock: a commit of this process's other threads landing mid-build (a bulk import
            # writes from several) would make each attempt conflict until the retries run out.
            with self.write_lock, engine_errors(f"index table {name}"):
                existing = {tuple(ix.columns) for ix in table.list_indices()}
                for key in ("user_id", "id"):  # scope filters, and fetching search winners by id
                    if (key,) not in existing:
                        table.create_index(key, config=BTree(), replace=True)
                for column in ("text", "context") if SPECS[name].vectors else ():
                    if (column,) not in existing:
                        table.create_index(column, config=FTS(**FTS_CONFIG))

        self.retry(f"index table {name}", build)
        self.indexed.add(name)

    def index_committed(self, name: str) -> None:
        """Index a table after a write committed to it: a failure is not the write's (its rows are in).

        Another process building or replacing the same index meanwhile can fail this build with an I/O
        error (seen on S3); the index is then left to this process's next write, or to the next full-text
        search through LanceDB, which builds it first.
        """
        try:
            self.ensure_indexes(name)
        except (StoreUnavailableError, StoreConflictError) as exc:
            log.warning("store %s: indexing %s left for later: %s", self.uri, name, exc)


def _open() -> None:
    """The gate of a store without a purge fence: always open."""


def local_uri(uri: str) -> str:
    """A folder path with ``~`` expanded (MCP hosts and config files pass it unexpanded); URIs as given."""
    return uri if "://" in uri else str(Path(uri).expanduser())


def stamped_schema(schema: pa.Schema, made: str | None = None) -> pa.Schema:
    """``schema`` with its ``id`` field stamped with creation ``made`` (a fresh one if None)."""
    field = schema.field("id")
    return schema.set(schema.get_field_index("id"), field.with_metadata(stamped(field.metadata, made)))


def _stamp_at(table: EngineTable, version: int) -> Stamp:
    """The creation stamped on one version of ``table`` (checked out there), GONE if cleaned up."""
    return stamp_of(table.schema.field("id").metadata) if checked_out(table, version) else GONE


def checked_out(table: EngineTable, version: int) -> bool:
    """Check ``table`` out at ``version``; False when that version was cleaned up."""
    try:
        table.checkout(version)
    except ValueError as exc:
        if "no longer exists" in str(exc):
            return False
        raise
    return True
