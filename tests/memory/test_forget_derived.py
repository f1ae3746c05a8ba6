"""``forget`` reaches every derived text: after it, no tier says the forgotten memory.

A user tells of Tom's cello among other things, the memory is consolidated and digested, then the
cello fact is forgotten. Every row of every table of the user (its stored record, the searched
``text`` and ``context`` columns) is scanned for the forgotten words, the full-text indexes
(the cached one and LanceDB's) are searched for them, and recall is asked. The rest of what the
user said survives, the rewritten episode keeps its id and is re-embedded. Under the rules model
(extractive) and a scripted LLM (its rewrite validated, retried, and replaced by the extractive
one when it never validates).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.fakes import AnyCall, Messages, calls_for, default_reply, messages_of, session, stage_model
from tiermem import MemoryContext, MemorySystem, system
from tiermem.memory._record_text import embedded_text
from tiermem.memory._redaction import Forgotten
from tiermem.memory._store import USER_TABLES, Where
from tiermem.memory.testing import FrozenClock, HashingEmbedder
from tiermem.pipelines._sentences import split_sentences
from tiermem.prompts import consolidate, encode_consolidate, redact

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

CTX = MemoryContext(user_id="u-forget", session_id="s-1")
SAID = [
    ("s-1", "My wife Moni is allergic to shellfish."),
    ("s-1", "Moni's brother Tom plays the cello in a string quartet."),
    ("s-1", "I started baking sourdough bread on weekends."),
    ("s-2", "I love hiking in the mountains with our dog Biscuit."),
]
FORGOTTEN_WORDS = ("cello", "quartet")
KEPT_WORDS = ("shellfish", "sourdough", "biscuit")


def _per_sentence(messages: Messages, call: AnyCall) -> dict[str, Any]:
    """A consolidation answer with one fact per sentence said (the default makes one of each whole episode)."""
    answer = default_reply(call)
    said = [o.text for o in call.inputs.observations] or [e.summary for e in call.inputs.episodes]
    sentences = [s for text in said for s in split_sentences(text)]
    return answer | {"operations": [{"op": "add", "subject": "user", "text": s} for s in sentences]}


def _stubborn_then_clean() -> Any:
    """A redaction that first keeps the summary as it was (refused: it still says "cello"), then rewrites it."""
    asked: list[str] = []

    def answer(messages: Messages, call: AnyCall) -> dict[str, Any]:
        asked.append(call.inputs.text)
        return {"text": call.inputs.text} if len(asked) % 2 else default_reply(call)

    return answer


def _build(model: str, store: str, embedder: HashingEmbedder, clock: FrozenClock) -> tuple[MemorySystem, Any]:
    if model == "rules":
        return system(model="rules", store=store, embedder=embedder, clock=clock, semantic={"relations": True}), None
    replies: dict[Any, Any] = {consolidate.STAGE: _per_sentence, encode_consolidate.STAGE: _per_sentence}
    if model == "llm":
        replies[redact.STAGE] = _stubborn_then_clean()
    else:  # "llm-never-valid": every rewrite still says the forgotten words
        replies[redact.STAGE] = lambda messages, call: {"text": call.inputs.text}
    fake = stage_model(replies)
    return system(model=fake.model, store=store, embedder=embedder, clock=clock, validation_retries=1), fake


async def _remember(mem: MemorySystem) -> None:
    await mem.add_alias(CTX, "Sam")
    for sid in dict.fromkeys(s for s, _ in SAID):
        ctx = session(CTX, sid)
        for _, text in (p for p in SAID if p[0] == sid):
            await mem.capture(ctx, messages_of(text, "Noted."))
        await mem.end_session(ctx)
    await mem.consolidate(CTX)
    assert (await mem.digest(CTX)).digest is not None


def _rows(mem: MemorySystem, table: str) -> list[dict[str, Any]]:
    """The user's raw rows of ``table`` as stored (record JSON, searched columns), without the vector."""
    rows = mem.tiers.store.table(table).to_arrow().to_pylist()
    return [{k: v for k, v in r.items() if k != "vector"} for r in rows if r["user_id"] == CTX.user_id]


def _hits(mem: MemorySystem, words: tuple[str, ...], tables: tuple[str, ...] = USER_TABLES) -> list[str]:
    return [
        f"{table}: {row['id']}"
        for table in tables
        for row in _rows(mem, table)
        if any(w in json.dumps(row, default=str).lower() for w in words)
    ]


