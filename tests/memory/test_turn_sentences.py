"""A turn that says many things has a vector for each sentence beside its sides': a cue meets the turn at
its best, so a fact mentioned in passing inside a long message is not buried under the rest of it.

Real LanceDB (the cached rows and the engine's own multivector search), turns journaled through the
capture path; the hashing embedder where the arithmetic is checked, the default one for paraphrases.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pytest

from tiermem import HashingEmbedder, MemoryCapability, MemoryContext, Message, Store, Turn, create_memory_capability
from tiermem.memory._cli._main import main as cli
from tiermem.memory._embed._names import resolve_embedder
from tiermem.memory._index import SENTENCE_VECTORS
from tiermem.memory._record_text import MAX_SENTENCES, embedded_vectors, turn_sentences, turn_sides
from tiermem.memory._store import Where
from tiermem.memory._store._meta import RECIPE

DATA = Path(__file__).resolve().parents[1] / "data"
PAIRS: list[dict[str, str]] = json.loads((DATA / "paraphrases.json").read_text())["pairs"]
FILLER: list[str] = json.loads((DATA / "filler.json").read_text())["memories"][: 400 - len(PAIRS)]
CTX = MemoryContext(user_id="u-sentences", session_id="s-1")
LATER = CTX.model_copy(update={"session_id": "s-2"})
WHERE = Where(eq={"namespace": CTX.namespace, "user_id": CTX.user_id})
# A request's sentences that say nothing of the fact said beside them.
REQUEST = [
    "Can you help me plan the week ahead?", "I have a lot going on at the moment.",
    "Let me give you some context first.", "Could you draft a short email for me afterwards?",
    "Please keep the answer brief.", "I'd like a simple checklist at the end.", "Any advice would be welcome.",
]  # fmt: skip


def _turn(seq: int, *messages: Message) -> Turn:
    return Turn(id=f"turn-{seq}", namespace=CTX.namespace, user_id=CTX.user_id, session_id="s-1", seq=seq,
                messages=messages, created_at=datetime(2026, 3, 1, tzinfo=UTC))  # fmt: skip


def _said(seq: int, text: str, reply: str | None = None) -> Turn:
    messages = [Message(role="user", content=text)]
    return _turn(seq, *messages, *([Message(role="assistant", content=reply)] if reply else []))


@pytest.mark.parametrize(
    ("messages", "sentences"),
    [
        ([("user", None, "I keep bees.")], []),
        ([("user", None, "I keep bees. Two hives.")], ["I keep bees.", "Two hives."]),
        (
            [("user", None, "I keep bees."), ("assistant", None, "A lovely spring hobby. Do you sell the honey?")],
            ["A lovely spring hobby.", "Do you sell the honey?"],
        ),
        ([("user", None, "Thanks so much! I keep bees. Where?")], []),  # one sentence says something
        ([("user", None, "Hi, I'm Sam. I work at Acme Corp.")], []),  # a name alone joins the next sentence
        (
            [("user", None, "I keep bees. Two hives. Honey!")],
            ["I keep bees.", "Two hives. Honey!"],  # the last, of one word, joins the one before
        ),
        (
            [("user", "Jon", "I opened a studio. It is small and bright.")],
            ["Jon: I opened a studio.", "Jon: It is small and bright."],
        ),
        (
            [
                ("user", None, "I keep bees. Two hives."),
                ("assistant", None, "Wow, great! Any honey yet? Sold any jars?"),
            ],
            ["I keep bees.", "Two hives.", "Any honey yet?", "Sold any jars?"],
        ),
    ],
    ids=[
        "one-sentence",
        "two-sentences",
        "reply-of-two",
        "chat-dropped",
        "name-joined",
        "last-joined",
        "named-speaker",
        "both-sides",
    ],
)
def test_the_sentences_of_a_side_that_says_more_than_one_are_embedded_apart(
    messages: list[tuple[str, str | None, str]], sentences: list[str]
) -> None:
    turn = _turn(1, *(Message(role=role, name=name, content=text) for role, name, text in messages))  # type: ignore[arg-type]
    assert turn_sentences(turn) == sentences


def test_a_pasted_document_is_a_bounded_number_of_vectors_with_every_word_kept() -> None:
    text = " ".join(f"Line {n} mentions topic{n}." for n in range(100))
    sentences = turn_sentences(_said(1, text))
    assert len(sentences) == MAX_SENTENCES
    assert " ".join(sentences) == text  # neighbours grouped in order, nothing dropped


def test_each_text_is_embedded_once_and_a_turn_holds_its_sides_then_its_sentences() -> None:
    embedder, asked = HashingEmbedder(64), []

    def embed(texts: list[str]) -> np.ndarray:
        asked.append(texts)
        return embedder.embed(texts)

    turns = [_said(1, "I keep bees. Two hives.", "Lovely."), _said(2, "Lovely.")]
    vectors = embedded_vectors(turns, embed)
    assert asked == [["I keep bees. Two hives.", "Lovely.", "I keep bees.", "Two hives."]]
    assert [v.shape for v in vectors] == [(4, 64), (2, 64)]
    np.testing.assert_allclose(vectors[0], embedder.embed([*turn_sides(turns[0]), "I keep bees.", "Two hives."]))


LONG = [
    _said(1, "I have a busy month. My sister lands in Lisbon on Friday. Can you plan my week?"),
    _said(2, "Please keep the answer brief.", "Sure! Here is a short plan for your week. Start with the email."),
    _said(3, "Any advice would be welcome."),
]


@pytest.mark.parametrize("cached", [True, False], ids=["cached-rows", "engine-search"])
def test_a_turn_is_searched_at_its_best_sentence(tmp_path: Path, cached: bool) -> None:
    embedder = HashingEmbedder(64)
    path = str(tmp_path / "store")
    cap = create_memory_capability(store=path, embedder=embedder, working=False)
    assert cap.tiers.journal_many(LONG) == 3
    rows = {r["id"]: r for r in cap.store.table("turns").to_arrow().to_pylist()}
    assert [len(rows[f"turn-{n}"][SENTENCE_VECTORS] or ()) for n in (1, 2, 3)] == [3, 2, 0]

    store = cap.store if cached else Store(path, embedder_id=embedder.id, dimensions=64, vector_cache_bytes=0)
    query = embedder.embed(["My sister lands in Lisbon on Friday."])[0]
    hits = store.vector_search("turns", query, WHERE, limit=3)
    assert hits[0].record.id == "turn-1"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)  # the sentence itself, not the message's blend
    assert [h.vector.shape for h in hits if h.record.id == "turn-1"] == [(5, 64)]
    whole = float(embedder.embed([turn_sides(LONG[0])[0]])[0] @ query)
    assert whole < 0.8  # what one vector of the whole message gave


def test_the_cached_rows_follow_rewrites_and_agree_with_a_fresh_load(tmp_path: Path) -> None:
    embedder = HashingEmbedder(64)
    path = str(tmp_path / "store")
    cap = create_memory_capability(store=path, embedder=embedder, working=False)
    query = embedder.embed(["My sister lands in Lisbon on Friday."])[0]
    cap.tiers.journal_many(LONG)
    assert cap.store.vector_search("turns", query, WHERE, limit=1)[0].record.id == "turn-1"  # the rows cached
    # Rewritten in place by this process (write-through): turn-1 loses the sentence, turn-3 gains it.
    moved = [_said(1, "Can you plan my week?"), _said(3, "Any advice would be welcome. My sister lands in Lisbon.")]
    cap.store.upsert("turns", moved, embedded_vectors(moved, embedder.embed))
    cap.tiers.journal_many([_said(4, "I keep bees. Two hives in the garden.")])

    fresh = Store(path, embedder_id=embedder.id, dimensions=64)
    for store in (cap.store, fresh):
        hits = store.vector_search("turns", query, WHERE, limit=4)
        assert hits[0].record.id == "turn-3"
        scores = {h.record.id: h.score for h in hits}
        assert scores["turn-1"] < 0.8
    bees = embedder.embed(["Two hives in the garden."])[0]
    assert [h.record.id for h in cap.store.vector_search("turns", bees, WHERE, limit=1)] == ["turn-4"]
    assert {h.record.id: h.score for h in cap.store.vector_search("turns", query, WHERE, limit=4)} == pytest.approx(
        {h.record.id: h.score for h in fresh.vector_search("turns", query, WHERE, limit=4)}, abs=1e-5
    )


def test_a_store_of_recipe_4_opens_with_sides_only_and_reembed_adds_the_sentences(tmp_path: Path) -> None:
    embedder = HashingEmbedder(64)
    path = str(tmp_path / "store")
    create_memory_capability(store=path, embedder=embedder, working=False).tiers.journal_many(LONG[:1])
    lancedb.connect(path).open_table("turns").drop_columns([SENTENCE_VECTORS])  # as recipe 4 made the table
    lancedb.connect(path).open_table("meta").update(where=f"key = '{RECIPE}'", values={"value": "4"})
    query = embedder.embed(["My sister lands in Lisbon on Friday."])[0]

    cap = create_memory_capability(store=path, embedder=embedder, working=False)
    assert cap.tiers.journal_many(LONG[1:]) == 2
    assert SENTENCE_VECTORS not in cap.store.table("turns").schema.names
    hits = cap.store.vector_search("turns", query, WHERE, limit=3)
    assert {h.vector.shape for h in hits} == {(2, 64)}
    assert hits[0].score < 0.8  # the whole message's vector until re-embedded

    assert cli(["reembed", "--store", path, "--embedder", "hashing", "--embedder-dimensions", "64"]) == 0
    after = Store(path, embedder_id=embedder.id, dimensions=64)
    assert SENTENCE_VECTORS in after.table("turns").schema.names
    best = after.vector_search("turns", query, WHERE, limit=1)[0]
    assert (best.record.id, round(best.score, 4)) == ("turn-1", 1.0)


@pytest.fixture(scope="module")
def embedder() -> Any:
    return resolve_embedder(None)


def _conversation(folder: Path, embedder: Any, *, whole: bool) -> MemoryCapability:
    """The filler and every pair's memory as 400 user turns, each said in passing among three to six request
    sentences; ``whole``: one vector of the whole turn each (the control, as recipe 4 held them)."""
    rng = random.Random(3)
    cap = create_memory_capability(store=str(folder), embedder=embedder, working=False)
    turns = []
    for seq, text in enumerate([*FILLER, *(p["memory"] for p in PAIRS)]):
        around = rng.sample(REQUEST, rng.randint(3, 6))
        around.insert(rng.randint(0, len(around)), text)
        turns.append(_said(seq, " ".join(around)))
    cap.tiers.journal_many(turns)
    if whole:
        cap.store.upsert("turns", turns, embedder.embed([t.messages[0].content for t in turns]))
    return cap


def test_a_paraphrase_finds_a_fact_said_in_passing_in_a_long_message(tmp_path: Path, embedder: Any) -> None:
    split = _conversation(tmp_path / "split", embedder, whole=False)
    control = _conversation(tmp_path / "whole", embedder, whole=True)

    def found(cap: MemoryCapability) -> int:
        hits = 0
        for pair in PAIRS:
            texts = [item.text for item in cap.search.recall(LATER, pair["cue"], limit=3, tiers=None, subject=None)]
            hits += any(pair["memory"] in text for text in texts)
        return hits

    assert found(split) >= found(control) + len(PAIRS) // 4
    assert found(split) >= 0.8 * len(PAIRS)
