"""The demo: a short multi-session conversation captured, consolidated, digested, recalled, connected.

Runs offline on the defaults (the rules model, the shipped static embedder) unless a model is given.
"""

from __future__ import annotations

import tempfile
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from .._items import MemoryItem
from .._records import MemoryContext
from .._write import MemorySystem, system
from ..testing import FrozenClock

__all__ = ["SESSIONS", "run_demo"]

SESSIONS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "2026-03-02",
        [
            ("Hi, I'm Sam. I work at Acme Corp as a data engineer.", "Nice to meet you, Sam!"),
            (
                "My wife Moni is allergic to shellfish, so we never order paella.",
                "Good to know, I'll keep that in mind.",
            ),
            ("We are planning a trip to Lisbon in June.", "Lisbon in June sounds lovely."),
        ],
    ),
    (
        "2026-03-09",
        [
            ("Moni's brother Tom plays the cello in a string quartet.", "How lovely."),
            ("I started baking sourdough bread on weekends.", "Sourdough takes patience!"),
            ("I love hiking in the mountains with our dog Biscuit.", "That sounds like fun."),
        ],
    ),
    (
        "2026-03-16",
        [
            ("I work at Globex now.", "Congratulations on the new job!"),
            ("Moni is training for the Lisbon half marathon.", "Wish her luck from me."),
        ],
    ),
]

QUERIES = ["What should I cook for dinner with my wife?", "Where does Sam work?", "What does Tom play?"]


def _items(items: list[MemoryItem], out: Callable[[str], None]) -> None:
    for item in items:
        score = getattr(item, "score", None)
        tag = f"{score:5.2f} " if isinstance(score, float) else ""
        past = item.past_mark()
        out(f"    {tag}{item.tier:<9} {past + ' ' if past else ''}[{item.subject}] {textwrap.shorten(item.text, 90)}")


async def run_demo(
    *, store: str | None = None, model: str | None = "rules", out: Callable[[str], None] = print
) -> MemorySystem:
    """Run the whole pipeline and print what happens at each step."""
    folder = store or tempfile.mkdtemp(prefix="tiermem-demo-")
    clock = FrozenClock(datetime(2026, 3, 2, 18, 0, tzinfo=UTC))
    mem = system(model=model, store=folder, clock=clock, semantic={"relations": {"create_implicit_entities": True}})
    base = MemoryContext(namespace="demo", user_id="sam")
    await mem.add_alias(base, "Sam")
    out(
        f"tiermem demo  (store: {folder}, namespace: {base.namespace}, model: {mem.model_name}, "
        f"embedder: {mem.embedder.id})\n"
    )
    for number, (day, turns) in enumerate(SESSIONS, start=1):
        clock.set(datetime.fromisoformat(day).replace(hour=18, tzinfo=UTC))
        ctx = base.model_copy(update={"session_id": f"session-{number}"})
        out(f"== session {number} ({day})")
        for index, (user_text, reply) in enumerate(turns):
            said = [{"role": "user", "content": user_text}, {"role": "assistant", "content": reply}]
            # named turns: a rerun into the same store is a no-op, not a second copy of each turn
            result = await mem.capture(ctx, said, idempotency_key=f"demo-{number}-{index}")
            clock.advance(timedelta(minutes=2))
            out(f"  user: {user_text}")
            for entry in result.entries:
                out(f"    -> working [{entry.subject}] {entry.text}  (salience {entry.salience:.1f})")
        ended = await mem.end_session(ctx)
        if ended.episode:
            out(f"  episode: {textwrap.shorten(ended.episode.summary, 110)}")
        done = await mem.consolidate(base)
        out(f"  consolidated {done.episodes} episode(s): {done.counts}\n")
    digest = await mem.digest(base)
    out("== facts by subject (superseded ones kept as history)")
    for fact in await mem.facts(base, include_inactive=True):
        mark = "" if fact.status == "active" else f"  <{fact.status}>"
        out(f"  [{fact.subject}] {fact.text}{mark}")
    out("\n== digest")
    out(
        textwrap.fill(
            digest.digest.text if digest.digest else "(none)", 100, initial_indent="  ", subsequent_indent="  "
        )
    )
    for query in QUERIES:
        out(f"\n== recall: {query!r}")
        _items(list(await mem.recall(base, query, limit=5)), out)
    out("\n== connect: everything connected to Sam")
    _items([mem.item(e, clock.now()) for e in await mem.connections(base, "Sam")], out)
    path = await mem.relate(base, "Sam", "Tom")
    out("\n== relate: Sam -> Tom")
    out("  " + (" , ".join(e.text for e in path) if path else "(no path)"))
    ctx = base.model_copy(update={"session_id": "session-4"})
    cue = "What should we cook for Moni this weekend?"
    out(f"\n== context block for {cue!r}")
    out(textwrap.indent(await mem.format_context(ctx, cue, max_tokens=400), "  "))
    out(f"\n== model usage: {mem.usage() or 'no model calls (rules model)'}")
    out(f"\nLook around: tiermem --store {folder} show {base.user_id} --namespace {base.namespace}")
    return mem
