"""The leases table: one row per key, claimed and released in one merge or delete each (see :mod:`._leases`).

What a lease means, and who holds which, is decided in :mod:`._leases`; this module writes its rows
so that of two processes claiming one key, exactly one wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import lancedb
import pyarrow as pa
from lancedb.table import Table as EngineTable

from .._filters import sql_literal, sql_timestamp
from .._index import EngineRow
from ._engine_errors import engine_errors
from ._maintenance import Maintenance
from ._tables import LEASES, PRIMARY_KEY, Tables

__all__ = ["LEASE_SCHEMA", "LeaseTable"]

# Leases (see _leases.py): one row per key, ``id`` so the key is the table's primary key like everywhere else.
LEASE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False, metadata=PRIMARY_KEY),
        pa.field("holder", pa.string(), nullable=False),
        pa.field("token", pa.string(), nullable=False),
        pa.field("expires_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


class LeaseTable:
    """The leases table of one store, opened (or created) on first use."""

    def __init__(self, tables: Tables, maintenance: Maintenance) -> None:
        self._tables = tables
        self._maintenance = maintenance

    def table(self) -> EngineTable:
        # Ungated: the purge fence is itself a lease.
        table = self._tables.auxiliary(LEASES, LEASE_SCHEMA, create=self._tables.create, gated=False)
        if table is None:  # read-only: no lease is held; looked for again on the next call
            return lancedb.connect("memory://").create_table(LEASES, schema=LEASE_SCHEMA)
        return table

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
        table = self.table()
        row = pa.Table.from_pylist(
            [{"id": key, "holder": holder, "token": token, "expires_at": expires_at}], schema=LEASE_SCHEMA
        )
        if renew:
            condition = f"target.token = {sql_literal(token)}"
        elif takeover is not None:  # a dead holder's lease: only while it still carries that holder's token
            condition = f"target.token = {sql_literal(takeover)}"
        else:
            condition = f"target.expires_at <= {sql_timestamp(now)} OR target.holder = {sql_literal(holder)}"

        def commit() -> int:
            with self._tables.write_lock, engine_errors("write a lease"):
                merge = table.merge_insert("id").use_index(False).when_matched_update_all(where=condition)
                result = (merge if renew else merge.when_not_matched_insert_all()).execute(row)
                return int(result.num_inserted_rows) + int(result.num_updated_rows)

        won = self._tables.retry("write a lease", commit, gated=False) == 1
        self._maintenance.after_write(LEASES, table)
        return won

    def unclaim(self, key: str, *, token: str) -> None:
        table = self.table()

        def commit() -> None:
            with self._tables.write_lock, engine_errors("release a lease"):
                table.delete(f"id = {sql_literal(key)} AND token = {sql_literal(token)}")

        self._tables.retry("release a lease", commit, gated=False)
        self._maintenance.after_write(LEASES, table)

    def claim_many(
        self, keys: Sequence[str], *, holder: str, token: str, expires_at: datetime, now: datetime
    ) -> set[str]:
        table = self.table()
        rows = pa.Table.from_pylist(
            [{"id": k, "holder": holder, "token": token, "expires_at": expires_at} for k in keys], schema=LEASE_SCHEMA
        )
        condition = f"target.expires_at <= {sql_timestamp(now)} OR target.holder = {sql_literal(holder)}"

        def commit() -> int:
            with self._tables.write_lock, engine_errors("write leases"):
                merge = table.merge_insert("id").use_index(False).when_matched_update_all(where=condition)
                result = merge.when_not_matched_insert_all().execute(rows)
                return int(result.num_inserted_rows) + int(result.num_updated_rows)

        won = self._tables.retry("write leases", commit, gated=False)
        self._maintenance.after_write(LEASES, table)
        if won >= len(set(keys)):
            return set(keys)
        # Some were held by others: ours are the rows that carry this token (read back, one key at a time).
        return {k for k in keys if (row := self.lease_row(k)) is not None and row["token"] == token}

    def unclaim_many(self, keys: Sequence[str], *, token: str) -> None:
        if not keys:
            return
        table = self.table()
        ids = ", ".join(sql_literal(k) for k in keys)

        def commit() -> None:
            with self._tables.write_lock, engine_errors("release leases"):
                table.delete(f"id IN ({ids}) AND token = {sql_literal(token)}")

        self._tables.retry("release leases", commit, gated=False)
        self._maintenance.after_write(LEASES, table)

    def lease_row(self, key: str) -> EngineRow | None:
        rows = self.lease_rows(key)
        return rows[0] if rows else None

    def lease_rows(self, key: str) -> list[EngineRow]:
        """Every row of ``key``: one, unless two inserts of it raced past the key (a check that must not miss one)."""
        with engine_errors("read a lease"):
            rows = self.table().search().where(f"id = {sql_literal(key)}").limit(None).to_list()
        return [{k: r[k] for k in LEASE_SCHEMA.names} for r in rows]
