"""The ``tiermem`` command: ``demo`` and the job ``worker``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta

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
    return parser


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
    return asyncio.run(_worker(args))


if __name__ == "__main__":
    sys.exit(main())
