"""A LangGraph ``BaseStore`` over tiermem's semantic tier, so LangGraph agents and LangMem tools share its memory.

One item is one pinned fact of one tiermem user. The namespace tuple chooses the user (one of its labels, or
one user for the whole store); the tuple, the key and the value travel in the fact's metadata, and the fact's
text (what recall embeds and ranks, and what ``format_context`` and the ``memory_recall`` tool show) is read
from the value. Pinned, because the application owns an item's life: the janitor neither decays nor merges it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from langgraph.store.base.embed import get_text_at_path

from .._blocking import Blocking, run_blocking
from .._errors import InvalidArgumentError
from .._items import MemoryItem
from .._records import MemoryContext
from .._write import MemorySystem

__all__ = ["TiermemStore"]

SOURCE = "langgraph"
_NS, _PREFIXES, _KEY, _VALUE, _CREATED = (
    "langgraph_namespace", "langgraph_prefixes", "langgraph_key", "langgraph_value", "langgraph_created_at",
)  # fmt: skip
_PAGE = 500  # facts per list() page while scanning a namespace
_RECALL_MAX = 1000  # recall's own bound on one call


def _dotted(namespace: Sequence[str]) -> str:
    return ".".join(namespace)  # LangGraph forbids "." in a label, so the join is lossless


def _matches(value: object, wanted: object) -> bool:
    """LangGraph's filter semantics: equality (nested dicts by key), or ``{"$eq"|"$ne"|"$gt"|... : x}``."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_compare(value, str(op), operand) for op, operand in wanted.items())
        return isinstance(value, Mapping) and all(_matches(value.get(k), v) for k, v in wanted.items())
    return bool(value == wanted)


