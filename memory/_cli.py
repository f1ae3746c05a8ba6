"""The ``tiermem`` command, on click: inspect and govern a store, and run the demo, the worker, the MCP server.

Every data command goes through the public API (``system(...)`` and its methods) and prints plain
text, or JSON with ``--json``. A ``TiermemError`` (a missing store, an unknown id, a bad argument)
becomes one line on stderr, ``tiermem: error: ...``, and exit code 1; a usage error is click's, code 2.
The only module that imports click; what the commands print is rendered in ``_cli_output``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from datetime import timedelta
from pathlib import Path
from typing import IO, Any, TypeVar

import click
from pydantic import ValidationError

from ._cli_graph import graph_dot, render_dot
from ._cli_output import (
    counts_text,
    dumps,
    forget_text,
    history_text,
    item_text,
    items_text,
    stats_text,
    store_stats_text,
    users_text,
    versions_text,
)
from ._cli_reembed import reembed_store
from ._errors import ConfigurationError, InvalidArgumentError, StoreNotFoundError, TiermemError
from ._history import MAX_OBSERVE_WINDOW, OBSERVE_WINDOW, HistoryProgress
from ._records import MemoryContext, MemoryItem
from ._store import stored_meta
from ._system import MemorySystem, system
from ._user_tables import TIER_TABLES

__all__ = ["cli", "main"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _keep(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def keep(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value not in (None, False):
            ctx.meta[f"tiermem.{name}"] = value  # after the command name wins: parsed later

    return keep


_DIMS = "dimensions of a litellm embedding model"
_STORE = "LanceDB folder or URI [default: $TIERMEM_STORE, else ~/.tiermem/store]"


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order they are declared: read, change, move, run

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise
        except (TiermemError, OSError) as exc:  # OSError: a file given to -o that cannot be written ...
            click.echo(f"tiermem: error: {_one_line(exc)}", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tiermem", prog_name="tiermem", message="%(prog)s %(version)s")
@click.option("--store", envvar="TIERMEM_STORE", expose_value=False, callback=_keep("store"), help=_STORE)
@click.option("--embedder", expose_value=False, callback=_keep("embedder"), help="the embedder the store was made with")
@click.option("--embedder-dimensions", type=int, expose_value=False, callback=_keep("embedder_dimensions"), help=_DIMS)
@click.option("--json", is_flag=True, expose_value=False, callback=_keep("json"), help="print JSON, for scripts")
def cli() -> None:
    """Tiered memory for LLM agents: see and govern what a store remembers about each user."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)


# -- shared options and helpers -------------------------------------------------------------


def _data_options(f: F) -> F:
    """``--store``, ``--embedder``, ``--json`` after the command name too, over the global ones."""
    for flag in ("--embedder", "--store"):
        f = click.option(flag, expose_value=False, callback=_keep(flag[2:]), help="as the global one")(f)
    return click.option("--json", is_flag=True, expose_value=False, callback=_keep("json"), help="print JSON")(f)


_namespace = click.option(
    "--namespace", "-n", default="default", envvar="TIERMEM_NAMESPACE", show_default=True, help="application or tenant"
)
_output = click.option(
    "-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-", help="[default: stdout]"
)


def _who(namespace: str, user: str) -> MemoryContext:
    try:
        return MemoryContext(namespace=namespace, user_id=user)
    except ValidationError as exc:
        raise click.BadParameter(str(exc.errors()[0]["msg"]), param_hint="USER or --namespace") from None


def _for_user(by_id: bool) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """USER (or ID and ``--user``), ``--namespace`` and the data options; the command gets ``who``."""

    def wrap(f: Callable[..., None]) -> Callable[..., None]:
        own: list[click.Parameter] = [p for p in getattr(f, "__click_params__", []) if isinstance(p, click.Option)]

        @functools.wraps(f)  # carries the options declared below this decorator
        def command(user: str, namespace: str, **kwargs: Any) -> None:
            f(who=_who(namespace, user), **kwargs)

        named = _namespace(_data_options(command))
        if by_id:
            named = click.argument("id")(click.option("--user", "-u", required=True, help="whose memory")(named))
        else:
            named = click.argument("user")(named)
        params: list[click.Parameter] = getattr(named, "__click_params__", [])
        first = own + [p for p in params if isinstance(p, click.Option) and p.name == "user"]
        params[:] = [p for p in params if p not in first] + first  # --help lists --user, then the command's own
        return named

    return wrap