@pytest.mark.parametrize("include_turns", [True, False], ids=["with-turns", "fact-only"])
@pytest.mark.parametrize("model", ["rules", "llm", "llm-never-valid"])
async def test_forget_leaves_no_tier_saying_it(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, model: str, include_turns: bool
) -> None:
    mem, fake = _build(model, store_path, embedder, clock)
    await _remember(mem)
    assert {h.split(":")[0] for h in _hits(mem, FORGOTTEN_WORDS)} >= {"turns", "episodes", "facts", "digests"}
    cello = next(f for f in await mem.facts(CTX) if "cello" in f.text)
    episodes_before = {e.id for e in await mem.recent_episodes(CTX, limit=10)}

    report = await mem.forget(CTX, cello.id, include_turns=include_turns)

    derived = ("working", "episodes", "facts", "digests", "edges", "aliases")
    assert _hits(mem, FORGOTTEN_WORDS, derived) == []
    where = Where(eq={"namespace": CTX.namespace, "user_id": CTX.user_id})
    for table in derived[:-1]:  # the searched tables (aliases are not)
        for word in FORGOTTEN_WORDS:
            assert mem.tiers.store.text_search(table, word, where, limit=10) == []  # type: ignore[arg-type]
            assert mem.tiers.store.lance_text_search(table, word, where, limit=10) == []  # type: ignore[arg-type]
    recalled = [i for w in ("cello", "Who plays in a string quartet?") for i in await mem.recall(CTX, w, limit=20)]
    saying = [i for i in recalled if any(w in i.text.lower() for w in FORGOTTEN_WORDS)]
    if include_turns:
        assert _hits(mem, FORGOTTEN_WORDS) == []  # the turns and the next turn's context too
        assert saying == []
    else:  # the user's own words stay, in the turn log only: they asked to forget the memory, not what they said
        assert {h.split(":")[0] for h in _hits(mem, FORGOTTEN_WORDS)} == {"turns"}
        assert all(i.id.startswith("turn_") for i in saying)
    # What else the user said survives, in the same episodes, re-embedded.
    episodes = await mem.recent_episodes(CTX, limit=10)
    assert {e.id for e in episodes} == episodes_before
    summaries = " ".join(e.summary for e in episodes).lower()
    assert all(w in summaries for w in KEPT_WORDS)
    rewritten = [e for e in episodes if e.id in report.texts_rewritten]
    assert len(rewritten) == 1 and "shellfish" in rewritten[0].summary
    vectors = {r["id"]: r["vector"] for r in mem.tiers.store.table("episodes").to_arrow().to_pylist()}
    assert np.allclose(vectors[rewritten[0].id], embedder.embed([embedded_text(rewritten[0])])[0], atol=1e-6)
    assert report.digest_rewritten and "shellfish" in (await mem.latest_digest(CTX)).text  # type: ignore[union-attr]
    if model == "llm":  # refused once for still saying it, then rewritten by the model
        asked = calls_for(fake, redact.STAGE)
        assert len(asked) == 2 and "redact_error" not in rewritten[0].metadata
    if model == "llm-never-valid":  # out of retries: the extractive rewrite stands, with the model's error
        assert rewritten[0].metadata["redact_error"].startswith("ModelOutputError: ")


async def test_forget_drops_a_subject_only_the_forgotten_memory_named(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    mem, _ = _build("rules", store_path, embedder, clock)
    await _remember(mem)
    (episode,) = [e for e in await mem.recent_episodes(CTX, limit=10) if "tom" in e.subjects]
    cello = next(f for f in await mem.facts(CTX) if "cello" in f.text)

    await mem.forget(CTX, cello.id, include_turns=True)

    (after,) = [e for e in await mem.recent_episodes(CTX, limit=10) if e.id == episode.id]
    assert "tom" not in after.subjects and "moni" in after.subjects


@pytest.mark.parametrize(
    ("text", "kept", "expected"),
    [
        ("Tom plays the cello. Moni is allergic to shellfish.", ["Moni is allergic to shellfish."],
         "Moni is allergic to shellfish."),
        ("Tom's cellos were stolen. The user bakes.", ["The user bakes."], "The user bakes."),
        ("Moni, Tom's sister, plays chess.", ["Moni plays chess.", "Tom is Moni's brother."],
         "Moni, Tom's sister, plays chess."),
        ("Tom plays the cello.", [], ""),
    ],
    ids=["drops-the-sentence", "an-inflected-form", "kept-words-only-stay", "nothing-left"],
)  # fmt: skip
def test_redaction_drops_the_sentences_carrying_a_forgotten_term(text: str, kept: list[str], expected: str) -> None:
    forgotten = Forgotten.of(["Tom plays the cello in a string quartet."], kept=kept)

    assert forgotten.redact(text) == expected
    assert not forgotten.carries(forgotten.redact(text))