def _compare(value: object, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if op not in {"$gt", "$gte", "$lt", "$lte"}:
        raise InvalidArgumentError(f"unsupported filter operator {op!r}: use $eq, $ne, $gt, $gte, $lt or $lte")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    left, right = float(value), float(operand)
    return {"$gt": left > right, "$gte": left >= right, "$lt": left < right, "$lte": left <= right}[op]


def _leaves(value: object) -> list[str]:
    """The strings and numbers of a value, in order: its readable text."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [str(value)]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _leaves(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _leaves(v)]
    return []


def _namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p in ("*", n) for n, p in zip(part, path, strict=True))


class TiermemStore(BaseStore):
    """LangGraph's long-term memory store, kept in a tiermem :class:`MemorySystem`.

    ``user``: which label of a namespace tuple is the tiermem user id (``1`` for LangMem's
    ``("memories", "{user_id}")``), or a fixed user id for every item. ``namespace``: the tiermem
    namespace (tenant) every item lives in. ``fields``: the value's paths whose text is embedded (LangGraph's
    path syntax; ``"$"``, the default, is every string and number of the value); ``put(..., index=[...])``
    chooses per item, and ``index=False`` falls back to ``fields`` (tiermem embeds every fact).
    """

    def __init__(
        self,
        memory: MemorySystem,
        *,
        user: int | str = 0,
        namespace: str = "default",
        fields: Sequence[str] = ("$",),
    ) -> None:
        if isinstance(user, bool) or not isinstance(user, int | str) or (isinstance(user, int) and user < 0):
            raise InvalidArgumentError("user must be a label index (0, 1, ...) or a fixed user id")
        if isinstance(fields, str) or not fields:
            raise InvalidArgumentError('fields must be a non-empty list of value paths, like ["$"] or ["content"]')
        self.memory = memory
        self.user = user
        self.namespace = MemoryContext(namespace=namespace, user_id="-").namespace  # checked as tiermem checks it
        self.fields = tuple(fields)

    # -- the two methods LangGraph asks for; everything else in BaseStore is built on them --------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The ops in order, run on tiermem's blocking loop (SyncInEventLoopError inside a running loop)."""
        result: list[Result] = Blocking(self).abatch(list(ops))
        return result

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                results.append(await self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                await self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(op))
            else:
                raise InvalidArgumentError(f"unknown store operation {type(op).__name__}")
        return results

    # -- scope ------------------------------------------------------------------------------

    def _context(self, namespace: tuple[str, ...]) -> MemoryContext:
        if isinstance(self.user, str):
            return MemoryContext(namespace=self.namespace, user_id=self.user)
        if len(namespace) <= self.user:
            raise InvalidArgumentError(
                f"namespace {namespace!r} has no label {self.user} to name the tiermem user "
                f"(this store reads the user from label {self.user})"
            )
        return MemoryContext(namespace=self.namespace, user_id=namespace[self.user])

    async def _contexts(self, prefix: tuple[str, ...]) -> list[MemoryContext]:
        """The users a search or listing under ``prefix`` reads: one when the prefix names it, else all."""
        if isinstance(self.user, str) or (len(prefix) > self.user and prefix[self.user] != "*"):
            return [self._context(prefix)]
        users = await run_blocking(self.memory.tiers.users)
        return [u for u in users if u.namespace == self.namespace]

    # -- items ------------------------------------------------------------------------------

    async def _facts(self, ctx: MemoryContext, where: Mapping[str, object]) -> list[MemoryItem]:
        found: list[MemoryItem] = []
        cursor: str | None = None
        while True:
            page = await self.memory.list(
                ctx, tier="semantic", status="active", where=dict(where), limit=_PAGE, cursor=cursor
            )
            found += [i for i in page.items if i.metadata.get("source") == SOURCE]
            cursor = page.next_cursor
            if cursor is None:
                return found

    async def _find(self, namespace: tuple[str, ...], key: str) -> MemoryItem | None:
        found = await self._facts(self._context(namespace), {_NS: _dotted(namespace), _KEY: key})
        return found[-1] if found else None

    @staticmethod
    def _item(fact: MemoryItem, score: float | None = None) -> SearchItem:
        """A fact as LangGraph's item (a SearchItem is one, with a score)."""
        meta = fact.metadata
        namespace = tuple(str(meta[_NS]).split("."))
        created = datetime.fromisoformat(str(meta[_CREATED]))
        return SearchItem(namespace, str(meta[_KEY]), dict(meta[_VALUE]), created, fact.updated_at, score)

    async def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        fact = await self._find(namespace, key)
        if fact is None:
            return None
        item = self._item(fact)
        return Item(
            value=item.value, key=item.key, namespace=item.namespace, created_at=item.created_at,
            updated_at=item.updated_at,
        )  # fmt: skip

    def _text(self, value: Mapping[str, Any], index: Sequence[str] | None) -> str:
        parts: list[str] = []
        for path in index or self.fields:
            parts += _leaves(value) if path == "$" else get_text_at_path(dict(value), path)
        text = "\n".join(p for p in parts if p.strip())
        return text or json.dumps(value, sort_keys=True, ensure_ascii=False)

    async def _put(self, op: PutOp) -> None:
        ctx = self._context(op.namespace)
        old = await self._find(op.namespace, op.key)
        if op.value is None:
            if old is not None:
                await self.memory.forget(ctx, old.id)
            return
        if not isinstance(op.value, Mapping):
            raise InvalidArgumentError(f"a store value must be a dict, not {type(op.value).__name__}")
        if op.ttl is not None:
            raise InvalidArgumentError("this store keeps no TTL: items live until deleted (or erase_user)")
        try:
            value = json.loads(json.dumps(op.value))  # JSON's types only, as every LangGraph store keeps
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"a store value must be JSON (dicts, lists, strings, numbers): {exc}") from exc
        index = op.index if isinstance(op.index, list) else None
        namespace = tuple(op.namespace)
        meta: dict[str, object] = {
            "source": SOURCE,
            _NS: _dotted(namespace),
            _PREFIXES: [_dotted(namespace[:n]) for n in range(1, len(namespace) + 1)],
            _KEY: op.key,
            _VALUE: value,
        }
        created = old.metadata.get(_CREATED) if old is not None else None
        meta[_CREATED] = created or self.memory.clock.now().isoformat()  # kept across puts, as LangGraph's
        text = self._text(op.value, index)
        fact = await self.memory.remember(ctx, text, metadata=meta)
        if fact.metadata.get(_NS) != meta[_NS] or fact.metadata.get(_KEY) != op.key:
            raise InvalidArgumentError(
                f"the same text is already stored as the item {fact.metadata.get(_KEY)!r} in "
                f"{fact.metadata.get(_NS)!r} of user {ctx.user_id!r}; tiermem keeps one fact per text of a user"
            )
        if old is not None and old.id == fact.id:  # the same text: remember reinforced it, keeping its metadata
            await self.memory.forget(ctx, old.id)
            fact = await self.memory.remember(ctx, text, metadata=meta)
        elif old is not None:
            await self.memory.forget(ctx, old.id)
        await self.memory.pin(ctx, fact.id)

    # -- search and namespaces ----------------------------------------------------------------

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        where: dict[str, object] = {"source": SOURCE}
        if prefix:
            where[_PREFIXES] = {"contains": _dotted(prefix)}
        wanted = op.offset + op.limit
        scored: list[tuple[float | None, MemoryItem]] = []
        for ctx in await self._contexts(prefix):
            if op.query:
                asked = _RECALL_MAX if op.filter else min(_RECALL_MAX, max(wanted, 1))
                found = await self.memory.recall(ctx, op.query, limit=asked, tiers=["semantic"], where=where)
                scored += [(i.score, i) for i in found if not i.metadata.get("superseded")]
            else:
                scored += [(None, i) for i in await self._facts(ctx, where)]
        if op.filter:
            scored = [(s, i) for s, i in scored if _matches(i.metadata.get(_VALUE), op.filter)]
        if op.query:
            scored.sort(key=lambda pair: -(pair[0] or 0.0))
        else:  # newest first, as LangGraph's Postgres store lists
            scored.sort(key=lambda pair: pair[1].updated_at, reverse=True)
        return [self._item(i, s) for s, i in scored[op.offset : wanted]]

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        prefix: tuple[str, ...] = ()
        for c in conditions:
            if c.match_type == "prefix":
                prefix = tuple(c.path)
        names: set[tuple[str, ...]] = set()
        for ctx in await self._contexts(prefix):
            for fact in await self._facts(ctx, {"source": SOURCE}):
                names.add(tuple(str(fact.metadata[_NS]).split(".")))
        found = sorted(n for n in names if all(_namespace_matches(n, c) for c in conditions))
        if op.max_depth is not None:
            found = sorted({n[: op.max_depth] for n in found})
        return found[op.offset : op.offset + op.limit]
