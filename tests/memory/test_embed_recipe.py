"""The embedding recipe (which text of a record is embedded) is recorded beside the embedder: a store
embedded by another recipe is reported, and ``tiermem reembed`` re-embeds it and records this one."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import lancedb
import numpy as np
import pytest

from tiermem import (
    Digest,
    Episode,
    Fact,
    HashingEmbedder,
    MemoryContext,
    Message,
    Store,
    Turn,
    WorkingEntry,
    create_memory_capability,
)
from tiermem.memory._cli._main import main as cli_main
from tiermem.memory._index import REPLY_VECTOR, SENTENCE_VECTORS
from tiermem.memory._record_text import EMBED_RECIPE, changed_since, embedded_text, own_voice, turn_sides
from tiermem.memory._store import recipe_of, stored_meta
from tiermem.memory._store._meta import RECIPE

EMBEDDER = HashingEmbedder(64)
CTX = MemoryContext(user_id="u-1")
FACTS = ["I am allergic to peanuts.", "I moved from Berlin to Lisbon last month.", "I play the cello."]


def _store(tmp_path: Path) -> str:
    path = str(tmp_path / "store")
    cap = create_memory_capability(store=path, embedder=EMBEDDER)
    for text in FACTS:
        cap.tiers.add_semantic_fact(CTX, text)
    return path


def _set_recipe(path: str, recipe: str | None) -> None:
    """The meta row as another tiermem wrote it: ``recipe``, or none (a store made before recipes)."""
    meta = lancedb.connect(path).open_table("meta")
    if recipe is None:
        meta.delete(f"key = '{RECIPE}'")
    else:
        meta.update(where=f"key = '{RECIPE}'", values={"value": recipe})


@pytest.fixture
def older_recipe(tmp_path: Path) -> str:
    """A store whose facts were embedded by an earlier recipe (another text per record), recording it as 0."""
    path = _store(tmp_path)
    store = Store(path, embedder_id=EMBEDDER.id, dimensions=EMBEDDER.dimensions)
    facts = create_memory_capability(store=path, embedder=EMBEDDER).tiers.facts(CTX)
    store.upsert("facts", facts, EMBEDDER.embed([f"{f.subject}: {f.text}" for f in facts]))
    _set_recipe(path, "0")
    return path


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _stored_vectors(path: str) -> tuple[np.ndarray, np.ndarray]:
    """The facts' vectors as stored, and as this code embeds the same records afresh."""
    cap = create_memory_capability(store=path, embedder=EMBEDDER)
    facts = sorted(cap.tiers.facts(CTX), key=lambda f: f.id)
    rows = {r["id"]: r["vector"] for r in cap.tiers.store.table("facts").to_arrow().to_pylist()}
    stored = np.asarray([rows[f.id] for f in facts], dtype=np.float32)
    return stored, EMBEDDER.embed([embedded_text(f) for f in facts])


def test_a_new_store_records_this_codes_recipe(tmp_path: Path) -> None:
    assert stored_meta(_store(tmp_path))[RECIPE] == str(EMBED_RECIPE)


def test_a_store_made_before_recipes_counts_as_recipe_1_and_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _store(tmp_path)
    _set_recipe(path, None)
    assert RECIPE not in stored_meta(path) and recipe_of(stored_meta(path)) == "1"

    with caplog.at_level(logging.WARNING, logger="tiermem"):
        create_memory_capability(store=path, embedder=EMBEDDER, create=False)

    [message] = _warnings(caplog)
    assert (
        f"embedded with recipe 1 (which text of a record is embedded), this tiermem embeds with recipe {EMBED_RECIPE}"
        in message
    )


def _turn(seq: int, *messages: Message) -> Turn:
    return Turn(id=f"turn-{seq}", namespace="default", user_id="u-1", session_id="s-1", seq=seq, messages=messages,
                created_at=datetime(2026, 3, 1, tzinfo=UTC))  # fmt: skip


def test_a_turn_is_embedded_without_role_labels_but_with_speaker_names() -> None:
    turn = _turn(1, Message(role="user", content="I keep bees."), Message(role="user", content="Two hives."))
    named = _turn(2, Message(role="user", name="Jon", content="I opened a studio."))
    assert embedded_text(turn) == "I keep bees.\nTwo hives."
    assert turn.text == "user: I keep bees.\nuser: Two hives."  # what is shown and searched by words
    assert embedded_text(named) == "Jon: I opened a studio."


