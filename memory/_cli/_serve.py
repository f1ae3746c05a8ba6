"""``tiermem serve``: the REST server (memory/_rest) on uvicorn, one user per API key of the operator's keys file;
``tiermem ui``: the web inspector (memory/_rest's inspector) on uvicorn, for whoever holds its address."""

from __future__ import annotations

import logging
import secrets
from typing import Any

import click

from .._errors import ConfigurationError
from ._options import awaited, given, keep, open_system, policy_options

__all__ = ["COMMANDS", "serve", "ui"]


@click.command()
@click.option("--store", expose_value=False, callback=keep("store"), help="as the global one")
@click.option("--embedder", expose_value=False, callback=keep("embedder"), help="as the global one")
@click.option(
    "--keys",
    "keys_file",
    required=True,
    envvar="TIERMEM_REST_KEYS",
    type=click.Path(dir_okay=False),
    help='JSON list of {"key", "user_id", "namespace"}: the user each API key acts as [env: TIERMEM_REST_KEYS]',
)
@click.option("--model", help="litellm model string or 'rules' (capture's observer) [default: from the environment]")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="port to listen on")
@click.option("--create", is_flag=True, help="make the store if it does not exist (else a missing store is an error)")
@click.option("--max-body-mib", type=click.IntRange(1, 4096), default=32, show_default=True, help="largest body read")
@policy_options
def serve(keys_file: str, model: str | None, host: str, port: int, create: bool, max_body_mib: int) -> None:
    """Serve a store over HTTP as a REST API (needs tiermem[rest]); the schema is at /openapi.json.

    Each request sends Authorization: Bearer KEY; the keys file says whose memory each key reaches.
    Plain HTTP: bind beyond 127.0.0.1 only behind a proxy that adds TLS."""
    try:
        import uvicorn  # noqa: F401 (the extra is checked here, before the store opens)

        from .._rest import build_app, load_keys
    except ImportError as exc:
        needs = "tiermem serve needs FastAPI and uvicorn: pip install 'tiermem[rest]'"
        raise ConfigurationError(f"{needs} ({exc})") from None
    keys = load_keys(keys_file)  # before the store: a bad keys file opens nothing
    mem = open_system(create=create, model=model)
    app = build_app(mem, keys, max_body_bytes=max_body_mib * 1024 * 1024)
    click.echo(
        f"tiermem serve: http://{host}:{port} (store {given('store') or mem.store.uri}, model {mem.stages.name}, "
        f"{len(keys)} key(s))"
    )
    _serve_until_stopped(app, mem, host=host, port=port)


@click.command()
@click.option("--store", expose_value=False, callback=keep("store"), help="as the global one")
@click.option("--embedder", expose_value=False, callback=keep("embedder"), help="as the global one")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="address to bind (not loopback: a token is needed)"
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="port to listen on")
@click.option("--allow-writes", is_flag=True, help="offer pin, unpin, forget, erase and export")
@click.option(
    "--model",
    help="with --allow-writes: litellm model string or 'rules' (forget's rewrites) [default: from the environment]",
)
@click.option(
    "--token",
    envvar="TIERMEM_UI_TOKEN",
    help="secret every request must carry [default: none on 127.0.0.1, else a new one, printed] "
    "[env: TIERMEM_UI_TOKEN]",
)
@policy_options
def ui(host: str, port: int, allow_writes: bool, model: str | None, token: str | None) -> None:
    """Serve a web inspector of a store (needs tiermem[ui]): users, tiers, facts and their history, episodes,
    the digest, pending work, recall with why each result ranks, and the relations graph.

    Read-only unless --allow-writes. Plain HTTP: bind beyond 127.0.0.1 only on a network you trust."""
    try:
        import uvicorn  # noqa: F401 (the extra is checked here, before the store opens)

        from .._rest import build_inspector, is_loopback
    except ImportError as exc:
        raise ConfigurationError(
            f"tiermem ui needs FastAPI, Jinja2 and uvicorn: pip install 'tiermem[ui]' ({exc})"
        ) from None
    if token is not None and len(token) < 16:
        raise ConfigurationError("--token: give at least 16 characters (or leave it out for a new one)")
    loopback = is_loopback(host)
    if token is None and not loopback:
        token = secrets.token_urlsafe(24)
    mem = open_system(read_only=not allow_writes, model=model if allow_writes else "rules")
    app = build_inspector(mem, allow_writes=allow_writes, token=token, loopback=loopback)
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    mode = "writes allowed" if allow_writes else "read-only"
    click.echo(f"tiermem ui: {address} (store {given('store') or mem.store.uri}, {mode})")
    _serve_until_stopped(app, mem, host=host, port=port)


COMMANDS = (serve, ui)


def _serve_until_stopped(app: Any, mem: Any, *, host: str, port: int) -> None:
    """Serve ``app`` with uvicorn until stopped, then close ``mem``. uvicorn's access log is off (it would
    show a token passed in the query); the app logs path and status itself, never a header."""
    import uvicorn

    logging.getLogger().setLevel(logging.INFO)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)

    async def run() -> None:
        try:
            await uvicorn.Server(config).serve()
        finally:
            await mem.aclose()

    awaited(run())