def _option(name: str) -> Any:
    """A global option, or the same option given after the command name."""
    return click.get_current_context().meta.get(f"tiermem.{name}")


def _open(*, create: bool = False, model: str | None = "rules") -> MemorySystem:
    """The store of ``--store`` / ``$TIERMEM_STORE``; StoreNotFoundError unless it exists or ``create``."""
    store = _option("store") or str(Path.home() / ".tiermem" / "store")
    if not create and not stored_meta(store):
        raise StoreNotFoundError(f"no tiermem store at {store!r}; give --store PATH or set TIERMEM_STORE")
    return system(
        model=model, store=store, embedder=_option("embedder"), embedder_dimensions=_option("embedder_dimensions")
    )


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def _emit(data: Any, text: str) -> None:
    click.echo(dumps(data) if _option("json") else text)


def _all_items(mem: MemorySystem, who: MemoryContext, limit: int | None = None, **filters: Any) -> list[MemoryItem]:
    """Pages of ``list`` until ``limit`` items (None: all of them)."""
    items: list[MemoryItem] = []
    cursor: str | None = None
    while limit is None or len(items) < limit:
        size = 1000 if limit is None else min(1000, limit - len(items))
        page = _run(mem.list(who, limit=size, cursor=cursor, **filters))
        items, cursor = items + list(page.items), page.next_cursor
        if cursor is None:
            break
    return items


# -- read -----------------------------------------------------------------------------------


@cli.command()
@click.option("--namespace", "-n", help="only this namespace")
@_data_options
def users(namespace: str | None) -> None:
    """List the users the store holds memories of."""
    found = [u for u in _open().tiers.users() if namespace is None or u.namespace == namespace]
    _emit([{"namespace": u.namespace, "user_id": u.user_id} for u in found], users_text(found))


@cli.command()
@_for_user(by_id=False)
@click.option("--tier", multiple=True, type=click.Choice(list(TIER_TABLES)), help="only this tier (repeatable)")
@click.option("--subject", help="only memories about this subject ('user', a first name, an organisation)")
@click.option("--status", multiple=True, help="only this status: active, superseded, archived ... (repeatable)")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="at most this many")
def show(who: MemoryContext, tier: tuple[str, ...], subject: str | None, status: tuple[str, ...], limit: int) -> None:
    """List a user's memories, oldest first, with the ids the other commands take."""
    filters = {"tier": list(tier) or None, "subject": subject, "status": list(status) or None}
    items = _all_items(_open(), who, limit + 1, **filters)
    _emit(items[:limit], items_text(items[:limit]))
    if len(items) > limit and not _option("json"):
        click.echo(f"(more than {limit}: raise --limit)", err=True)


@cli.command()
@_for_user(by_id=False)
@click.argument("query")
@click.option("--subject", help="only memories about this subject")
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True, help="at most this many")
def search(who: MemoryContext, query: str, subject: str | None, limit: int) -> None:
    """Recall a user's memories for QUERY, best first, as the agent would."""
    found = _run(_open().recall(who, query, limit=limit, subject=subject))
    _emit(found, items_text(found))


@cli.command()
@_for_user(by_id=True)
def get(who: MemoryContext, id: str) -> None:
    """Show one memory (or captured turn) of a user by id, in full."""
    item = _run(_open().get(who, id))
    _emit(item, item_text(item))


@cli.command()
@_for_user(by_id=True)
def history(who: MemoryContext, id: str) -> None:
    """Show every version of a memory with its validity and the turns it came from."""
    versions = _run(_open().history(who, id))
    _emit(versions, versions_text(versions))


