"""The ``tiermem`` commands that read a store: users, show, search, get, history, stats, graph."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from .._errors import InvalidArgumentError
from .._items import MemoryItem
from .._read import graph_data
from .._records import MemoryContext
from .._store import TIER_TABLES
from .._write import MemorySystem
from ._graph import graph_dot, render_dot
from ._options import (
    awaited,
    data_options,
    emit,
    for_user,
    given,
    known_user,
    open_system,
    output_option,
    user_context,
)
from ._output import dumps, item_text, items_text, stats_text, store_stats_text, users_text, versions_text

__all__ = ["COMMANDS", "all_items", "get", "graph", "history", "search", "show", "stats", "users"]


_DATES = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S"]


def window_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--since`` and ``--until``: only what was said in that window (dates or times, UTC unless given)."""
    command = click.option("--until", type=click.DateTime(_DATES), help="only what was said before this (UTC)")(command)
    return click.option("--since", type=click.DateTime(_DATES), help="only what was said from this on (UTC)")(command)


def utc(value: datetime | None) -> datetime | None:
    """A date from the command line as an aware time: UTC unless it names its own offset."""
    return value if value is None or value.tzinfo is not None else value.replace(tzinfo=UTC)


def all_items(mem: MemorySystem, who: MemoryContext, limit: int | None = None, **filters: Any) -> list[MemoryItem]:
    """Pages of ``list`` until ``limit`` items (None: all of them)."""
    items: list[MemoryItem] = []
    cursor: str | None = None
    while limit is None or len(items) < limit:
        size = 1000 if limit is None else min(1000, limit - len(items))
        page = awaited(mem.list(who, limit=size, cursor=cursor, **filters))
        items, cursor = items + list(page.items), page.next_cursor
        if cursor is None:
            break
    return items


@click.command()
@click.option("--namespace", "-n", help="only this namespace")
@data_options
def users(namespace: str | None) -> None:
    """List the users the store holds memories of."""
    mem = open_system(read_only=True, namespace=namespace)
    found = [u for u in mem.tiers.users() if namespace is None or u.namespace == namespace]
    emit([{"namespace": u.namespace, "user_id": u.user_id} for u in found], users_text(found))


@click.command()
@for_user(by_id=False)
@click.option("--tier", multiple=True, type=click.Choice(list(TIER_TABLES)), help="only this tier (repeatable)")
@click.option("--subject", help="only memories about this subject ('user', a first name, an organisation)")
@click.option("--status", multiple=True, help="only this status: active, superseded, archived ... (repeatable)")
@click.option("--category", multiple=True, help="only memories with this policy label (repeatable: any of them)")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="at most this many")
@window_options
def show(
    who: MemoryContext,
    tier: tuple[str, ...],
    subject: str | None,
    status: tuple[str, ...],
    category: tuple[str, ...],
    limit: int,
    since: datetime | None,
    until: datetime | None,
) -> None:
    """List a user's memories, oldest first, with the ids the other commands take."""
    filters: dict[str, object] = {"tier": list(tier) or None, "subject": subject, "status": list(status) or None}
    filters |= {"since": utc(since), "until": utc(until), "categories": list(category) or None}
    mem = open_system(read_only=True)
    known_user(mem, who)
    items = all_items(mem, who, limit + 1, **filters)
    emit(items[:limit], items_text(items[:limit]))
    if len(items) > limit and not given("json"):
        click.echo(f"(more than {limit}: raise --limit)", err=True)


@click.command()
@for_user(by_id=False)
@click.argument("query")
@click.option("--subject", help="only memories about this subject")
@click.option("--category", multiple=True, help="only memories with this policy label (repeatable: any of them)")
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True, help="at most this many")
@window_options
def search(
    who: MemoryContext,
    query: str,
    subject: str | None,
    category: tuple[str, ...],
    limit: int,
    since: datetime | None,
    until: datetime | None,
) -> None:
    """Recall a user's memories for QUERY, best first, as the agent would.

    Time words in QUERY ("last week", "in May") rank what was said then first."""
    mem = open_system(read_only=True)
    known_user(mem, who)
    found = awaited(
        mem.recall(
            who,
            query,
            limit=limit,
            subject=subject,
            since=utc(since),
            until=utc(until),
            categories=list(category) or None,
        )
    )
    emit(found, items_text(found))


@click.command()
@for_user(by_id=True)
def get(who: MemoryContext, id: str) -> None:
    """Show one memory (or captured turn) of a user by id, in full."""
    item = awaited(open_system(read_only=True).get(who, id))
    emit(item, item_text(item))


@click.command()
@for_user(by_id=True)
def history(who: MemoryContext, id: str) -> None:
    """Show every version of a memory with its validity and the turns it came from."""
    versions = awaited(open_system(read_only=True).history(who, id))
    emit(versions, versions_text(versions))


@click.command()
@click.argument("user", required=False)
@click.option("--namespace", "-n", help="with USER: its namespace [default: default]; alone: only this namespace")
@data_options
def stats(user: str | None, namespace: str | None) -> None:
    """Count a user's memories per tier and status (every user's without USER)."""
    who = user_context(namespace or "default", user) if user is not None else None
    mem = open_system(read_only=True, namespace=namespace, who=who)
    if who is not None:
        known_user(mem, who)
        found = awaited(mem.stats(who))
        emit(found, stats_text(found))
        return
    per_user = [(u, awaited(mem.stats(u))) for u in mem.tiers.users() if namespace is None or u.namespace == namespace]
    size = mem.store.disk_bytes()
    data = [{"namespace": u.namespace, "user_id": u.user_id, **s.model_dump(mode="json")} for u, s in per_user]
    emit({"users": data, "bytes_on_disk": size}, store_stats_text(per_user, size))


@click.command()
@for_user(by_id=False)
@click.option("--format", "fmt", type=click.Choice(["dot", "svg", "png"]), help="[default: dot; json with --json]")
@output_option
@click.option("--history", "closed", is_flag=True, help="also the relations that no longer hold (dashed)")
def graph(who: MemoryContext, fmt: str | None, output: str, closed: bool) -> None:
    """Draw a user's relations graph: subjects as nodes, edges labelled with their relation.

    With --json: the nodes and the edges (id, source, relation, target, current) as JSON."""
    if given("json") and fmt is not None:
        raise InvalidArgumentError(f"--json prints the graph as JSON: leave out --format {fmt}, or --json")
    fmt = fmt or "dot"
    if fmt == "png" and output == "-" and sys.stdout.isatty():
        raise InvalidArgumentError("a PNG is binary: give -o FILE.png (or pipe it)")
    mem = open_system(read_only=True)
    known_user(mem, who)
    edges = [e for e in all_items(mem, who, tier="relation") if closed or e.metadata.get("current") is not False]
    subjects = awaited(mem.subjects(who))
    if given("json"):
        data = (dumps(graph_data(subjects, edges)) + "\n").encode()
    else:
        dot = graph_dot(f"{who.namespace}/{who.user_id}", subjects, edges)
        data = dot.encode() if fmt == "dot" else render_dot(dot, "svg" if fmt == "svg" else "png")
    if output == "-":
        click.echo(data, nl=False)
    else:
        Path(output).write_bytes(data)
        click.echo(f"wrote {len(edges)} relations to {output}", err=True)


COMMANDS = (users, show, search, get, history, stats, graph)
