"""The LanceDB store: the only module that imports lancedb, and where its errors become ours.

One database per store URI (a folder, ``s3://...`` or ``db://...``). One table per tier plus
edges, turns, aliases and a meta table that pins the schema version and the embedder.
Every filter goes through :func:`sql_literal`, so no id can widen a query.
"""

from __future__ import annotations

import contextlib
import re
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS, BTree
from lancedb.remote.errors import LanceDBClientError
from pydantic import BaseModel

from ._errors import (
    InvalidArgumentError,
    StoreConflictError,
    StoreError,
    StoreMismatchError,
    StoreNotFoundError,
    StoreUnavailableError,
    TiermemError,
)
from ._filters import MAX_FILTER_VALUE, Where, checked_column, sql_literal
from ._records import Alias, Digest, Edge, Episode, Fact, Turn, WorkingEntry
from ._text import FTS_CONFIG
from ._vectors import COLUMNS, VectorBlock, VectorCache, column_array, top_k

__all__ = ["MAX_FILTER_VALUE", "SCHEMA_VERSION", "Hit", "Store", "TableName", "Where", "sql_literal", "stored_meta"]

SCHEMA_VERSION = "2"
# The meta table's embedder_id while ``tiermem reembed`` runs: no embedder opens a half-migrated store.
REEMBEDDING = "reembedding:"

TableName = Literal["working", "episodes", "facts", "digests", "edges", "turns", "aliases"]
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True, kw_only=True)
class Hit:
    """A search result: the record, the engine's score and the stored vector."""

    record: Any
    score: float
    vector: np.ndarray


@dataclass(frozen=True, kw_only=True)
class _Spec(Generic[R]):
    model: type[R]
    vectors: bool


_SPECS: dict[str, _Spec[Any]] = {
    "working": _Spec(model=WorkingEntry, vectors=True),
    "episodes": _Spec(model=Episode, vectors=True),
    "facts": _Spec(model=Fact, vectors=True),
    "digests": _Spec(model=Digest, vectors=True),
    "edges": _Spec(model=Edge, vectors=True),
    "turns": _Spec(model=Turn, vectors=True),
    "aliases": _Spec(model=Alias, vectors=False),
}
_RESULT_COLUMNS = ["id", "record"]
_HIT_COLUMNS = ["id", "record", "vector"]


# LanceDB's Rust core reaches Python as builtin exceptions (ValueError, RuntimeError, OSError)
# whose message names the engine's error; these patterns tell its kinds apart.
_CONFLICT = re.compile(r"commit conflict|write contention|concurrent writers", re.IGNORECASE)
_NOT_FOUND = re.compile(r"was not found|not found:|no such file", re.IGNORECASE)
_IO = re.compile(r"LanceError\(IO\)|object ?store|io error", re.IGNORECASE)


def _store_error_type(exc: Exception) -> type[StoreError] | None:
    """Which StoreError an engine exception is, or None for an exception of no known kind."""
    text = str(exc)
    if isinstance(exc, (ValueError, RuntimeError, OSError)) and _CONFLICT.search(text):
        return StoreConflictError
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return StoreNotFoundError
    if isinstance(exc, ValueError) and _NOT_FOUND.search(text):
        return StoreNotFoundError  # "Table 'x' was not found"
    if isinstance(exc, (RuntimeError, OSError)) and _IO.search(text):
        return StoreNotFoundError if _NOT_FOUND.search(text) else StoreUnavailableError
    if isinstance(exc, (OSError, LanceDBClientError)):  # disk, permissions, network; pyarrow's ArrowIOError too
        return StoreUnavailableError
    return None


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
        error_type = _store_error_type(exc)
        if error_type is None:
            raise
        raise error_type(f"store failed to {action}: {exc}") from exc


def _searchable_text(record: BaseModel) -> str:
    text = getattr(record, "search_text", None) or getattr(record, "text", None) or getattr(record, "summary", None)
    return str(text or "")


