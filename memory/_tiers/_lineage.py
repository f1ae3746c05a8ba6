"""Lineage: what each memory derives from. Recall reads it for two things.

**Currency.** A fact replaced by a newer version is *superseded*; a captured turn is *stale* when
every fact citing it (through provenance) is superseded and at least one is: all that was learnt
from it has been replaced. A turn cited by any other fact (active or archived) stays current, and
so does a turn no fact cites. An episode (or working entry) is past when every turn it covers is.
Recall keeps what is past (it answers "where did I work before?") but marks it and ranks it below
what replaced it (:func:`.._recall._ranking.rank`).

**Metadata filters.** ``where=`` filters on the metadata captured with a turn (``capture(...,
metadata={...})``). A memory matches when the filter holds on its own metadata or on the metadata of one
captured turn it derives from: a turn itself; a working entry, episode or fact through the turns in its
provenance (any of them: "learnt at least in part from a matching turn"); an edge through its provenance
and the facts it was derived from. The whole filter must hold on one source's metadata (keys of two
turns never combine). The digest, a rollup of every fact, matches only on its own metadata, as does a
document's passage (the metadata given to ``ingest``). Values are compared in Python on the parsed
records, never put into SQL; only our own ids reach a query, through :func:`.._filters.sql_literal`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

from .._errors import InvalidArgumentError
from .._filters import MAX_FILTER_VALUE, Where
from .._records import Chunk, Digest, Document, Edge, Episode, Fact, MemoryContext, Turn, WorkingEntry
from .._store import Store, TableName
from .._when import TimeWindow, dated_span

__all__ = ["OPERATORS", "Lineage", "MetadataFilter", "Past", "checked_where"]

Scalar: TypeAlias = str | int | float | bool | None
OPERATORS = ("eq", "in", "contains")
_MAX_KEYS = 32
_MAX_CHOICES = 1000
_CACHED = 64  # lineage indexes (a user's turns, facts, ...) kept, the most recently read
_CACHED_FILTERS = 256  # filters' matches, until a table they read changes
_UNSET = object()
_LABELLED = ("working", "facts")  # the tables whose records carry the policy's labels


@dataclass(frozen=True, kw_only=True)
class Past:
    """Why a memory no longer holds: what replaced it and when it ended."""

    superseded_by: str | None  # the version that replaced it (for a turn: the replacement of its last-ended fact)
    replaced_by: tuple[str, ...]  # the active facts that hold instead (the ends of the supersession chains)
    valid_to: datetime | None


@dataclass(frozen=True, kw_only=True)
class _Condition:
    key: str
    op: str
    values: tuple[Scalar, ...]


def _same(a: object, b: Scalar) -> bool:
    """Equality without Python's coercions: True is not 1, 1 is not "1" (1 and 1.0 are equal)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _scalar(value: object, what: str) -> Scalar:
    if value is None or isinstance(value, bool | int | float):
        return value  # type: ignore[return-value]
    if isinstance(value, str):
        if len(value) > MAX_FILTER_VALUE or "\x00" in value:
            raise InvalidArgumentError(f"{what}: a string of at most {MAX_FILTER_VALUE} characters without NUL")
        return value
    raise InvalidArgumentError(f"{what} must be a string, number, bool or None, not {type(value).__name__}")


@dataclass(frozen=True, kw_only=True)
class MetadataFilter:
    """A checked ``where=``: every condition must hold on one metadata dict."""

    conditions: tuple[_Condition, ...]

    def matches(self, metadata: Mapping[str, object]) -> bool:
        for c in self.conditions:
            value = metadata.get(c.key, _UNSET)
            if value is _UNSET:
                return False
            if c.op == "contains":
                if not isinstance(value, list | tuple) or not any(_same(v, c.values[0]) for v in value):
                    return False
            elif not any(_same(value, choice) for choice in c.values):  # eq: one choice; in: several
                return False
        return True


