"""What every ``tiermem`` data command shares: the global options, also given after the command name
(kept in the click context), USER / ID and ``--namespace``, the store they name, output as text or JSON.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from .._errors import MemoryNotFoundError, StoreNotFoundError
from .._policy import MemoryPolicy
from .._records import MemoryContext
from .._store import USER_TABLES, stored_meta
from .._write import MemorySystem, system
from ._output import dumps
from ._policy_file import chosen_policy, policy_options, policy_summary

__all__ = [
    "awaited",
    "chosen_policy",
    "data_options",
    "emit",
    "for_user",
    "given",
    "keep",
    "known_user",
    "namespace_option",
    "open_system",
    "output_option",
    "policy_options",
    "say_using",
    "user_context",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def keep(name: str) -> Callable[[click.Context, click.Parameter, object], None]:
    """An option's callback that keeps its value in the click context, for :func:`given`."""

    def kept(ctx: click.Context, param: click.Parameter, value: object) -> None:
        if value not in (None, False):
            ctx.meta[f"tiermem.{name}"] = value  # after the command name wins: parsed later

    return kept


def data_options(f: F) -> F:
    """``--store``, ``--embedder``, ``--json`` after the command name too, over the global ones."""
    for flag in ("--embedder", "--store"):
        f = click.option(flag, expose_value=False, callback=keep(flag[2:]), help="as the global one")(f)
    return click.option("--json", is_flag=True, expose_value=False, callback=keep("json"), help="print JSON")(f)


namespace_option = click.option(
    "--namespace", "-n", default="default", envvar="TIERMEM_NAMESPACE", show_default=True, help="application or tenant"
)
output_option = click.option(
    "-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-", help="[default: stdout]"
)


def user_context(namespace: str, user: str) -> MemoryContext:
    """USER in ``namespace``; a bad one is a usage error."""
    try:
        return MemoryContext(namespace=namespace, user_id=user)
    except ValidationError as exc:
        raise click.BadParameter(str(exc.errors()[0]["msg"]), param_hint="USER or --namespace") from None


def for_user(by_id: bool) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """USER (or ID and ``--user``), ``--namespace`` and the data options; the command gets ``who``."""

    def wrap(f: Callable[..., None]) -> Callable[..., None]:
        own: list[click.Parameter] = [p for p in getattr(f, "__click_params__", []) if isinstance(p, click.Option)]

        @functools.wraps(f)  # carries the options declared below this decorator
        def command(user: str, namespace: str, **kwargs: Any) -> None:
            who = user_context(namespace, user)
            click.get_current_context().meta["tiermem.who"] = who  # for the line open_system says
            f(who=who, **kwargs)

        named = namespace_option(data_options(command))
        if by_id:
            named = click.argument("id")(click.option("--user", "-u", required=True, help="whose memory")(named))
        else:
            named = click.argument("user")(named)
        params: list[click.Parameter] = getattr(named, "__click_params__", [])
        first = own + [p for p in params if isinstance(p, click.Option) and p.name == "user"]
        params[:] = [p for p in params if p not in first] + first  # --help lists --user, then the command's own
        return named

    return wrap


def given(name: str) -> Any:
    """A global option, or the same option given after the command name."""
    return click.get_current_context().meta.get(f"tiermem.{name}")


def say_using(
    store: str,
    *,
    model: str | None,
    namespace: str | None = None,
    user: str | None = None,
    policy: MemoryPolicy | None = None,
) -> None:
    """One line on stderr (stdout may be JSON or an export): the store, namespace and model a command uses,
    and the memory policy its writes obey when it was given one."""
    where = f"namespace {namespace}" if namespace else "every namespace"
    where += f", user {user}" if user else ""
    obeys = f"; policy {policy_summary(policy)}" if policy is not None else ""
    click.echo(f"tiermem: using store {store}; {where}; model {model or 'none (reads only)'}{obeys}", err=True)


def open_system(
    *,
    create: bool = False,
    read_only: bool = False,
    model: str | None = "rules",
    namespace: str | None = None,
    who: MemoryContext | None = None,
) -> MemorySystem:
    """The store of ``--store`` / ``$TIERMEM_STORE``; StoreNotFoundError unless it exists or ``create``.

    ``read_only``: for commands that only read: nothing is created or recorded (a table the store lacks reads
    as empty), so they work on a store they may not write to. Says on stderr what it opened (:func:`say_using`),
    with the command's user and namespace (``who``, else the USER argument; ``namespace`` without a user).
    A command with :func:`policy_options` writes under the policy they say (checked before the store opens)."""
    policy = chosen_policy()
    store = given("store") or str(Path.home() / ".tiermem" / "store")
    if not create and not stored_meta(store):
        raise StoreNotFoundError(f"no tiermem store at {store!r}; give --store PATH or set TIERMEM_STORE")
    mem = system(
        model=model,
        store=store,
        embedder=given("embedder"),
        embedder_dimensions=given("embedder_dimensions"),
        create=not read_only,
        policy=policy,
    )
    who = who or given("who")
    say_using(
        store,
        model=None if read_only else mem.model_name,
        namespace=who.namespace if who else namespace,
        user=who.user_id if who else None,
        policy=policy,
    )
    return mem


def known_user(mem: MemorySystem, who: MemoryContext) -> None:
    """MemoryNotFoundError unless the store holds something of ``who``, naming where that user id is held
    (another namespace: the demo writes into ``demo``) or which namespaces there are."""
    held = {pair for table in USER_TABLES for pair in mem.store.scopes(table)}
    if (who.namespace, who.user_id) in held:
        return
    elsewhere = sorted(ns for ns, user in held if user == who.user_id)
    if elsewhere:
        hint = "the store holds this user in namespace " + ", ".join(repr(ns) for ns in elsewhere)
        hint += f": give --namespace {elsewhere[0]}"
    else:
        namespaces = sorted({ns for ns, _ in held})
        hint = f"namespaces in the store: {', '.join(map(repr, namespaces))}" if namespaces else "the store is empty"
        hint += " (`tiermem users` lists every user)"
    raise MemoryNotFoundError(f"no user {who.user_id!r} in namespace {who.namespace!r}; {hint}")


def awaited(coro: Coroutine[object, None, T]) -> T:
    """What ``coro`` returns, run to its end from a command (which is not async)."""
    return asyncio.run(coro)


def emit(data: object, text: str) -> None:
    """Print ``data`` as JSON with ``--json``, else ``text``."""
    click.echo(dumps(data) if given("json") else text)
