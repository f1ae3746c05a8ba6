"""Recall by meaning over a conversation: the paraphrase pairs' memories said as turns, not stored as facts.

``bench/paraphrase.py`` writes each memory as a semantic fact. Agents mostly hold turns: a long
conversation's log, where most of what recall returns is raw turns (issue 34: on a second
conversation benchmark 97% of recall's first ten items were turns, and on its questions sharing no
word with their evidence recall fell below plain dense search over the same turns). Here every
pair's memory and the filler (``tests/data/filler.json``) are said by the user, one turn each, in a
shuffled order (a fixed seed), ``--per-session`` turns a session, one session a day, captured
through ``system(model="rules")`` with ``end_session`` and ``consolidate`` as an agent would (so
the store holds the turn log, episodes, facts the rules observer drew, and working memory).

For each pair's cue: the rank of its memory's turn in ``recall(ctx, cue, limit=10)``, items mapped to
turns through their provenance (an episode spends a slot per turn, as in ``bench/locomo.py``);
hit@1, hit@3, hit@10. Baseline: the raw dense cosine of the same embedder over the same turns' text
(no gate: it always returns something). For each unrelated cue: does recall return anything at all.

``--replies``: each turn carries an assistant's reply too, two or three generic sentences drawn from a
fixed pool (seeded) that never restate what the user said, as a chat assistant's acknowledgement does:
the user's words then share a turn's vector with the reply's (the baseline embeds the same text).
``--told``: the other way round, each memory is the assistant's words (said back in the second person,
"You can't swim."), after a short prompt from a fixed pool that says nothing ("Anything else?"): the
turn's meaning is all on the assistant's side.
``--long``: every turn is a longer message, the memory (or filler line) said in passing among three to
seven sentences of an everyday request drawn from a fixed pool (seeded) that say nothing of it ("Can you
help me plan the week ahead?"): one vector of the whole message is mostly the request (the baseline
embeds the same message).

Usage (from the repo root):
    python bench/paraphrase_turns.py                 # 400 turns (every pair's memory + filler), 10 a session
    python bench/paraphrase_turns.py --replies       # the same, each turn with an assistant's reply
    python bench/paraphrase_turns.py --told          # the same, each memory the assistant's
    python bench/paraphrase_turns.py --long          # the same, each memory in passing in a long message
    python bench/paraphrase_turns.py --size 4000 --per-session 20
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paraphrase
from _machine import cpu_name

from tiermem import MemoryContext, system
from tiermem.memory._embed._names import resolve_embedder
from tiermem.memory._store import Where
from tiermem.memory.testing import FrozenClock

NAMESPACE = "paraphrase-turns"
SEED = 7
# Replies that acknowledge without restating: what dilutes a turn's vector in a real chat log.
_REPLY_SENTENCES = [
    "Thanks for telling me.", "That's good to know.", "Got it, I'll keep that in mind.",
    "Is there anything you'd like help with around that?", "Let me know if you want to plan anything.",
    "That sounds like a lot to juggle.", "I can help you organise the details if you like.",
    "Happy to help whenever you need.", "Noted.", "That makes sense.", "How are you feeling about it?",
    "Would you like some suggestions?", "I hope the rest of your day goes smoothly.",
    "If anything changes, just tell me.", "I appreciate you sharing that.", "Sounds good.",
    "We can come back to this later.", "Do you want me to set a reminder?", "Interesting!",
    "Thanks, that helps me give better answers.", "I'll remember that for next time.",
    "Let me know how it goes.", "Anything else on your mind today?", "Okay, understood.",
]  # fmt: skip


# A request's sentences that say nothing of the memory beside them: a long message mentions a fact in passing.
_REQUEST_SENTENCES = [
    "Can you help me plan the week ahead?", "I have a lot going on at the moment.",
    "Let me give you some context first.", "Could you draft a short email for me afterwards?",
    "I want to get organised before the weekend.", "Please keep the answer brief.",
    "I was thinking about this on the way home.", "There are a few things to sort out.",
    "My calendar is a mess right now.", "I'd like a simple checklist at the end.",
    "Sorry for the long message.", "I'm not sure where to start.", "Any advice would be welcome.",
    "I'll explain the rest later.", "This has been on my mind for a while.",
    "Can you also suggest a good order to do things in?", "I only have an hour or so today.",
    "It doesn't need to be perfect.", "I keep putting it off.", "Let's make a plan together.",
    "Thanks in advance for the help.", "I'll check back tomorrow.", "Bullet points are fine.",
    "I want to avoid forgetting anything important.",
]  # fmt: skip


def in_passing(texts: Sequence[str]) -> list[str]:
    """Each text said in passing: among three to seven request sentences, at a seeded place."""
    rng = random.Random(SEED + 3)
    out = []
    for text in texts:
        around = rng.sample(_REQUEST_SENTENCES, rng.randint(3, 7))
        around.insert(rng.randint(0, len(around)), text)
        out.append(" ".join(around))
    return out


# Short prompts that say nothing of their own: the turn's meaning is all in the assistant's reply.
_PROMPTS = [
    "What do you remember about me?", "Go on.", "Anything else?", "Remind me?", "What else do you know?",
    "Tell me something you noted.", "And?", "What was the other thing?", "Say that again?", "Okay, what else?",
]  # fmt: skip
_SECOND_PERSON = {
    "i": "you", "i'm": "you're", "i've": "you've", "i'd": "you'd", "i'll": "you'll", "me": "you", "my": "your",
    "mine": "yours", "myself": "yourself", "we": "you", "we're": "you're", "we've": "you've", "our": "your",
    "us": "you", "ours": "yours", "am": "are", "was": "were",
}  # fmt: skip


def told(texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """Each memory said back by the assistant in the second person ("You can't swim."), after a short prompt."""
    rng = random.Random(SEED + 2)

    def second(m: re.Match[str]) -> str:
        word = _SECOND_PERSON[m.group(0).lower()]
        return word[:1].upper() + word[1:] if m.group(0)[:1].isupper() and m.start() == 0 else word

    pattern = re.compile(
        r"\b(?:" + "|".join(re.escape(w) for w in sorted(_SECOND_PERSON, key=len, reverse=True)) + r")\b", re.I
    )
    return [rng.choice(_PROMPTS) for _ in texts], [pattern.sub(second, t) for t in texts]


def replies(n: int) -> list[str]:
    """``n`` assistant replies of two or three pool sentences, the same for the same ``n``."""
    rng = random.Random(SEED + 1)
    return [" ".join(rng.sample(_REPLY_SENTENCES, rng.choice((2, 3)))) for _ in range(n)]


async def _say(
    mem: Any,
    texts: Sequence[str],
    per_session: int,
    clock: FrozenClock,
    answers: Sequence[str] | None,
    prompts: Sequence[str] | None = None,
) -> dict[str, int]:
    """Capture every text as a user turn (and its reply), ``per_session`` a session; turn id -> text index."""
    base = MemoryContext(namespace=NAMESPACE, user_id="u")
    order = list(range(len(texts)))
    random.Random(SEED).shuffle(order)
    for start in range(0, len(order), per_session):
        ctx = base.model_copy(update={"session_id": f"s{start // per_session}"})
        clock.set(paraphrase.START + timedelta(days=start // per_session))
        for j in order[start : start + per_session]:
            if prompts is not None:  # the memory is the assistant's, after a prompt saying nothing
                said = [{"role": "user", "content": prompts[j]}, {"role": "assistant", "content": texts[j]}]
            else:
                said = [{"role": "user", "content": texts[j]}]
                said += [{"role": "assistant", "content": answers[j]}] if answers is not None else []
            await mem.capture(ctx, said, metadata={"memory": j})
            clock.advance(timedelta(seconds=30))
        await mem.end_session(ctx)
    await mem.consolidate(base)
    turns = mem.store.query("turns", Where(eq={"namespace": NAMESPACE, "user_id": "u"}))
    return {t.id: int(t.metadata["memory"]) for t in turns}


def _ranked(items: Sequence[Any], turn_of: dict[str, int]) -> list[int]:
    """Recalled items -> the memories (text indexes) their turns said, in rank order, each once."""
    out: list[int] = []
    for item in items:
        for j in sorted({turn_of[p] for p in item.provenance if p in turn_of}):
            if j not in out:
                out.append(j)
    return out


def run(
    size: int,
    per_session: int,
    embedder_name: str | None,
    with_replies: bool = False,
    from_assistant: bool = False,
    long: bool = False,
) -> dict[str, Any]:
    embedder = resolve_embedder(embedder_name)
    pairs, unrelated, filler = paraphrase.load()
    [(idx, texts)] = paraphrase.stores(pairs, filler, max(size, len(pairs)))
    with tempfile.TemporaryDirectory(prefix="tiermem-paraphrase-turns-") as folder:
        clock = FrozenClock(paraphrase.START)
        mem = system(model="rules", store=folder, embedder=embedder, clock=clock, semantic=True)
        t0 = time.perf_counter()
        answers = replies(len(texts)) if with_replies else None
        prompts = None
        if from_assistant:
            prompts, texts = told(texts)
        if long:
            texts = in_passing(texts)
        turn_of = asyncio.run(_say(mem, texts, per_session, clock, answers, prompts))
        ingest = time.perf_counter() - t0
        mem.store.optimize()
        ctx = MemoryContext(namespace=NAMESPACE, user_id="u")
        said = list(texts) if answers is None else [f"{t}\n{a}" for t, a in zip(texts, answers, strict=True)]
        if prompts is not None:
            said = [f"{p}\n{t}" for p, t in zip(prompts, texts, strict=True)]
        vectors = embedder.embed(said)
        hits = {name: {1: 0, 3: 0, 10: 0} for name in ("tiermem", "dense")}
        missed = []
        timings: list[float] = []
        for i in idx:
            cue = pairs[i]["cue"]
            t = time.perf_counter()
            recalled = asyncio.run(mem.recall(ctx, cue, limit=10))
            timings.append(time.perf_counter() - t)
            found = _ranked(recalled, turn_of)
            dense = np.argsort(-(vectors @ embedder.embed([cue])[0]), kind="stable")[:10].tolist()
            for name, order in (("tiermem", found), ("dense", dense)):
                rank = order.index(i) if i in order else 10**6
                for k in (1, 3, 10):
                    hits[name][k] += rank < k
            if i not in found[:3] and i in dense[:3]:
                missed.append(pairs[i]["id"])
        returned = sum(bool(asyncio.run(mem.recall(ctx, cue, limit=10))) for cue in unrelated)
    return {
        "turns": len(texts), "cues": len(idx), "hits": hits, "missed": missed, "unrelated": len(unrelated),
        "false_positives": returned, "ingest_s": ingest, "embedder": embedder.id,
        "recall_ms": (1000 * float(np.median(timings)), 1000 * float(np.percentile(timings, 95))),
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=400, help="turns in the conversation (at least the pairs)")
    parser.add_argument("--per-session", type=int, default=10, help="turns per session")
    parser.add_argument("--embedder", default=None, help="embedder name (default: the shipped default)")
    parser.add_argument("--replies", action="store_true", help="each turn carries an assistant's generic reply")
    parser.add_argument(
        "--told", action="store_true", help="each memory is the assistant's, said back after a prompt saying nothing"
    )
    parser.add_argument("--long", action="store_true", help="each memory in passing in a long message")
    args = parser.parse_args(argv)
    if args.told and args.replies:
        parser.error("--told and --replies are two conditions: choose one")
    out = run(args.size, args.per_session, args.embedder, args.replies, args.told, args.long)
    n = out["cues"]
    replied = ", each with a reply" if args.replies else ", each the assistant's" if args.told else ""
    replied += ", each in passing in a long message" if args.long else ""
    print(f"{out['turns']} turns{replied}, {args.per_session} a session, {n} paraphrase cues, "
          f"embedder {out['embedder']}, {cpu_name()}; ingest {out['ingest_s']:.0f}s")  # fmt: skip
    print("| system | hit@1 | hit@3 | hit@10 |\n|---|---|---|---|")
    for name, h in out["hits"].items():
        print(f"| {name} | {h[1] / n:.2f} | {h[3] / n:.2f} | {h[10] / n:.2f} |")
    print(f"unrelated cues recalling anything: {out['false_positives']}/{out['unrelated']} (dense: all)")
    p50, p95 = out["recall_ms"]
    print(f"recall (query embedding included, one at a time): p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print(f"in dense's first 3, not in recall's: {len(out['missed'])} {' '.join(out['missed'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