def checked_where(where: object) -> MetadataFilter | None:
    """``{"channel": "email", "labels": {"contains": "urgent"}, "source": {"in": ["a", "b"]}}`` checked.

    A bare value means ``{"eq": value}``; operators are ``eq`` (equal), ``in`` (equal to one of a
    list) and ``contains`` (a list-valued field holds the value). Anything else, or a bare list
    (ambiguous: use ``in`` or ``contains``), raises :class:`InvalidArgumentError`.
    """
    if where is None:
        return None
    if not isinstance(where, Mapping) or not where:
        raise InvalidArgumentError("where must be a non-empty dict of metadata key -> value or {operator: value}")
    if len(where) > _MAX_KEYS:
        raise InvalidArgumentError(f"where has more than {_MAX_KEYS} keys")
    conditions: list[_Condition] = []
    for key, test in where.items():
        if not isinstance(key, str) or not key or len(key) > 256:
            raise InvalidArgumentError("where keys must be non-empty strings of at most 256 characters")
        if isinstance(test, list | tuple | set):
            raise InvalidArgumentError(
                f"where[{key!r}] is a list: say {{'in': [...]}} (one of) or {{'contains': value}} (a list holding it)"
            )
        ops = test if isinstance(test, Mapping) else {"eq": test}
        if not ops:
            raise InvalidArgumentError(f"where[{key!r}] has no operator; use one of {list(OPERATORS)}")
        for op, operand in ops.items():
            if op not in OPERATORS:
                raise InvalidArgumentError(f"unknown operator {op!r} in where[{key!r}]; use one of {list(OPERATORS)}")
            if op == "in":
                if not isinstance(operand, list | tuple) or not 1 <= len(operand) <= _MAX_CHOICES:
                    raise InvalidArgumentError(f"where[{key!r}]['in'] must be a list of 1 to {_MAX_CHOICES} values")
                values = tuple(_scalar(v, f"where[{key!r}]['in']") for v in operand)
            else:
                values = (_scalar(operand, f"where[{key!r}][{op!r}]"),)
            conditions.append(_Condition(key=key, op=op, values=values))
    return MetadataFilter(conditions=tuple(conditions))


@dataclass(frozen=True, kw_only=True)
class _Row:
    metadata: Mapping[str, object]
    sources: tuple[str, ...]  # provenance, plus an edge's supporting facts
    said: tuple[datetime, datetime]  # when it was said (see .._when.dated_span)
    categories: tuple[str, ...] = ()  # the policy's labels (working entries and facts only)


@dataclass(frozen=True, kw_only=True)
class _Facts:
    facts: dict[str, Fact]
    stale_turns: dict[str, Past]


