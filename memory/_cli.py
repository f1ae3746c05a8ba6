"""The ``tiermem`` command: ``demo``, the job ``worker``, the ``mcp`` server and ``reembed``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tiermem", description="Tiered memory for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the offline end-to-end demo")
    demo.add_argument("--store", help="LanceDB folder or URI (default: a new temporary folder)")
    demo.add_argument("--model", default="rules", help="litellm model string, or 'rules' (default, offline)")
    worker = sub.add_parser("worker", help="run the scheduled jobs until SIGTERM or Ctrl-C")
    worker.add_argument("--store", required=True, help="LanceDB folder or URI")
    worker.add_argument("--model", default=None, help="litellm model string or 'rules' (default: from the environment)")
    worker.add_argument(
        "--embedder", default=None, help="embedder the store was written with (default: the shipped one)"
    )
    worker.add_argument("--jobstore", default=None, help="SQLAlchemy URL of a shared APScheduler job store")
    worker.add_argument(
        "--every", action="append", default=[], metavar="JOB=SECONDS", help="override a job's interval (repeatable)"
    )
    worker.add_argument("--run-now", action="store_true", help="run every job once at start")
    worker.add_argument("--grace", type=float, default=30.0, help="seconds a job in flight may take to finish on stop")
    _mcp_arguments(sub.add_parser("mcp", help="serve one user's memory to an MCP host (needs tiermem[mcp])"))
    reembed = sub.add_parser(
        "reembed",
        help="re-embed every table of a store with another embedder (e.g. after the default changed)",
        description=(
            "Recompute the vector of every record in the store with EMBEDDER and record it in the store's "
            "meta table, so the store then opens with that embedder. Run it with no other process using the "
            "store. If it is interrupted, run it again: it resumes from the records, which it never changes."
        ),
    )
    reembed.add_argument("--store", required=True, help="LanceDB folder or URI")
    reembed.add_argument(
        "--embedder", default=None, help="the embedder to move to (default: the shipped default, minilm-onnx)"
    )
    reembed.add_argument("--embedder-dimensions", type=int, help="dimensions of a litellm embedding model")
    return parser


def _reembed(args: argparse.Namespace) -> int:
    """``tiermem reembed``: one pass over each table, records unchanged, vectors and meta replaced."""
    import numpy as np

    from ._embedders import resolve_embedder
    from ._errors import TiermemError
    from ._store import REEMBEDDING, Store, stored_meta
    from ._tiers import embedded_text

    try:
        meta = stored_meta(args.store)
        if not meta:
            raise SystemExit(f"tiermem reembed: no tiermem store at {args.store!r}")
        target = resolve_embedder(args.embedder, dimensions=args.embedder_dimensions)
        made = meta.get("embedder_id", "")
        if made == target.id:
            print(f"tiermem reembed: {args.store} already uses {target.id}; nothing to do")
            return 0
        if made.startswith(REEMBEDDING) and made != REEMBEDDING + target.id:
            raise SystemExit(
                f"tiermem reembed: {args.store} is part-way through a move to {made.removeprefix(REEMBEDDING)!r}; "
                "finish that one first (--embedder with that name)"
            )
        store = Store(args.store, embedder_id=made, dimensions=int(meta.get("dimensions", "0")))

        def vectors(table: str, records: list[Any]) -> np.ndarray:
            print(f"  {table}: {len(records)} records", flush=True)
            return target.embed([embedded_text(r) for r in records])

        print(f"tiermem reembed: {args.store}: {made} -> {target.id} ({target.dimensions} dimensions)", flush=True)
        counts = store.reembed(target.id, target.dimensions, vectors)
    except TiermemError as exc:
        raise SystemExit(f"tiermem reembed: {exc}") from None
    print(f"tiermem reembed: done, {sum(counts.values())} records re-embedded; the store now uses {target.id}")
    return 0


def _mcp_arguments(mcp: argparse.ArgumentParser) -> None:
    """``tiermem mcp``: each option falls back to its TIERMEM_* variable (TIERMEM_STORE, TIERMEM_USER_ID ...)."""
    mcp.add_argument("--store", help="LanceDB folder or URI (default: $TIERMEM_STORE, else ~/.tiermem/store)")
    mcp.add_argument("--user-id", help="the user whose memory is served (default: $TIERMEM_USER_ID)")
    mcp.add_argument("--namespace", help="application or tenant (default: $TIERMEM_NAMESPACE, else 'default')")
    mcp.add_argument("--embedder", help="embedder the store was written with (default: the shipped one)")
    mcp.add_argument("--embedder-dimensions", type=int, help="dimensions of a litellm embedding model")
    mcp.add_argument("--relations", action="store_true", help="serve the relations graph (the connect tool)")
    mcp.add_argument("--allow-writes", action="store_true", help="offer the remember tool")
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default: 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8000, help="HTTP: port (default: 8000); the endpoint is /mcp")
    mcp.add_argument("--user-header", help="HTTP: take the user from this request header, set by your proxy")


def _mcp(args: argparse.Namespace) -> int:
    try:
        from ._mcp import capability_options, config_from, serve
    except ImportError as exc:
        raise SystemExit(f"tiermem mcp needs the MCP SDK: pip install 'tiermem[mcp]' ({exc})") from None
    from ._errors import TiermemError

    logging.getLogger("mcp").setLevel(logging.WARNING)
    try:
        config = config_from(vars(args), os.environ)
        capability = forget = None
        if config.allow_writes and (config.user_id is not None or config.user_header is not None):
            from ._system import system

            mem = system(model="rules", **capability_options(config))  # forget's digest rewrite: no model call
            capability, forget = mem.capability, mem.forget
        where = {"transport": args.transport, "host": args.host, "port": args.port}
        asyncio.run(serve(config, capability=capability, forget=forget, **where))
    except TiermemError as exc:
        raise SystemExit(f"tiermem mcp: {exc}") from None
    return 0


def _intervals(pairs: Sequence[str]) -> dict[str, timedelta]:
    out: dict[str, timedelta] = {}
    for pair in pairs:
        name, _, seconds = pair.partition("=")
        try:
            out[name] = timedelta(seconds=float(seconds))
        except ValueError:
            raise SystemExit(f"tiermem worker: --every expects JOB=SECONDS, got {pair!r}") from None
    return out


async def _worker(args: argparse.Namespace) -> int:
    from ._system import system

    if args.jobstore is not None:
        try:
            import sqlalchemy  # noqa: F401  (APScheduler's job store imports it later, with a bare ImportError)
        except ImportError:
            raise SystemExit("tiermem worker: --jobstore needs SQLAlchemy: pip install 'tiermem[worker]'") from None
    mem = system(store=args.store, model=args.model, embedder=args.embedder)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    logging.getLogger("tiermem").info("worker running on %s (model %s)", args.store, mem.stages.name)
    print(f"tiermem worker: running on {args.store}", flush=True)
    abandoned = await mem.run_worker(
        stop, jobstore_url=args.jobstore, run_now=args.run_now, grace=args.grace, **_intervals(args.every)
    )
    print(f"tiermem worker: stopped ({abandoned} job(s) abandoned)", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)
    if args.command == "demo":
        from ._demo import run_demo

        logging.getLogger("tiermem").setLevel(logging.WARNING)
        asyncio.run(run_demo(store=args.store, model=args.model))
        return 0
    if args.command == "mcp":
        return _mcp(args)
    if args.command == "reembed":
        return _reembed(args)
    return asyncio.run(_worker(args))


if __name__ == "__main__":
    sys.exit(main())