@cli.command()
@click.argument("user", required=False)
@click.option("--namespace", "-n", help="with USER: its namespace [default: default]; alone: only this namespace")
@_data_options
def stats(user: str | None, namespace: str | None) -> None:
    """Count a user's memories per tier and status (every user's without USER)."""
    mem = _open()
    if user is not None:
        found = _run(mem.stats(_who(namespace or "default", user)))
        _emit(found, stats_text(found))
        return
    per_user = [(u, _run(mem.stats(u))) for u in mem.tiers.users() if namespace is None or u.namespace == namespace]
    size = mem.store.disk_bytes()
    data = [{"namespace": u.namespace, "user_id": u.user_id, **s.model_dump(mode="json")} for u, s in per_user]
    _emit({"users": data, "bytes_on_disk": size}, store_stats_text(per_user, size))


@cli.command()
@_for_user(by_id=False)
@click.option("--format", "fmt", type=click.Choice(["dot", "svg", "png"]), default="dot", show_default=True)
@_output
@click.option("--history", "closed", is_flag=True, help="also the relations that no longer hold (dashed)")
def graph(who: MemoryContext, fmt: str, output: str, closed: bool) -> None:
    """Draw a user's relations graph: subjects as nodes, edges labelled with their relation."""
    if fmt == "png" and output == "-" and sys.stdout.isatty():
        raise InvalidArgumentError("a PNG is binary: give -o FILE.png (or pipe it)")
    mem = _open()
    edges = [e for e in _all_items(mem, who, tier="relation") if closed or e.metadata.get("current") is not False]
    dot = graph_dot(f"{who.namespace}/{who.user_id}", _run(mem.subjects(who)), edges)
    data = dot.encode() if fmt == "dot" else render_dot(dot, "svg" if fmt == "svg" else "png")
    if output == "-":
        click.echo(data, nl=False)
    else:
        Path(output).write_bytes(data)
        click.echo(f"wrote {len(edges)} relations to {output}", err=True)


# -- change ---------------------------------------------------------------------------------


@cli.command()
@_for_user(by_id=True)
@click.option("--include-turns", is_flag=True, help="also delete the captured turns it came from")
@click.option("--model", default="rules", show_default=True, help="the model that rewrites the digest")
def forget(who: MemoryContext, id: str, include_turns: bool, model: str) -> None:
    """Delete one memory and what was derived only from it; the digest is rewritten."""
    report = _run(_open(model=model).forget(who, id, include_turns=include_turns))
    _emit(report, forget_text(report))


@cli.command()
@_for_user(by_id=False)
@click.option("--yes", is_flag=True, help="confirm: the user's memory is deleted for good")
def erase(who: MemoryContext, yes: bool) -> None:
    """Erase every record of a user from every table, old versions purged from disk."""
    if not yes:
        raise InvalidArgumentError(f"erase deletes all of {who.user_id!r} in {who.namespace!r} for good; add --yes")
    report = _run(_open().erase_user(who))
    _emit(report, counts_text(f"erased {who.namespace}/{who.user_id}:", report.rows))


@cli.command()
@_for_user(by_id=True)
def pin(who: MemoryContext, id: str) -> None:
    """Pin a fact or episode: it never decays, is never archived or compacted away."""
    record = _run(_open().pin(who, id))
    _emit(record, f"pinned {record.id}")


@cli.command()
@_for_user(by_id=True)
def unpin(who: MemoryContext, id: str) -> None:
    """Unpin a fact or episode: it decays again from its last reinforcement."""
    record = _run(_open().unpin(who, id))
    _emit(record, f"unpinned {record.id}")


# -- move -----------------------------------------------------------------------------------


@cli.command()
@_for_user(by_id=False)
@_output
def export(who: MemoryContext, output: str) -> None:
    """Write a user's memory as JSON Lines (to stdout unless -o FILE)."""
    report = _run(_open().export(who, sys.stdout if output == "-" else output))
    if output == "-":
        click.echo(counts_text("exported", report.records), err=True)  # stdout holds the export itself
    else:
        _emit(report, counts_text("exported", report.records) + f" to {output}")


