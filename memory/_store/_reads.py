"""Reads by filter: records, counts and the distinct values of filterable columns (no search, no ranking).

Searches by vector or by words are in :mod:`._search`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from .._filters import Where, checked_column
from .._index import TableName, records_in
from .._records import StoredRecord
from ._engine_errors import engine_errors
from ._tables import Tables
from ._versions import Versions

__all__ = ["Reads"]

_RESULT_COLUMNS = ["id", "record"]


class Reads:
    """Reads of one store's tables by :class:`Where` filters."""

    def __init__(self, tables: Tables, versions: Versions) -> None:
        self._tables = tables
        self._versions = versions

    def query(
        self, name: TableName, where: Where, *, limit: int | None = None, cached: bool = False
    ) -> list[StoredRecord]:
        if cached and limit is None:
            version = self._versions.version(name)  # before the read: a commit in between makes it stale
            held = self._tables.held.get(name, where, version)
            if held is not None:
                return held
            found = self.query(name, where)
            self._tables.held.put(name, where, version, found)
            return found
        with engine_errors(f"read {name}"):
            q = self._tables.table(name).search().where(where.sql()).select(_RESULT_COLUMNS)
            rows = (q.limit(limit) if limit else q.limit(None)).to_list()
        return records_in(name, rows)

    def get(self, name: TableName, where: Where, ids: Sequence[str]) -> list[StoredRecord]:
        if not ids:
            return []
        scoped = Where(eq=where.eq, isin={**(where.isin or {}), "id": list(ids)})
        return self.query(name, scoped)

    def column_values(self, name: TableName, where: Where, column: str) -> list[str]:
        with engine_errors(f"read {name}"):
            table = self._tables.table(name)
            rows = table.search().where(where.sql()).select([checked_column(column)]).limit(None).to_arrow()
        return sorted({v for v in rows.column(column).to_pylist() if v is not None})

    def scopes(self, name: TableName, where: Where | None = None) -> list[tuple[str, str]]:
        with engine_errors(f"read {name}"):
            q = self._tables.table(name).search()
            if where is not None:
                q = q.where(where.sql())
            rows = q.select(["namespace", "user_id"]).limit(None).to_arrow()
        pairs = zip(rows.column("namespace").to_pylist(), rows.column("user_id").to_pylist(), strict=True)
        return sorted(set(pairs))

    def last_activity(self, name: TableName, where: Where | None = None) -> dict[tuple[str, str, str], datetime]:
        keys = ["namespace", "user_id", "session_id"]
        with engine_errors(f"read {name}"):
            q = self._tables.table(name).search()
            if where is not None:
                q = q.where(where.sql())
            rows = q.select([*keys, "updated_at"]).limit(None).to_arrow()
            grouped = rows.group_by(keys).aggregate([("updated_at", "max")]).to_pylist()
        return {(r["namespace"], r["user_id"], r["session_id"]): r["updated_at_max"] for r in grouped}

    def keys(self, name: TableName, where: Where) -> list[tuple[datetime, str]]:
        with engine_errors(f"read {name}"):
            table = self._tables.table(name)
            rows = table.search().where(where.sql()).select(["created_at", "id"]).limit(None).to_arrow()
        return sorted(zip(rows.column("created_at").to_pylist(), rows.column("id").to_pylist(), strict=True))

    def counts(self, name: TableName, where: Where, column: str) -> dict[str, int]:
        with engine_errors(f"count {name}"):
            table = self._tables.table(name)
            rows = table.search().where(where.sql()).select([checked_column(column)]).limit(None).to_arrow()
            grouped = rows.group_by(column).aggregate([(column, "count")]).to_pylist()
        return {str(r[column]): int(r[f"{column}_count"]) for r in grouped}

    def count(self, name: TableName, where: Where | None = None) -> int:
        with engine_errors(f"count {name}"):
            return int(self._tables.table(name).count_rows(where.sql() if where else None))
