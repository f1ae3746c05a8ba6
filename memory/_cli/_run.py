"""The ``tiermem`` commands that run something on a store: the demo, the worker, the MCP server, reembed."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from .._errors import ConfigurationError, StoreNotFoundError
from .._store import stored_meta
from .._write import janitor_pass, system
from ._options import awaited, chosen_policy, data_options, emit, given, open_system, policy_options, say_using
from ._output import janitor_text
from ._policy_file import policy_summary
from ._reembed import reembed_store

__all__ = ["COMMANDS", "demo", "janitor", "mcp", "reembed", "worker"]


@click.command()
@click.option("--store", help="LanceDB folder or URI [default: a new temporary folder]")
@click.option("--model", default="rules", show_default=True, help="litellm model string, or 'rules' (offline)")
def demo(store: str | None, model: str) -> None:
    """Run the offline end-to-end demo."""
    from ._demo import run_demo

    awaited(run_demo(store=store, model=model, out=click.echo))


def _intervals(pairs: Sequence[str]) -> dict[str, timedelta]:
    out: dict[str, timedelta] = {}
    for pair in pairs:
        name, _, seconds = pair.partition("=")
        try:
            out[name] = timedelta(seconds=float(seconds))
        except ValueError:
            raise click.BadParameter(f"expects JOB=SECONDS, got {pair!r}", param_hint="--every") from None
    return out


@click.command()
@click.option("--store", help="LanceDB folder or URI [default: the global --store, $TIERMEM_STORE]")
@click.option("--model", help="litellm model string or 'rules' [default: from the environment]")
@click.option("--embedder", help="the embedder the store was written with")
@click.option("--jobstore", help="SQLAlchemy URL of a shared APScheduler job store")
@click.option("--every", multiple=True, metavar="JOB=SECONDS", help="override a job's interval (repeatable)")
@click.option("--run-now", is_flag=True, help="run every job once at start")
@click.option("--grace", type=float, default=30.0, show_default=True, help="seconds a job in flight may take on stop")
@policy_options
def worker(
    store: str | None, model: str | None, embedder: str | None, jobstore: str | None, every: tuple[str, ...],
    run_now: bool, grace: float,
) -> None:  # fmt: skip
    """Run the scheduled jobs until SIGTERM or Ctrl-C; consolidation, digests and compaction obey --policy."""
    store = store or given("store")
    if store is None:
        raise ConfigurationError("the worker needs a store: --store PATH or $TIERMEM_STORE")
    policy = chosen_policy()  # a bad policy starts nothing
    logging.getLogger().setLevel(logging.INFO)
    intervals = _intervals(every)
    mem = system(store=store, model=model, embedder=embedder or given("embedder"), policy=policy)
    say_using(store, model=mem.model_name, policy=policy)

    async def run() -> int:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        logging.getLogger("tiermem").info("worker running on %s (model %s)", store, mem.stages.name)
        obeys = policy_summary(policy)
        click.echo(f"tiermem worker: running on {store} (every namespace; model {mem.model_name}; policy {obeys})")
        return await mem.run_worker(stop, jobstore_url=jobstore, run_now=run_now, grace=grace, **intervals)

    click.echo(f"tiermem worker: stopped ({awaited(run())} job(s) abandoned)")


@click.command()
@data_options
@click.option("--model", help="litellm model string or 'rules' (compaction) [default: from the environment]")
@click.option("--dry-run", is_flag=True, help="say what the run would remove, per tier; change nothing")
@click.option("--force", is_flag=True, help="also run the users the removal guard stops")
@policy_options
def janitor(model: str | None, dry_run: bool, force: bool) -> None:
    """Run the janitor once now: decay, archive, expire, settle edges, compact (what the worker runs every 6 h).

    A user it would take more than hygiene's max_removed_share of (default half) is left as they are
    and listed; check the clock and the TTL, then --force if it is meant.
    """
    mem = open_system(model=model)
    report = awaited(janitor_pass(mem, dry_run=dry_run, force=force)).as_dict()
    emit(report, janitor_text(report))


@click.command()
@click.option("--store", help="LanceDB folder or URI [default: $TIERMEM_STORE, else ~/.tiermem/store]")
@click.option("--user-id", help="the user whose memory is served [default: $TIERMEM_USER_ID]")
@click.option("--namespace", help="application or tenant [default: $TIERMEM_NAMESPACE, else 'default']")
@click.option("--embedder", help="the embedder the store was written with")
@click.option("--embedder-dimensions", type=int, help="dimensions of a litellm embedding model")
@click.option("--relations", is_flag=True, help="serve the relations graph (the connect tool)")
@click.option("--allow-writes", is_flag=True, help="offer the remember and forget tools")
@click.option("--create", is_flag=True, help="with --allow-writes: start a new store at --store if there is none")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to bind")
@click.option("--port", type=int, default=8000, show_default=True, help="HTTP: port; the endpoint is /mcp")
@click.option("--user-header", help="HTTP: take the user from this request header, set by your proxy")
@click.option("--read-scope", "read_scopes", multiple=True, help="a shared scope recalled too (team:ID); needs a grant")
@click.option("--write-scope", help="the shared scope remember(scope='shared') writes to; needs a write grant")
@click.option("--agent", "agent_id", help="the agent served: remember(scope='agent') writes to agent:ID")
@policy_options
def mcp(**values: Any) -> None:
    """Serve one user's memory to an MCP host (needs tiermem[mcp])."""
    try:
        from ._mcp import capability_options, config_from, serve
    except ImportError as exc:
        raise ConfigurationError(f"tiermem mcp needs the MCP SDK: pip install 'tiermem[mcp]' ({exc})") from None
    logging.getLogger().setLevel(logging.INFO)
    logging.getLogger("mcp").setLevel(logging.WARNING)
    values |= {k: values[k] or given(k) for k in ("store", "embedder", "embedder_dimensions")}
    create = values.pop("create")
    policy = chosen_policy()  # forget's digest rewrite obeys it; recall's categories are its labels
    config = config_from(values, os.environ)
    store = config.store or str(Path.home() / ".tiermem" / "store")
    if not stored_meta(store) and not (create and config.allow_writes):
        # a mistyped path would otherwise be served as a new, empty store: the agent would "remember" nothing
        how = "" if config.allow_writes else " (a new one needs --allow-writes --create)"
        raise StoreNotFoundError(f"no tiermem store at {store!r}; check the path, or add --create to start one{how}")
    model = "rules" if config.allow_writes else None
    say_using(store, model=model, namespace=config.namespace, user=config.user_id, policy=policy)
    capability = forget = None
    if config.user_id is not None or config.user_header is not None:
        if config.allow_writes:
            mem = system(model="rules", policy=policy, **capability_options(config))  # forget's rewrite: no model call
            capability, forget = mem.capability, mem.forget
        elif policy is not None:  # read-only: nothing is created; the policy's labels are recall's vocabulary
            capability = system(model="rules", policy=policy, create=False, **capability_options(config)).capability
    where = {"transport": values["transport"], "host": values["host"], "port": values["port"]}
    awaited(serve(config, capability=capability, forget=forget, **where))


@click.command(epilog="Run it with no other process using the store. If it is interrupted, run it again: it resumes.")
@click.option("--store", help="LanceDB folder or URI [default: the global --store, $TIERMEM_STORE]")
@click.option("--embedder", help="the embedder to move to [default: the shipped default, minilm-onnx]")
@click.option("--embedder-dimensions", type=int, help="dimensions of a litellm embedding model")
def reembed(store: str | None, embedder: str | None, embedder_dimensions: int | None) -> None:
    """Re-embed every record of a store with another embedder (e.g. after the default changed)."""
    store = store or given("store")
    if store is None:
        raise ConfigurationError("reembed needs a store: --store PATH or $TIERMEM_STORE")
    reembed_store(store, embedder, dimensions=embedder_dimensions, echo=click.echo)


COMMANDS = (demo, worker, janitor, mcp, reembed)