class Lineage:
    """Per-user lineage read from the store, cached until the table it came from changes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: OrderedDict[tuple[str, str, str, str], tuple[int, Any]] = OrderedDict()
        self._matches: OrderedDict[tuple[object, ...], dict[str, frozenset[str]]] = OrderedDict()
        self._lock = threading.Lock()

    def _cached(self, table: TableName, ctx: MemoryContext, load: Callable[[Sequence[Any]], Any]) -> Any:
        key = (table, load.__name__, ctx.namespace, ctx.user_id)
        version = self.store.version(table)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == version:
                self._cache.move_to_end(key)
                return hit[1]
        value = load(self.store.query(table, Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})))
        with self._lock:
            self._cache[key] = (version, value)
            self._cache.move_to_end(key)
            while len(self._cache) > _CACHED:
                self._cache.popitem(last=False)
        return value

    def unfinished_documents(self, ctx: MemoryContext) -> frozenset[str]:
        """Ids of ``ctx``'s documents still being ingested (or whose ingestion stopped): their passages wait."""
        return self._cached("documents", ctx, _pending_ids)  # type: ignore[no-any-return]

    # -- currency ---------------------------------------------------------------------------

    def _facts(self, ctx: MemoryContext) -> _Facts:
        return self._cached("facts", ctx, _index_facts)  # type: ignore[no-any-return]

    def facts(self, ctx: MemoryContext) -> Mapping[str, Fact]:
        """The user's facts of every status by id, at the table's version (parsed once per version)."""
        return self._facts(ctx).facts

    def past(self, ctx: MemoryContext, memories: Iterable[tuple[str, Sequence[str]]]) -> dict[str, Past]:
        """Which of ``memories`` (id, provenance) no longer hold, and what replaced them.

        A superseded fact; a stale turn; a memory derived from turns alone (an episode, a working entry)
        when every turn it covers is stale.
        """
        index = self._facts(ctx)
        out: dict[str, Past] = {}
        for rid, provenance in memories:
            fact = index.facts.get(rid)
            if fact is not None:
                if fact.status == "superseded":
                    out[rid] = Past(
                        superseded_by=fact.superseded_by,
                        replaced_by=_current(fact, index.facts),
                        valid_to=fact.valid_to,
                    )
            elif rid in index.stale_turns:
                out[rid] = index.stale_turns[rid]
            elif provenance and all(p in index.stale_turns for p in provenance):
                out[rid] = _latest([index.stale_turns[p] for p in provenance])
        return out

    # -- metadata filters ---------------------------------------------------------------------

    def _rows(self, table: TableName, ctx: MemoryContext) -> dict[str, _Row]:
        if table == "turns":
            return self._turn_rows(ctx)
        return self._cached(table, ctx, _index_rows)  # type: ignore[no-any-return]

    def _turn_rows(self, ctx: MemoryContext) -> dict[str, _Row]:
        """The turns' metadata, brought up to date by reading only the turns captured since.

        A turn's captured metadata never changes after capture, so after a write to the table only
        the ids need reading (no record parsed) and the new turns parsed, not the whole log again.
        """
        key = ("turns", "_turn_rows", ctx.namespace, ctx.user_id)
        version = self.store.version("turns")
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]  # type: ignore[no-any-return]
        where = Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})
        if hit is None:
            rows = _index_rows(self.store.query("turns", where))
        else:
            ids = {rid for _, rid in self.store.keys("turns", where)}
            rows = {rid: row for rid, row in hit[1].items() if rid in ids}
            rows |= _index_rows(self.store.get("turns", where, sorted(ids - rows.keys())))
        with self._lock:
            self._cache[key] = (version, rows)
            self._cache.move_to_end(key)
            while len(self._cache) > _CACHED:
                self._cache.popitem(last=False)
        return rows

    def matching(
        self, ctx: MemoryContext, where: MetadataFilter, tables: Sequence[TableName]
    ) -> dict[str, frozenset[str]]:
        """Per table, the ids of ``ctx``'s records that match ``where`` (see the module docstring).

        Cached per filter until one of the tables read changes: an agent filters by the same few values.
        """
        extra: list[TableName] = ["turns", "facts"] if "edges" in tables else ["turns"]
        read = sorted({*tables, *extra})
        key = (ctx.namespace, ctx.user_id, where, tuple(read), tuple(self.store.version(t) for t in read))
        with self._lock:
            hit = self._matches.get(key)
            if hit is not None:
                self._matches.move_to_end(key)
                return hit
        found = {table: frozenset(ids) for table, ids in self._match(ctx, where, tables).items()}
        with self._lock:
            self._matches[key] = found
            while len(self._matches) > _CACHED_FILTERS:
                self._matches.popitem(last=False)
        return found

    def allowed(
        self,
        ctx: MemoryContext,
        where: MetadataFilter | None,
        window: TimeWindow | None,
        tables: Sequence[TableName],
        categories: frozenset[str] | None = None,
    ) -> dict[str, frozenset[str]] | None:
        """Per table, the ids of ``ctx``'s records every filter given allows; None when there is no filter."""
        chosen = [
            self.matching(ctx, where, tables) if where is not None else None,
            self.dated(ctx, window, tables) if window is not None else None,
            self.labelled(ctx, categories, tables) if categories is not None else None,
        ]
        out: dict[str, frozenset[str]] | None = None
        for found in (f for f in chosen if f is not None):
            out = found if out is None else {t: ids & found.get(t, frozenset()) for t, ids in out.items()}
        return out

    def labelled(
        self, ctx: MemoryContext, categories: frozenset[str], tables: Sequence[TableName]
    ) -> dict[str, frozenset[str]]:
        """Per table, the ids of ``ctx``'s records with one of ``categories`` (only entries and facts have labels).

        Compared in Python on the parsed records: a label never reaches a query."""
        return {
            table: frozenset(
                rid for rid, row in self._rows(table, ctx).items() if not categories.isdisjoint(row.categories)
            )
            if table in _LABELLED
            else frozenset()
            for table in tables
        }

    def dated(self, ctx: MemoryContext, window: TimeWindow, tables: Sequence[TableName]) -> dict[str, frozenset[str]]:
        """Per table, the ids of ``ctx``'s records said within ``window``; the digest (said at no one time) never."""
        return {
            table: frozenset(
                rid for rid, row in self._rows(table, ctx).items() if table != "digests" and window.overlaps(*row.said)
            )
            for table in tables
        }

    def _match(self, ctx: MemoryContext, where: MetadataFilter, tables: Sequence[TableName]) -> dict[str, set[str]]:
        turns = {rid for rid, row in self._rows("turns", ctx).items() if where.matches(row.metadata)}
        out: dict[str, set[str]] = {"turns": turns} if "turns" in tables else {}
        facts: set[str] | None = None
        for table in tables:
            if table == "turns":
                continue
            if table == "edges" and facts is None:
                facts = self._derived(self._rows("facts", ctx), where, turns, set())
            rows = self._rows(table, ctx)
            if table in ("digests", "chunks"):
                out[table] = {rid for rid, row in rows.items() if where.matches(row.metadata)}
            else:
                out[table] = self._derived(rows, where, turns, facts or set())
        return out

    @staticmethod
    def _derived(rows: Mapping[str, _Row], where: MetadataFilter, turns: set[str], facts: set[str]) -> set[str]:
        return {
            rid
            for rid, row in rows.items()
            if where.matches(row.metadata) or any(s in turns or s in facts for s in row.sources)
        }


