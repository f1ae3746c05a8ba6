"""The store's reads by filter, typed per table: ``store.query("facts", ...)`` is a ``list[Fact]``.

The table name picks the record type (:data:`~.._index.SPECS`), so callers need no annotation or cast
to get it. A name known only at run time (any :data:`TableName`) reads as a sequence of
:data:`StoredRecord`, which every table's record type is one of.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

from .._filters import Where
from .._index import TableName
from .._records import Alias, Chunk, Digest, Document, Edge, Episode, Fact, StoredRecord, Turn, WorkingEntry
from ._reads import Reads

__all__ = ["TypedReads"]


class TypedReads:
    """:meth:`query` and :meth:`get` of :class:`~._store.Store`, over its :class:`Reads`."""

    _reads: Reads

    @overload
    def query(
        self, name: Literal["working"], where: Where, *, limit: int | None = None, cached: bool = False
    ) -> list[WorkingEntry]: ...
    @overload
    def query(
        self, name: Literal["episodes"], where: Where, *, limit: int | None = None, cached: bool = False
    ) -> list[Episode]: ...
    @overload
    def query(
        self, name: Literal["facts"], where: Where, *, limit: int | None = None, cached: bool = False
    ) -> list[Fact]: ...
    @overload
    def query(
        self, name: Literal["digests"], where: Where, *, limit: int | None = None, cached: bool = False
    ) -> list[Digest]: ...
    @overload
    def query(
        self, name: Literal["edges"], where: Where, *, limit: int | None = None, cached: bool = False
    ) -> list[Edge]: ...
    @overload
    def query(
        self, name: Literal["turns"], where: Where, *, limit: int | None = None, cached: bool = False
    ) -> list[Turn]: ...
    @overload
    def query(
        self, name: Literal["aliases"], where: Where, *, limit: int | None = None, cached: bool = False
    ) -> list[Alias]: ...
    @overload
    def query(
        self, name: Literal["chunks"], where: Where, *, limit: int | None = None, cached: bool = False
    ) -> list[Chunk]: ...
    @overload
    def query(
        self, name: Literal["documents"], where: Where, *, limit: int | None = None, cached: bool = False
    ) -> list[Document]: ...

    def query(
        self, name: TableName, where: Where, *, limit: int | None = None, cached: bool = False
    ) -> Sequence[StoredRecord]:
        """Records matching ``where`` (no order guaranteed).

        ``cached``: a small result (a session's rows) may be served from, and kept in, this process's
        memory, valid while the table is at the version it was read at (:mod:`.._index._read_cache`).
        """
        return self._reads.query(name, where, limit=limit, cached=cached)

    @overload
    def get(self, name: Literal["working"], where: Where, ids: Sequence[str]) -> list[WorkingEntry]: ...
    @overload
    def get(self, name: Literal["episodes"], where: Where, ids: Sequence[str]) -> list[Episode]: ...
    @overload
    def get(self, name: Literal["facts"], where: Where, ids: Sequence[str]) -> list[Fact]: ...
    @overload
    def get(self, name: Literal["digests"], where: Where, ids: Sequence[str]) -> list[Digest]: ...
    @overload
    def get(self, name: Literal["edges"], where: Where, ids: Sequence[str]) -> list[Edge]: ...
    @overload
    def get(self, name: Literal["turns"], where: Where, ids: Sequence[str]) -> list[Turn]: ...
    @overload
    def get(self, name: Literal["aliases"], where: Where, ids: Sequence[str]) -> list[Alias]: ...
    @overload
    def get(self, name: Literal["chunks"], where: Where, ids: Sequence[str]) -> list[Chunk]: ...
    @overload
    def get(self, name: Literal["documents"], where: Where, ids: Sequence[str]) -> list[Document]: ...

    def get(self, name: TableName, where: Where, ids: Sequence[str]) -> Sequence[StoredRecord]:
        """The records of ``ids`` within ``where`` (those that exist, no order guaranteed)."""
        return self._reads.get(name, where, ids)