@cli.command("import")
@_for_user(by_id=False)
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
def import_(who: MemoryContext, file: str) -> None:
    """Read an export (FILE, or - for stdin) into a user's memory; importing twice changes nothing."""
    report = _run(_open(create=True).import_(who, sys.stdin if file == "-" else file))
    _emit(report, counts_text("imported", report.records))


def _sessions(p: HistoryProgress | None) -> str | None:
    return None if p is None else f"{p.conversations_done}/{p.conversations_total} conversations"


def _progress_bar(turns: int) -> Any:
    """Turns done on stderr (stdout stays the report); redrawn at each report, a session's end too."""
    return click.progressbar(
        length=max(turns, 1), label="turns", item_show_func=_sessions, file=sys.stderr, update_min_steps=0
    )


@cli.command("import-history")
@_for_user(by_id=False)
@click.argument("file", type=click.File(encoding="utf-8"))
@click.option("--concurrency", type=click.IntRange(1, 64), default=4, show_default=True, help="sessions at once")
@click.option("--observe-window", type=click.IntRange(1, MAX_OBSERVE_WINDOW), default=OBSERVE_WINDOW,
              show_default=True, help="turns of a session per observer call (1: one per turn)")  # fmt: skip
@click.option("--model", help="litellm model string or 'rules' [default: from the environment]")
def import_history(who: MemoryContext, file: IO[str], concurrency: int, observe_window: int, model: str | None) -> None:
    """Feed past conversations (a JSON list, - for stdin) through the pipeline with their real dates.

    Each conversation is {"session_id": ..., "turns": [{"at": ISO time, "messages": [...]}]}.
    Interrupted? Run it again: the turns already imported are skipped.
    """
    try:
        conversations = json.load(file)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"{file.name} is not JSON: {exc}") from None
    mem = _open(create=True, model=model)
    with contextlib.ExitStack() as stack:
        bars: list[Any] = []  # entered at the first report: after the whole history was checked

        def progress(p: HistoryProgress) -> None:
            if not bars:
                bars.append(stack.enter_context(_progress_bar(p.turns_total)))
            bars[0].update(p.turns_done - bars[0].pos, current_item=p)

        imported = mem.import_conversations(
            who, conversations, concurrency=concurrency, on_progress=progress, observe_window=observe_window
        )
        report = _run(imported)
    for error in report.errors:
        click.echo(f"tiermem: warning: {error}", err=True)
    _emit(report, history_text(report))


# -- run: the demo, the worker, the MCP server, reembed -------------------------------------


@cli.command()
@click.option("--store", help="LanceDB folder or URI [default: a new temporary folder]")
@click.option("--model", default="rules", show_default=True, help="litellm model string, or 'rules' (offline)")
def demo(store: str | None, model: str) -> None:
    """Run the offline end-to-end demo."""
    from ._demo import run_demo

    _run(run_demo(store=store, model=model, out=click.echo))


def _intervals(pairs: Sequence[str]) -> dict[str, timedelta]:
    out: dict[str, timedelta] = {}
    for pair in pairs:
        name, _, seconds = pair.partition("=")
        try:
            out[name] = timedelta(seconds=float(seconds))
        except ValueError:
            raise click.BadParameter(f"expects JOB=SECONDS, got {pair!r}", param_hint="--every") from None
    return out


