"""Erasure fences: work that began before a user was erased never writes that user back.

``erase_user`` first marks the user erased: a new random token in the store's ``erasures`` table, one
row per erased user, keyed by :func:`~.._identity.erasure_key` (hashed: the table names nobody). Work
runs inside :func:`fenced`, which notes every user's mark as the work begins (one read of the table,
cached per table version); every write of a user's rows checks that user's mark again, before its
commit and after it (:meth:`ErasureMarks.hold`), and a mark that moved means the user was erased
since: the write raises :class:`UserErasedError`, and one that committed meanwhile is deleted again.
That holds across processes: the erasure marks before it deletes, so a write either commits before
the delete (which removes it) or its check after the commit sees the mark.

A user erased and then written again starts fresh: work begun after the erasure noted the new mark.
Writes outside any fence (a single call of the tier API) are not checked: they begin and commit in one
blocking call.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

import pyarrow as pa
from lancedb.table import Table as EngineTable

from .._blocking import run_blocking
from .._errors import UserErasedError
from .._identity import Scope, erasure_key
from ._engine_errors import engine_errors
from ._tables import PRIMARY_KEY, Tables
from ._versions import VersionWatch

__all__ = ["ERASURES", "ErasureMarks", "fenced"]

ERASURES = "erasures"
_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False, metadata=PRIMARY_KEY),
        pa.field("token", pa.string(), nullable=False),
        pa.field("erased_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)

# The marks as the running work began; None outside any fence.
_FENCE: ContextVar[Mapping[str, str] | None] = ContextVar("tiermem_erasure_fence", default=None)


class _Scope:
    """A (namespace, user_id) pair as :func:`erasure_key` reads it."""

    def __init__(self, namespace: str, user_id: str) -> None:
        self.namespace = namespace
        self.user_id = user_id


class ErasureMarks:
    """The ``erasures`` table of one store: made by the first erasure, opened once found."""

    def __init__(self, tables: Tables) -> None:
        self._tables = tables
        self._watch = VersionWatch()
        self._seen: tuple[int, Mapping[str, str]] | None = None

    def _table(self, *, create: bool) -> EngineTable | None:
        """The table (made by the first erasure, with ``create``); None while there is none: nobody was erased."""
        return self._tables.auxiliary(ERASURES, _SCHEMA, create=create)

    def marks(self) -> Mapping[str, str]:
        """Every erasure mark, by key: read again only when the table has a new version."""
        table = self._table(create=False)
        if table is None:
            return {}
        with engine_errors("read the erasures table"):
            uri = str(table.uri)  # type: ignore[attr-defined]  # LanceTable's, not declared by the Table base
            folder = None if "://" in uri else os.path.join(uri, "_versions")
            version = self._watch.read(folder, lambda: int(table.version))
            seen = self._seen
            if seen is not None and seen[0] == version:
                return seen[1]
            rows = table.to_arrow().select(["id", "token"]).to_pylist()
        marks = {str(r["id"]): str(r["token"]) for r in rows}
        self._seen = (version, marks)
        return marks

    def mark(self, scope: Scope) -> None:
        """Mark the user erased now: work fenced before this never writes them again."""
        table = self._table(create=True)
        assert table is not None
        row = {"id": erasure_key(scope), "token": uuid.uuid4().hex, "erased_at": datetime.now(UTC)}
        data = pa.Table.from_pylist([row], schema=_SCHEMA)

        def commit() -> None:
            with self._tables.write_lock, engine_errors("mark an erasure"):
                merge = table.merge_insert("id").use_index(False).when_matched_update_all()
                merge.when_not_matched_insert_all().execute(data)

        self._tables.retry("mark an erasure", commit)

    def hold(self, scopes: Iterable[tuple[str, str]]) -> None:
        """UserErasedError if any of these (namespace, user_id) was erased since the running work's fence."""
        fence = _FENCE.get()
        if fence is None:
            return
        keys = {erasure_key(_Scope(ns, user)) for ns, user in scopes}
        current = self.marks()
        if any(current.get(k) != fence.get(k) for k in keys):
            raise UserErasedError("the user was erased after this work began: nothing more of it is written")


@asynccontextmanager
async def fenced(marks: ErasureMarks) -> AsyncIterator[None]:
    """Within the block, a write of a user erased since it began raises UserErasedError (see the module).

    Nested: the outermost fence counts, the work began there.
    """
    if _FENCE.get() is not None:
        yield
        return
    token = _FENCE.set(await run_blocking(marks.marks))
    try:
        yield
    finally:
        _FENCE.reset(token)
