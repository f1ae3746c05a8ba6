"""Small filtered reads held in process, kept in step with the store by write-through.

The write side reads the same few scopes again and again: capture reads a session's turns before
and after journaling one, the observer reads the session's active working entries before adding
to them. Each read is a LanceDB scan of a few milliseconds, more than the write it guards. A
result is held with the table version it was read at; this process's own writes apply their rows
to the results they touch (a row joins the results whose filter it passes, and leaves those it no
longer passes), and any other commit (another process, a compaction, a delete) moves the version
on, so the next read goes to the engine again. Only results of at most ``ROWS`` rows are held, at
most ``ENTRIES`` results and ``RECORDS`` records in all (least recently used results dropped beyond):
a few tens of MB.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from .._filters import Where
from .._records import StoredRecord

__all__ = ["ENTRIES", "RECORDS", "ROWS", "ReadCache"]

ROWS = 256  # the most rows a held result may have: a session's, not a user's whole history
RECORDS = 16_384  # the most records held in all (turns of a few KB each)
ENTRIES = 1_024  # the most results held (empty ones hold no record but cost a filter each)

_Key = tuple[str, tuple[object, ...]]


def _key(name: str, where: Where) -> _Key:
    return (name, where.key())


class _Held:
    __slots__ = ("records", "scope", "version", "where")

    def __init__(self, where: Where, version: int, records: dict[str, StoredRecord]) -> None:
        self.where, self.version, self.records = where, version, records
        self.scope = (where.eq.get("namespace"), where.eq.get("user_id"))  # None: any


class ReadCache:
    """Results of filtered reads by (table, filter), each valid at one table version."""

    def __init__(self) -> None:
        self._held: OrderedDict[_Key, _Held] = OrderedDict()
        self._records = 0  # held in all (a record in two results counts twice)
        self._lock = threading.Lock()

    def get(self, name: str, where: Where, version: int) -> list[StoredRecord] | None:
        """The records ``where`` selected at ``version``, if held (in no defined order)."""
        key = _key(name, where)
        with self._lock:
            held = self._held.get(key)
            if held is None or held.version != version:
                return None
            self._held.move_to_end(key)
            return list(held.records.values())

    def put(self, name: str, where: Where, version: int, records: Sequence[StoredRecord]) -> None:
        """Hold what a read returned; ``version`` read before it, so a commit in between makes it stale."""
        if len(records) > ROWS:
            return
        with self._lock:
            key = _key(name, where)
            self._release(self._held.pop(key, None))
            self._held[key] = _Held(where, version, {r.id: r for r in records})
            self._records += len(records)
            while (self._records > RECORDS or len(self._held) > ENTRIES) and self._held:
                self._release(self._held.popitem(last=False)[1])

    def _release(self, held: _Held | None) -> None:
        if held is not None:
            self._records -= len(held.records)

    def wrote(
        self, name: str, *, before: int, after: int, rows: Sequence[tuple[Mapping[str, object], StoredRecord]]
    ) -> None:
        """After this process's one commit moved ``name`` from ``before`` to ``after``, writing ``rows``
        (each a table row and its record): results read at ``before`` take the rows and move to ``after``;
        the others were already stale and go."""
        # A write touches the results of its rows' users (and any a row's id is in): a bulk write
        # of one user is not tested against every other user's held results.
        by_scope: dict[tuple[object, object], list[tuple[Mapping[str, object], StoredRecord]]] = {}
        for row, record in rows:
            by_scope.setdefault((row.get("namespace"), row.get("user_id")), []).append((row, record))
        ids = {record.id for _, record in rows}
        with self._lock:
            for key in [k for k in self._held if k[0] == name]:
                held = self._held[key]
                if held.version != before:
                    self._release(self._held.pop(key))
                    continue
                ns, user = held.scope
                # Every row for a result of any user, or one holding a written id (it may leave under another scope).
                whole = ns is None or user is None or not ids.isdisjoint(held.records)
                touching = rows if whole else by_scope.get((ns, user), [])
                self._records -= len(held.records)
                for row, record in touching:
                    if held.where.admits(row):
                        held.records[record.id] = record
                    else:
                        held.records.pop(record.id, None)
                self._records += len(held.records)
                if len(held.records) > ROWS:
                    self._release(self._held.pop(key))
                    continue
                held.version = after

    def drop(self, name: str) -> None:
        """Forget every result of ``name`` (a write whose effect on them is unknown)."""
        with self._lock:
            for key in [k for k in self._held if k[0] == name]:
                self._release(self._held.pop(key))