@cli.command()
@click.option("--store", help="LanceDB folder or URI [default: the global --store, $TIERMEM_STORE]")
@click.option("--model", help="litellm model string or 'rules' [default: from the environment]")
@click.option("--embedder", help="the embedder the store was written with")
@click.option("--jobstore", help="SQLAlchemy URL of a shared APScheduler job store")
@click.option("--every", multiple=True, metavar="JOB=SECONDS", help="override a job's interval (repeatable)")
@click.option("--run-now", is_flag=True, help="run every job once at start")
@click.option("--grace", type=float, default=30.0, show_default=True, help="seconds a job in flight may take on stop")
def worker(
    store: str | None, model: str | None, embedder: str | None, jobstore: str | None, every: tuple[str, ...],
    run_now: bool, grace: float,
) -> None:  # fmt: skip
    """Run the scheduled jobs until SIGTERM or Ctrl-C."""
    store = store or _option("store")
    if store is None:
        raise ConfigurationError("the worker needs a store: --store PATH or $TIERMEM_STORE")
    logging.getLogger().setLevel(logging.INFO)
    intervals = _intervals(every)
    mem = system(store=store, model=model, embedder=embedder or _option("embedder"))

    async def run() -> int:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        logging.getLogger("tiermem").info("worker running on %s (model %s)", store, mem.stages.name)
        click.echo(f"tiermem worker: running on {store}")
        return await mem.run_worker(stop, jobstore_url=jobstore, run_now=run_now, grace=grace, **intervals)

    click.echo(f"tiermem worker: stopped ({_run(run())} job(s) abandoned)")


@cli.command()
@click.option("--store", help="LanceDB folder or URI [default: $TIERMEM_STORE, else ~/.tiermem/store]")
@click.option("--user-id", help="the user whose memory is served [default: $TIERMEM_USER_ID]")
@click.option("--namespace", help="application or tenant [default: $TIERMEM_NAMESPACE, else 'default']")
@click.option("--embedder", help="the embedder the store was written with")
@click.option("--embedder-dimensions", type=int, help="dimensions of a litellm embedding model")
@click.option("--relations", is_flag=True, help="serve the relations graph (the connect tool)")
@click.option("--allow-writes", is_flag=True, help="offer the remember and forget tools")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to bind")
@click.option("--port", type=int, default=8000, show_default=True, help="HTTP: port; the endpoint is /mcp")
@click.option("--user-header", help="HTTP: take the user from this request header, set by your proxy")
def mcp(**values: Any) -> None:
    """Serve one user's memory to an MCP host (needs tiermem[mcp])."""
    try:
        from ._mcp import capability_options, config_from, serve
    except ImportError as exc:
        raise ConfigurationError(f"tiermem mcp needs the MCP SDK: pip install 'tiermem[mcp]' ({exc})") from None
    logging.getLogger().setLevel(logging.INFO)
    logging.getLogger("mcp").setLevel(logging.WARNING)
    values |= {k: values[k] or _option(k) for k in ("store", "embedder", "embedder_dimensions")}
    config = config_from(values, os.environ)
    capability = forget = None
    if config.allow_writes and (config.user_id is not None or config.user_header is not None):
        mem = system(model="rules", **capability_options(config))  # forget's digest rewrite: no model call
        capability, forget = mem.capability, mem.forget
    where = {"transport": values["transport"], "host": values["host"], "port": values["port"]}
    _run(serve(config, capability=capability, forget=forget, **where))


@cli.command(epilog="Run it with no other process using the store. If it is interrupted, run it again: it resumes.")
@click.option("--store", help="LanceDB folder or URI [default: the global --store, $TIERMEM_STORE]")
@click.option("--embedder", help="the embedder to move to [default: the shipped default, minilm-onnx]")
@click.option("--embedder-dimensions", type=int, help="dimensions of a litellm embedding model")
def reembed(store: str | None, embedder: str | None, embedder_dimensions: int | None) -> None:
    """Re-embed every record of a store with another embedder (e.g. after the default changed)."""
    store = store or _option("store")
    if store is None:
        raise ConfigurationError("reembed needs a store: --store PATH or $TIERMEM_STORE")
    reembed_store(store, embedder, dimensions=embedder_dimensions, echo=click.echo)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: run one command, return its exit code (0, 1 after an error line, 2 misuse)."""
    try:
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="tiermem", standalone_mode=False)
    except click.ClickException as exc:  # usage errors: click's message and code 2
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("tiermem: interrupted", err=True)
        return 130
    except BrokenPipeError:  # `tiermem export u | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