@pytest.mark.parametrize("create", [True, False], ids=["writer", "read-only"])
def test_a_store_of_another_recipe_is_reported_with_the_way_out(
    create: bool, older_recipe: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tiermem"):
        create_memory_capability(store=older_recipe, embedder=EMBEDDER, create=create)

    [message] = _warnings(caplog)
    assert (
        f"embedded with recipe 0 (which text of a record is embedded), this tiermem embeds with recipe {EMBED_RECIPE}"
        in message
    )
    assert f"`tiermem reembed --store {older_recipe} --embedder hashing --embedder-dimensions 64`" in message
    stored, fresh = _stored_vectors(older_recipe)
    assert not np.allclose(stored, fresh)  # what the warning is about


def test_reembed_moves_a_store_to_this_recipe_with_its_embedder(
    older_recipe: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["reembed", "--store", older_recipe, "--embedder", "hashing", "--embedder-dimensions", "64"]
    assert cli_main(command) == 0
    out = capsys.readouterr().out
    assert f"{EMBEDDER.id} -> {EMBEDDER.id} (64 dimensions), embedding recipe 0 -> {EMBED_RECIPE}" in out
    assert f"done, {len(FACTS)} records re-embedded" in out

    assert stored_meta(older_recipe)[RECIPE] == str(EMBED_RECIPE)
    assert stored_meta(older_recipe)["embedder_id"] == EMBEDDER.id
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tiermem"):
        stored, fresh = _stored_vectors(older_recipe)
    assert _warnings(caplog) == []
    np.testing.assert_allclose(stored, fresh, rtol=0, atol=1e-6)
    assert cli_main(command) == 0
    assert "nothing to do" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("recipe", "expected"),
    [
        ("1", (Turn, WorkingEntry, Episode, Fact, Digest)),
        ("2", (WorkingEntry, Episode, Fact, Digest, Turn)),
        ("3", (Turn,)),
        (str(EMBED_RECIPE), ()),
        ("0", None),
        ("9", None),
        ("x", None),
    ],
    ids=[
        "recipe-1",
        "recipe-2",
        "recipe-3-only-turns",
        "current-nothing",
        "unknown-older-all",
        "newer-all",
        "unreadable-all",
    ],
)
def test_what_each_recipe_changed_is_known(recipe: str, expected: tuple[type, ...] | None) -> None:
    assert changed_since(recipe) == expected


def test_reembed_from_recipe_3_gives_turns_a_vector_per_side_and_leaves_the_facts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _store(tmp_path)
    store = Store(path, embedder_id=EMBEDDER.id, dimensions=EMBEDDER.dimensions)
    facts = create_memory_capability(store=path, embedder=EMBEDDER).tiers.facts(CTX)
    kept = EMBEDDER.embed([f"stale {f.text}" for f in facts])  # not what any recipe makes: must survive
    store.upsert("facts", facts, kept)
    turns = [
        _turn(1, Message(role="user", content="I keep bees."), Message(role="assistant", content="How many hives?")),
        _turn(2, Message(role="user", content="Two hives.")),
    ]
    store.upsert("turns", turns, EMBEDDER.embed([t.text for t in turns]))
    lancedb.connect(path).open_table("turns").drop_columns(
        [REPLY_VECTOR, SENTENCE_VECTORS]
    )  # as recipe 3 made the table
    _set_recipe(path, "3")

    command = ["reembed", "--store", path, "--embedder", "hashing", "--embedder-dimensions", "64"]
    assert cli_main(command) == 0
    out = capsys.readouterr().out
    assert f"embedding recipe 3 -> {EMBED_RECIPE}; only Turn records changed" in out
    assert f"done, {len(turns)} records re-embedded" in out

    table = Store(path, embedder_id=EMBEDDER.id, dimensions=EMBEDDER.dimensions)
    turn_rows = {r["id"]: r for r in table.table("turns").to_arrow().to_pylist()}
    sides = {t.id: EMBEDDER.embed(list(turn_sides(t))) for t in turns}
    for turn in turns:
        stored = [turn_rows[turn.id]["vector"], turn_rows[turn.id][REPLY_VECTOR]]
        np.testing.assert_allclose(stored, sides[turn.id], rtol=0, atol=1e-6)
    fact_rows = {r["id"]: r["vector"] for r in table.table("facts").to_arrow().to_pylist()}
    np.testing.assert_allclose([fact_rows[f.id] for f in facts], kept, rtol=0, atol=1e-6)
    assert stored_meta(path)[RECIPE] == str(EMBED_RECIPE)


@pytest.mark.parametrize(
    ("written", "voiced"),
    [
        ("The user is allergic to peanuts.", "I am allergic to peanuts."),
        ("The user's dish is the user's grandmother's lasagna.", "My dish is my grandmother's lasagna."),
        ("The user hates cilantro; it tastes like soap to the user.", "I hates cilantro; it tastes like soap to me."),
        ("Moni, the user's wife, is allergic to shellfish.", "Moni, my wife, is allergic to shellfish."),
        ("Jonas invited the user to dinner.", "Jonas invited me to dinner."),
        ("The user has two dogs and the user walks them daily.", "I have two dogs and I walks them daily."),
        ("It was sunny when the user went out. The user got wet.", "It was sunny when I went out. I got wet."),
        ("User is vegetarian.", "I am vegetarian."),
        ("The user is building the user interface in React.", "I am building the user interface in React."),
        ("The username is bob; the user base grew.", "The username is bob; the user base grew."),
        ("Caroline went to a support group.", "Caroline went to a support group."),
    ],
    ids=["subject", "possessive", "object", "apposition", "after-verb", "two-clauses", "two-sentences",
         "bare-user", "user-interface", "not-the-user", "no-user"],
)  # fmt: skip
def test_what_is_written_of_the_user_is_embedded_in_their_voice(written: str, voiced: str) -> None:
    assert own_voice(written) == voiced


def test_every_record_written_of_the_user_is_embedded_in_their_voice_and_shown_as_written() -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    text = "The user's sister moved to Rome."
    fact = Fact.new(CTX, subject="user", text=text, now=at)
    entry = WorkingEntry(id="w-1", namespace="default", user_id="u-1", session_id="s-1", subject="user", text=text,
                         created_at=at, updated_at=at)  # fmt: skip
    episode = Episode(id="e-1", namespace="default", user_id="u-1", session_id="s-1", summary=text, started_at=at,
                      ended_at=at, created_at=at, updated_at=at)  # fmt: skip
    digest = Digest(id="d-1", namespace="default", user_id="u-1", text=text, created_at=at, updated_at=at)
    for record in (fact, entry, episode, digest):
        assert embedded_text(record) == "My sister moved to Rome."
    assert fact.text == entry.text == digest.text == episode.summary == text  # what is shown and searched by words