def _index_rows(records: Sequence[Turn | Episode | Fact | Edge | Digest | WorkingEntry | Chunk]) -> dict[str, _Row]:
    return {
        r.id: _Row(
            metadata=r.metadata,
            sources=(*getattr(r, "provenance", ()), *getattr(r, "support", ())),
            said=dated_span(r),
            categories=r.categories if isinstance(r, WorkingEntry | Fact) else (),
        )
        for r in records
    }


def _pending_ids(records: Sequence[Document]) -> frozenset[str]:
    return frozenset(d.id for d in records if d.status != "complete")


def _current(fact: Fact, facts: Mapping[str, Fact]) -> tuple[str, ...]:
    """The active end of ``fact``'s supersession chain, if it has one."""
    seen = {fact.id}
    while fact.superseded_by is not None and fact.superseded_by in facts and fact.superseded_by not in seen:
        fact = facts[fact.superseded_by]
        seen.add(fact.id)
    return (fact.id,) if fact.status == "active" and len(seen) > 1 else ()


def _index_facts(records: Sequence[Fact]) -> _Facts:
    facts = {f.id: f for f in records}
    citing: dict[str, list[Fact]] = {}
    for f in records:
        for source in f.provenance:
            if source not in facts:  # a turn (a correction also names the fact it corrects)
                citing.setdefault(source, []).append(f)
    stale: dict[str, Past] = {}
    for turn, cited_by in citing.items():
        if not all(f.status == "superseded" for f in cited_by):
            continue
        ended = [
            Past(superseded_by=f.superseded_by, replaced_by=_current(f, facts), valid_to=f.valid_to) for f in cited_by
        ]
        stale[turn] = _latest(ended)
    return _Facts(facts=facts, stale_turns=stale)


def _latest(ended: Sequence[Past]) -> Past:
    """Several endings as one: the last one's successor and time, every current replacement."""
    last = max(ended, key=lambda p: (p.valid_to is not None, p.valid_to or datetime.min, p.superseded_by or ""))
    replaced = tuple(dict.fromkeys(r for p in ended for r in p.replaced_by))
    return Past(superseded_by=last.superseded_by, replaced_by=replaced, valid_to=last.valid_to)
