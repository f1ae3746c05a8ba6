"""What ``where=`` (metadata filters) and recall's currency check cost, on one user with 10k captured turns.

A fresh store (hashing embedder, frozen clock) gets N turns of synthetic text, each captured with
``{"channel": one of 4, "labels": 2 of 16 words}``, written directly with ``Tiers.put_turns`` and
compacted. Then, per measurement, the median of several ``recall_sync(ctx, cue, limit=10)`` calls:
without a filter; with a filter matching a quarter of the turns (``channel``), a list-valued one
(``labels`` contains), and one matching nothing; the first filtered recall (the lineage index read
from the store); a filtered recall after each of 5 new turns (the index brought up to date by
reading the new turns only); and ``list(where=...)``. Metadata is matched in Python on the parsed
records; what reaches LanceDB is an ``id IN (...)`` list of the matching ids, through ``sql_literal``.

Usage (from the repo root):
    python bench/where_filter.py            # 10k turns
    python bench/where_filter.py --turns 1000
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from tiermem import MemoryContext, Message, Turn, create_memory_capability
from tiermem.memory._identity import turn_id
from tiermem.memory.testing import FrozenClock, HashingEmbedder

WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
)  # fmt: skip
CUE = "alpha bravo kilo"


def _ms(fn: Callable[[], object], runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - started))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    args = parser.parse_args(argv)
    clock = FrozenClock(datetime(2026, 1, 1, tzinfo=UTC))
    cap = create_memory_capability(store=tempfile.mkdtemp(), embedder=HashingEmbedder(256), clock=clock)
    ctx = MemoryContext(namespace="bench", user_id="u")
    rng = random.Random(1)

    def turn(n: int, session: str, text: str, metadata: dict[str, object]) -> Turn:
        return Turn(
            id=turn_id(ctx, session_id=session, key=str(n)), namespace=ctx.namespace, user_id=ctx.user_id,
            session_id=session, seq=n % 20, messages=(Message(role="user", content=text),),
            created_at=clock.now() + timedelta(minutes=n), status="observed", metadata=metadata,
        )  # fmt: skip

    def metadata() -> dict[str, object]:
        return {"channel": rng.choice(["email", "chat", "sms", "slack"]), "labels": rng.sample(WORDS, 2)}

    def text() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(12))

    turns = [turn(n, f"s{n // 20}", text(), metadata()) for n in range(args.turns)]
    for start in range(0, len(turns), 2000):
        cap.tiers.put_turns(turns[start : start + 2000], new=True)
    cap.store.optimize()
    email = {"channel": "email"}
    rows = [
        ("recall, no filter", _ms(lambda: cap.recall_sync(ctx, CUE, limit=10))),
    ]
    cap.lineage._cache.clear()
    rows.append(("recall, first filtered (lineage read)", _ms(lambda: cap.recall_sync(ctx, CUE, where=email), 1)))
    rows += [
        ("recall, channel = email (1/4 of turns)", _ms(lambda: cap.recall_sync(ctx, CUE, where=email))),
        (
            "recall, labels contains alpha",
            _ms(lambda: cap.recall_sync(ctx, CUE, where={"labels": {"contains": "alpha"}})),
        ),
        ("recall, filter matching nothing", _ms(lambda: cap.recall_sync(ctx, CUE, where={"channel": "fax"}))),
        ("list(where=channel), first page of 50", _ms(lambda: asyncio.run(cap.list(ctx, where=email, limit=50)))),
        ("list(), first page of 50", _ms(lambda: asyncio.run(cap.list(ctx, limit=50)))),
    ]
    after = []
    for n in range(5):
        cap.tiers.put_turns([turn(args.turns + n, "live", "alpha kilo live", {"channel": "email"})], new=True)
        after.append(_ms(lambda: cap.recall_sync(ctx, CUE, where=email), 1))
    rows.append(("recall, filtered, after each new turn (median of 5)", statistics.median(after)))
    print(f"| {args.turns} turns, one user | ms |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
