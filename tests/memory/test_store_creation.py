"""Tier tables a racing create overwrote (lance#4451): every row written before it comes back, once.

Creating a table is not atomic in Lance: of processes that all found a table absent, one whose create
commits after another's create and rows commits it as an Overwrite, and the table reads as empty.
"""

from __future__ import annotations

import json
import textwrap
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lancedb  # only to commit what a racing process's late create commits
import numpy as np
import pyarrow as pa
import pytest

from tests.object_storage import S3Store
from tests.subprocesses import run_together
from tiermem.memory._records import Alias, Fact
from tiermem.memory._store import Store, Where

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SCOPE = {"namespace": "default", "user_id": "u-1"}
CREATED_BY = b"tiermem:created-by"


def _fact(fact_id: str, text: str = "A fact.") -> Fact:
    return Fact(
        id=fact_id, namespace="default", user_id="u-1", subject="user", text=text,
        created_at=NOW, updated_at=NOW, reinforced_at=NOW,
    )  # fmt: skip


def _write_facts(store: Store, ids: list[str]) -> None:
    store.upsert("facts", [_fact(i) for i in ids], np.ones((len(ids), 8), dtype=np.float32))


def _read_facts(store: Store) -> list[str]:
    return [f.id for f in store.query("facts", Where(eq=SCOPE))]


def _write_aliases(store: Store, ids: list[str]) -> None:
    store.upsert("aliases", [Alias(id=i, name=i, subject="user", created_at=NOW, **SCOPE) for i in ids])


def _read_aliases(store: Store) -> list[str]:
    return [a.id for a in store.query("aliases", Where(eq=SCOPE))]


def _write_leases(store: Store, ids: list[str]) -> None:
    for key in ids:
        assert store.claim(key, holder="h", token="t", expires_at=NOW + timedelta(days=1), now=NOW)


def _read_leases(store: Store) -> list[str]:
    return [k for k in ("r-1", "r-2", "r-3", "r-4") if store.lease_row(k) is not None]


TABLES: dict[str, tuple[Callable[[Store, list[str]], None], Callable[[Store], list[str]]]] = {
    "facts": (_write_facts, _read_facts),
    "aliases": (_write_aliases, _read_aliases),
    "leases": (_write_leases, _read_leases),
}


def _store(uri: str, options: dict[str, str] | None, **kwargs: Any) -> Store:
    return Store(uri, embedder_id="hashing-v1-8", dimensions=8, storage_options=options, **kwargs)


def _late_create(uri: str, options: dict[str, str] | None, name: str, *, stamped: bool) -> None:
    """What a process that found no ``name`` table commits when its create lands after others' rows.

    Its create, rebased by Lance onto the table that now exists, commits as an Overwrite with the
    late process's schema: the same columns, and (``stamped``) its own creation's stamp.
    """
    db = lancedb.connect(uri, storage_options=options)
    schema = db.open_table(name).schema
    key = schema.field("id")
    metadata = {k: v for k, v in (key.metadata or {}).items() if k != CREATED_BY}
    if stamped:
        metadata[CREATED_BY] = uuid.uuid4().hex.encode()
    schema = schema.set(schema.get_field_index("id"), key.with_metadata(metadata))
    db.create_table(name, schema=schema, mode="overwrite")
    assert db.open_table(name).count_rows() == 0


def _where(where: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, dict[str, str] | None]:
    if where == "s3":
        s3: S3Store = request.getfixturevalue("s3_store")
        return s3.uri, s3.storage_options
    return str(tmp_path / "store"), None


@pytest.mark.parametrize("late", ["unstamped", "stamped"], ids=["older-tiermem", "this-tiermem"])
@pytest.mark.parametrize("where", ["local", "s3"], ids=["local", "s3"])
@pytest.mark.parametrize("name", list(TABLES), ids=list(TABLES))
def test_rows_a_racing_create_overwrote_come_back(
    name: str, where: str, late: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    uri, options = _where(where, tmp_path, request)
    write, read = TABLES[name]
    first = _store(uri, options)
    write(first, ["r-1", "r-2"])
    _late_create(uri, options, name, stamped=late == "stamped")
    write(first, ["r-3"])  # the first process goes on, onto the emptied table
    late_process = _store(uri, options)  # the late creator goes on too (or any writer opens the store)
    write(late_process, ["r-4"])

    reader = _store(uri, options, create=False)
    assert sorted(read(reader)) == ["r-1", "r-2", "r-3", "r-4"]
    assert lancedb.connect(uri, storage_options=options).open_table(name).count_rows() == 4  # none doubled