def _row(record: BaseModel, vector: np.ndarray | None) -> dict[str, Any]:
    rec: Any = record  # every stored record has id, scope and created_at; the rest is per type
    row: dict[str, Any] = {
        "id": rec.id,
        "namespace": rec.namespace,
        "user_id": rec.user_id,
        "session_id": getattr(record, "session_id", None),
        "subject": getattr(record, "subject", None) or getattr(record, "source", None),
        "status": getattr(record, "status", None) or "active",
        "text": _searchable_text(record),
        # Full-text search reads both columns: a turn is also found by the turn it replies to.
        "context": f"{getattr(record, 'context', '')} {_searchable_text(record)}".strip(),
        "created_at": rec.created_at,
        "updated_at": getattr(record, "updated_at", None) or rec.created_at,
        "record": record.model_dump_json(),
    }
    if vector is not None:
        row["vector"] = vector
    return row


class Store:
    """Typed records in and out of one LanceDB database.

    This process sees its own writes at once and other processes' commits within
    ``read_consistency`` (default 0: every read checks for a newer version).
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
    ) -> None:
        self.uri = uri = local_uri(uri)
        self.dimensions = dimensions
        self.embedder_id = embedder_id
        with _engine_errors("connect"):
            self._db = lancedb.connect(
                uri, read_consistency_interval=read_consistency, storage_options=dict(storage_options or {})
            )
        self._tables: dict[str, Any] = {}
        self._indexed: set[str] = set()
        self._writes: dict[str, int] = {}
        self._write_lock = threading.RLock()
        self.compact_every = compact_every
        self.keep_versions = keep_versions
        self._vectors = VectorCache(vector_cache_bytes)
        self._check_meta()

    # -- schema -----------------------------------------------------------------------------

    def _schema(self, name: str) -> pa.Schema:
        fields = [
            pa.field("id", pa.string(), nullable=False),
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
        if _SPECS[name].vectors:
            fields.append(pa.field("vector", pa.list_(pa.float32(), self.dimensions)))
        return pa.schema(fields)

    def _check_meta(self) -> None:
        """Refuse a store written with another embedder before any read or write."""
        wanted = {"schema_version": SCHEMA_VERSION, "embedder_id": self.embedder_id, "dimensions": str(self.dimensions)}
        schema = pa.schema([pa.field("key", pa.string()), pa.field("value", pa.string())])
        with _engine_errors("open the meta table"):
            meta = self._db.create_table("meta", schema=schema, exist_ok=True)
            stored = {r["key"]: r["value"] for r in meta.to_arrow().to_pylist()}
            if not stored:
                meta.merge_insert("key").when_not_matched_insert_all().execute(
                    [{"key": k, "value": v} for k, v in wanted.items()]
                )
                stored = {r["key"]: r["value"] for r in meta.to_arrow().to_pylist()}
        for key, value in wanted.items():
            if stored.get(key) != value:
                raise StoreMismatchError(_mismatch(self.uri, key, stored, wanted))

    def _set_meta(self, values: Mapping[str, str]) -> None:
        with _engine_errors("update the meta table"):
            merge = self._db.open_table("meta").merge_insert("key")
            merge.when_matched_update_all().when_not_matched_insert_all().execute(
                [{"key": k, "value": v} for k, v in values.items()]
            )

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
        for name, spec in _SPECS.items():
            if not spec.vectors:
                continue
            with _engine_errors(f"read {name}"):
                try:
                    rows = self._db.open_table(name).to_arrow().select(["record"]).to_pylist()
                except (ValueError, FileNotFoundError):  # no such table yet
                    rows = []
            records = self._records(name, rows)
            matrix = vectors(name, records) if records else np.zeros((0, dimensions), dtype=np.float32)
            if matrix.shape != (len(records), dimensions):
                raise StoreMismatchError(
                    f"re-embedding {name}: vectors of shape {matrix.shape}, not ({len(records)}, {dimensions})"
                )
            data = pa.Table.from_pylist([_row(r, matrix[i]) for i, r in enumerate(records)], schema=self._schema(name))
            with self._write_lock, _engine_errors(f"rewrite {name}"):
                self._tables[name] = self._db.create_table(name, data, mode="overwrite")
                self._vectors.drop(name)
                self._indexed.discard(name)
                if records:
                    self._ensure_indexes(name)
            counts[name] = len(records)
        self._set_meta({"embedder_id": embedder_id, "dimensions": str(dimensions)})
        self.embedder_id = embedder_id
        return counts

    def table(self, name: str) -> Any:
        if name not in _SPECS:
            raise InvalidArgumentError(f"unknown table {name!r}")
        if name not in self._tables:
            with _engine_errors(f"open table {name}"):
                try:
                    table = self._db.open_table(name)
                except (ValueError, FileNotFoundError):  # lancedb's "table not found"
                    table = self._db.create_table(name, schema=self._schema(name), exist_ok=True)
                found = set(table.schema.names)
            if found != set(self._schema(name).names):
                raise StoreMismatchError(
                    f"table {name!r} in {self.uri!r} has columns {sorted(found)}, expected "
                    f"{sorted(self._schema(name).names)}: it was written by another tiermem version"
                )
            self._tables[name] = table
        return self._tables[name]

    def _ensure_indexes(self, name: str) -> None:
        """Full-text and scalar indexes, built once a table has rows (LanceDB needs data to index)."""
        if name in self._indexed:
            return
        table = self.table(name)
        with _engine_errors(f"index table {name}"):
            existing = {tuple(ix.columns) for ix in table.list_indices()}
            for key in ("user_id", "id"):  # scope filters, and fetching search winners by id
                if (key,) not in existing:
                    table.create_index(key, config=BTree(), replace=True)
            for column in ("text", "context") if _SPECS[name].vectors else ():
                if (column,) not in existing:
                    table.create_index(
                        column, config=FTS(**FTS_CONFIG)
                    )
        self._indexed.add(name)

    # -- writes -----------------------------------------------------------------------------

    def upsert(self, name: TableName, records: Sequence[BaseModel], vectors: np.ndarray | None = None) -> None:
        """Insert or replace records by id, in one batch."""
        self._write(name, records, vectors, insert_only=False)

    def insert(self, name: TableName, records: Sequence[BaseModel], vectors: np.ndarray | None = None) -> None:
        """Append records whose ids are new by construction (about 3x cheaper than an upsert)."""
        self._write(name, records, vectors, insert_only=True)

    def _write(
        self, name: TableName, records: Sequence[BaseModel], vectors: np.ndarray | None, *, insert_only: bool
    ) -> None:
        if not records:
            return
        spec = _SPECS[name]
        if spec.vectors:
            if vectors is None or len(vectors) != len(records):
                raise InvalidArgumentError(f"table {name} needs one vector per record")
            if vectors.shape[1] != self.dimensions:
                raise StoreMismatchError(f"vectors have {vectors.shape[1]} dimensions, store has {self.dimensions}")
        for record in records:
            if not isinstance(record, spec.model):
                raise InvalidArgumentError(f"table {name} holds {spec.model.__name__}, not {type(record).__name__}")
        rows = [_row(r, None if vectors is None else vectors[i]) for i, r in enumerate(records)]
        data = pa.Table.from_pylist(rows, schema=self._schema(name))
        table = self.table(name)
        with self._write_lock, _engine_errors(f"write to {name}"):
            before = int(table.version)
            if insert_only:
                table.add(data)
            else:
                table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)
            after = int(table.version)
            if vectors is not None and after == before + 1:
                self._vectors.wrote(name, before=before, after=after, rows=_per_user(rows, vectors))
            else:  # someone else committed in between: cached blocks may miss their rows
                self._vectors.drop(name)
            self._ensure_indexes(name)
            self._after_write(name)

    def delete(self, name: TableName, where: Where) -> None:
        with self._write_lock, _engine_errors(f"delete from {name}"):
            self.table(name).delete(where.sql())
            self._vectors.drop(name)
            self._after_write(name)

    def _after_write(self, name: str) -> None:
        """Every write adds a fragment and a version; many small ones slow every read down.

        So every ``compact_every`` writes from this process the table is compacted and its
        indexes caught up (versions younger than ``keep_versions`` stay for concurrent readers;
        the janitor's storage compaction does the rest).
        """
        self._writes[name] = self._writes.get(name, 0) + 1
        if self.compact_every and self._writes[name] >= self.compact_every:
            self._writes[name] = 0
            self.table(name).optimize(cleanup_older_than=self.keep_versions, delete_unverified=False)
            self._vectors.drop(name)

    # -- reads ------------------------------------------------------------------------------

    def _records(self, name: str, rows: list[dict[str, Any]]) -> list[Any]:
        model = _SPECS[name].model
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
            return int(self.table(name).version)

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
            version = int(self.table(name).version)
            block = self._vectors.get(key, version) or self._load_block(name, namespace, user, version)
        rest = {k: v for k, v in where.eq.items() if k not in ("namespace", "user_id")}
        keep = block.mask(rest, where.isin or {}, where.ne or {})
        model = _SPECS[name].model
        return [
            Hit(record=model.model_validate_json(record), score=score, vector=vec)
            for record, score, vec in top_k(block, vector, keep, limit)
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
        """Full-text (BM25, stemmed, stop words removed) matches within ``where``."""
        if not text.strip() or (name not in self._indexed and self.count(name) == 0):
            return []
        self._ensure_indexes(name)
        with _engine_errors(f"full-text search {name}"):
            rows = (
                self.table(name)
                .search(text, query_type="fts", fts_columns=["text", "context"])
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
        for name in _SPECS:
            table = self.table(name)
            self._vectors.drop(name)
            with self._write_lock, _engine_errors(f"optimize {name}"):
                if table.count_rows() == 0:
                    continue
                self._ensure_indexes(name)
                table.optimize(
                    cleanup_older_than=self.keep_versions if cleanup_older_than is None else cleanup_older_than,
                    delete_unverified=False,
                )
                versions[name] = len(table.list_versions())
        return versions

    def stats(self) -> dict[str, Any]:
        """Rows and versions per table, for reports and benchmarks."""
        out: dict[str, Any] = {}
        for name in _SPECS:
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
        with self._write_lock, _engine_errors(f"purge {name}"), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*cleanup_older_than=0.*", category=UserWarning)
            live = table.to_arrow()
            table.add(live, mode="overwrite")
            self._vectors.drop(name)
            self._indexed.discard(name)
            if live.num_rows:
                self._ensure_indexes(name)
            table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)


def _per_user(
    rows: Sequence[dict[str, Any]], vectors: np.ndarray
) -> dict[tuple[str, str], tuple[dict[str, list[str | None]], np.ndarray]]:
    """Written rows grouped by user, in the shape the vector cache applies."""
    grouped: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(rows):
        grouped.setdefault((row["namespace"], row["user_id"]), []).append(i)
    return {
        key: ({c: [rows[i][c] for i in idx] for c in COLUMNS}, np.asarray(vectors[idx], dtype=np.float32))
        for key, idx in grouped.items()
    }


def local_uri(uri: str) -> str:
    """A folder path with ``~`` expanded (MCP hosts and config files pass it unexpanded); URIs as given."""
    return uri if "://" in uri else str(Path(uri).expanduser())


def stored_meta(uri: str, *, storage_options: Mapping[str, str] | None = None) -> dict[str, str]:
    """The meta table of the store at ``uri`` (schema_version, embedder_id, dimensions); {} if none yet."""
    uri = local_uri(uri)
    if "://" not in uri and not Path(uri).exists():
        return {}
    with _engine_errors("read the meta table"):
        db = lancedb.connect(uri, storage_options=dict(storage_options or {}))
        try:
            meta = db.open_table("meta")
        except (ValueError, FileNotFoundError):  # lancedb's "table not found"
            return {}
        return {r["key"]: r["value"] for r in meta.to_arrow().to_pylist()}


def _mismatch(uri: str, key: str, stored: Mapping[str, str], wanted: Mapping[str, str]) -> str:
    """Say which embedder made the store and how to open or migrate it."""
    if key not in {"embedder_id", "dimensions"}:
        return (
            f"store {uri!r} was written with {key}={stored.get(key)!r}, not {wanted[key]!r}; "
            "open it with the same tiermem version or use another store"
        )
    made = stored.get("embedder_id", "")
    if made.startswith(REEMBEDDING):
        return (
            f"store {uri!r} is part-way through `tiermem reembed` to {made.removeprefix(REEMBEDDING)!r} "
            f"(interrupted?); run `tiermem reembed --store {uri}` again to finish it"
        )
    from ._embedders import embedder_name  # here: the store layer does not otherwise know embedders

    name = embedder_name(made)
    how = f"embedder={name!r}" if name else "the embedder that made it"
    return (
        f"store {uri!r} was made with the embedder {made!r} ({stored.get('dimensions')} dimensions), "
        f"not {wanted['embedder_id']!r} ({wanted['dimensions']} dimensions), and vectors of two embedders cannot "
        f"be mixed. Open it with {how} (the same embedder), migrate it once with `tiermem reembed --store {uri} "
        "--embedder NAME` (re-embeds every table and records the new embedder), or use another store"
    )
