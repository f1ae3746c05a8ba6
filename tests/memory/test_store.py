"""The LanceDB store: round trips per tier, reinforcement, scope isolation, embedder pinning, other processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiermem as memory
from tiermem import (
    Episode,
    Fact,
    HashingEmbedder,
    InvalidArgumentError,
    MemoryCapability,
    MemoryContext,
    Store,
    StoreMismatchError,
    create_memory_capability,
)
from tiermem.memory._filters import sql_timestamp
from tiermem.memory._store._store import MAX_FILTER_VALUE, sql_literal
from tiermem.memory.testing import FrozenClock, Where

ROOT = Path(memory.__file__).resolve().parent.parent


def _reopen(store_path: str, clock: FrozenClock) -> MemoryCapability:
    """A second capability on the same folder: reads come from disk, not from the first one's objects."""
    return create_memory_capability(store=store_path, embedder=HashingEmbedder(256), clock=clock)


def _episode(ctx: MemoryContext, clock: FrozenClock) -> Episode:
    now = clock.now()
    return Episode(
        id="ep-1",
        namespace=ctx.namespace,
        user_id=ctx.user_id,
        session_id="s-0",
        summary="The user planned a trip to Lisbon with Moni.",
        subjects=("user", "moni"),
        started_at=now - timedelta(hours=1),
        ended_at=now,
        created_at=now,
        updated_at=now,
        salience=0.7,
        provenance=("turn-1", "turn-2"),
        metadata={"turns": 2},
    )


Write = Callable[[MemoryCapability, MemoryContext, FrozenClock], Awaitable[Any]]
Read = Callable[[MemoryCapability, MemoryContext], Awaitable[Any]]


async def _write_working(cap: MemoryCapability, ctx: MemoryContext, clock: FrozenClock) -> Any:
    return [
        await cap.add_working_memory(
            ctx,
            "Moni prefers window seats.",
            subject="Moni",
            kind="preference",
            salience=0.9,
            seq=3,
            provenance=["turn-3"],
            metadata={"source": "test", "nested": {"a": [1, 2]}},
        )
    ]


async def _read_working(cap: MemoryCapability, ctx: MemoryContext) -> Any:
    return await cap.working_memory(ctx)


async def _write_fact(cap: MemoryCapability, ctx: MemoryContext, clock: FrozenClock) -> Any:
    fact = await cap.add_semantic_fact(
        ctx,
        "Moni is allergic to shellfish.",
        subject="Moni",
        confidence=0.9,
        provenance=["turn-1"],
        valid_from=clock.now() - timedelta(days=3),
        metadata={"source": "test"},
    )
    return [fact]


async def _read_facts(cap: MemoryCapability, ctx: MemoryContext) -> Any:
    return await cap.facts(ctx)


async def _write_episode(cap: MemoryCapability, ctx: MemoryContext, clock: FrozenClock) -> Any:
    return [await cap.add_episode(_episode(ctx, clock))]


async def _read_episodes(cap: MemoryCapability, ctx: MemoryContext) -> Any:
    return await cap.recent_episodes(ctx)


async def _write_digest(cap: MemoryCapability, ctx: MemoryContext, clock: FrozenClock) -> Any:
    return await cap.set_digest(ctx, "The user lives in Porto with his wife Moni.", provenance=["f1"])


async def _read_digest(cap: MemoryCapability, ctx: MemoryContext) -> Any:
    return await cap.latest_digest(ctx)


async def _write_alias(cap: MemoryCapability, ctx: MemoryContext, clock: FrozenClock) -> Any:
    alias = await cap.add_alias(ctx, "Caroline")
    return {alias.name: alias.subject}


async def _read_aliases(cap: MemoryCapability, ctx: MemoryContext) -> Any:
    return await cap.aliases(ctx)


ROUND_TRIPS: list[tuple[Write, Read]] = [
    (_write_working, _read_working),
    (_write_fact, _read_facts),
    (_write_episode, _read_episodes),
    (_write_digest, _read_digest),
    (_write_alias, _read_aliases),
]


@pytest.mark.parametrize(("write", "read"), ROUND_TRIPS, ids=["working", "semantic", "episodic", "digest", "alias"])
async def test_tier_round_trip(
    capability: MemoryCapability, ctx: MemoryContext, clock: FrozenClock, store_path: str, write: Write, read: Read
) -> None:
    written = await write(capability, ctx, clock)
    assert await read(capability, ctx) == written
    assert await read(_reopen(store_path, clock), ctx) == written


async def test_alias_round_trip_as_record(capability: MemoryCapability, ctx: MemoryContext) -> None:
    alias = await capability.add_alias(ctx, "Caroline", "user")
    assert capability.store.query("aliases", Where(eq=capability.tiers.scope(ctx))) == [alias]
    assert alias.name == "caroline" and alias.subject == "user"


async def test_digest_replaces_previous(capability: MemoryCapability, ctx: MemoryContext, clock: FrozenClock) -> None:
    first = await capability.set_digest(ctx, "First narrative.")
    clock.advance(days=1)
    second = await capability.set_digest(ctx, "Second narrative.")
    assert await capability.latest_digest(ctx) == second
    assert capability.store.count("digests") == 1
    assert second.created_at == first.created_at
    assert second.metadata["revision"] == 2


async def test_same_fact_twice_reinforces(capability: MemoryCapability, ctx: MemoryContext, clock: FrozenClock) -> None:
    first = await capability.add_semantic_fact(ctx, "Moni likes green tea.", subject="Moni", confidence=0.6)
    clock.advance(days=2)
    second = await capability.add_semantic_fact(
        ctx, "  moni likes GREEN tea. ", subject="moni", confidence=0.9, provenance=["t2"]
    )
    facts = await capability.facts(ctx)
    assert facts == [second]
    assert capability.store.count("facts") == 1
    assert second.id == first.id
    assert second.reinforcements == 1
    assert second.confidence == 0.9
    assert second.created_at == first.created_at
    assert second.reinforced_at == clock.now()
    assert second.text == first.text


async def test_same_text_other_subject_is_another_fact(capability: MemoryCapability, ctx: MemoryContext) -> None:
    await capability.add_semantic_fact(ctx, "Likes green tea.", subject="Moni")
    await capability.add_semantic_fact(ctx, "Likes green tea.", subject="user")
    facts = await capability.facts(ctx)
    assert sorted(f.subject for f in facts) == ["moni", "user"]
    assert {f.reinforcements for f in facts} == {0}


# -- scope isolation ------------------------------------------------------------------------------

HOSTILE_IDS = [
    "o'brien",
    "' OR '1'='1",
    "x' OR 1=1 --",
    "użytkownik-😀",
    "victim' --",
    "%",
    "\\'; DROP TABLE facts; --",
]
HOSTILE_NAMES = ["quote", "or-1-eq-1", "or-comment", "unicode", "prefix-comment", "percent", "drop-table"]
VICTIM_SECRET = "The vault code is 4711."


@pytest.mark.parametrize("field", ["user_id", "namespace"])
@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=HOSTILE_NAMES)
async def test_hostile_ids_only_see_their_own_rows(capability: MemoryCapability, field: str, hostile: str) -> None:
    victim = MemoryContext(namespace="default", user_id="victim", session_id="s-1")
    attacker = MemoryContext(**{"user_id": "victim", "session_id": hostile, field: hostile})
    await capability.add_semantic_fact(victim, VICTIM_SECRET)
    await capability.add_working_memory(victim, "The vault code was mentioned today.")
    own_fact = await capability.add_semantic_fact(attacker, "The vault code is unknown to me.")
    own_entry = await capability.add_working_memory(attacker, "Asked about the vault code.")

    assert await capability.facts(attacker) == [own_fact]
    assert await capability.working_memory(attacker) == [own_entry]
    found = await capability.recall(attacker, "vault code")
    assert {i.id for i in found} == {own_fact.id, own_entry.id}
    assert {i.id for i in await capability.recall(attacker, None)} == {own_fact.id, own_entry.id}
    assert [f.text for f in await capability.facts(victim)] == [VICTIM_SECRET]


@pytest.mark.parametrize("value", ["x" * 10_000, "u\x00victim"], ids=["10k-chars", "nul"])
def test_unusable_ids_are_rejected_before_any_query(value: str) -> None:
    with pytest.raises(ValueError):
        MemoryContext(user_id=value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "'plain'"),
        ("o'brien", "'o''brien'"),
        ("' OR '1'='1", "''' OR ''1''=''1'"),
        ("x' OR 1=1 --", "'x'' OR 1=1 --'"),
        ("użytkownik-😀", "'użytkownik-😀'"),
        ("", "''"),
    ],
    ids=["plain", "quote", "or-1-eq-1", "or-comment", "unicode", "empty"],
)
def test_sql_literal_escapes_quotes(value: str, expected: str) -> None:
    assert sql_literal(value) == expected


@pytest.mark.parametrize(
    "value",
    ["a\x00b", "x" * (MAX_FILTER_VALUE + 1), 1, None, b"bytes"],
    ids=["nul", "too-long", "int", "none", "bytes"],
)
def test_sql_literal_rejects(value: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        sql_literal(value)


@pytest.mark.parametrize(
    "where",
    [
        Where(eq={"user_id = 'x' OR 1=1 --": "x"}),
        Where(eq={"vector": "x"}),
        Where(eq={"user_id": "u"}, isin={"record": ["x"]}),
    ],
    ids=["injected-column", "vector-column", "record-column"],
)
def test_where_rejects_unknown_columns(where: Where) -> None:
    with pytest.raises(InvalidArgumentError):
        where.sql()


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (Where(eq={"user_id": "' OR '1'='1"}), "user_id = ''' OR ''1''=''1'"),
        (Where(eq={}, isin={"status": ["a'", "b"]}), "status IN ('a''', 'b')"),
        (Where(eq={"user_id": "u"}, isin={"status": []}), "false"),
        (Where(eq={}), "true"),
    ],
    ids=["quoted-eq", "quoted-isin", "empty-isin", "empty"],
)
def test_where_renders_safely(where: Where, expected: str) -> None:
    assert where.sql() == expected


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=HOSTILE_NAMES)
async def test_store_query_with_hostile_filter_matches_nothing(
    capability: MemoryCapability, ctx: MemoryContext, hostile: str
) -> None:
    await capability.add_semantic_fact(ctx, VICTIM_SECRET)
    assert capability.store.query("facts", Where(eq={"user_id": hostile})) == []
    assert capability.store.count("facts", Where(eq={"namespace": "default", "user_id": hostile})) == 0


# -- embedder pinning -----------------------------------------------------------------------------


def test_other_dimension_raises_store_mismatch(store_path: str, ctx: MemoryContext) -> None:
    first = create_memory_capability(store=store_path, embedder=HashingEmbedder(256))
    first.tiers.add_semantic_fact(ctx, "Moni is allergic to shellfish.")
    with pytest.raises(StoreMismatchError):
        create_memory_capability(store=store_path, embedder=HashingEmbedder(128))


@pytest.mark.parametrize(
    ("embedder_id", "dimensions"),
    [("hashing-v1-128", 128), ("another-embedder", 256), ("hashing-v1-256", 128)],
    ids=["other-dimension", "other-embedder-same-dimension", "same-id-other-dimension"],
)
def test_mismatch_is_refused_before_any_read_or_write(
    store_path: str, ctx: MemoryContext, embedder_id: str, dimensions: int
) -> None:
    first = create_memory_capability(store=store_path, embedder=HashingEmbedder(256))
    first.tiers.add_semantic_fact(ctx, "Moni is allergic to shellfish.")
    before = {"facts": first.store.version("facts"), "stats": first.store.stats()}
    with pytest.raises(StoreMismatchError, match=r"another store|same embedder"):
        Store(store_path, embedder_id=embedder_id, dimensions=dimensions)
    assert {"facts": first.store.version("facts"), "stats": first.store.stats()} == before
    assert [f.text for f in first.tiers.facts(ctx)] == ["Moni is allergic to shellfish."]


def test_table_written_with_another_schema_is_a_mismatch(store_path: str, ctx: MemoryContext) -> None:
    create_memory_capability(store=store_path, embedder=HashingEmbedder(256))  # pins the embedder in meta
    import lancedb  # only to forge an old-layout table, as a previous version of tiermem would have left it
    import pyarrow as pa

    old = pa.schema([pa.field(n, pa.string(), nullable=n != "id") for n in ("id", "namespace", "user_id", "record")])
    lancedb.connect(store_path).create_table("facts", schema=old)
    reopened = create_memory_capability(store=store_path, embedder=HashingEmbedder(256))
    with pytest.raises(StoreMismatchError):
        reopened.tiers.facts(ctx)


def test_same_embedder_reopens(store_path: str, ctx: MemoryContext) -> None:
    create_memory_capability(store=store_path, embedder=HashingEmbedder(256)).tiers.add_semantic_fact(ctx, "Tea.")
    again = create_memory_capability(store=store_path, embedder=HashingEmbedder(256))
    assert [f.text for f in again.tiers.facts(ctx)] == ["Tea."]


# -- other processes ------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from tiermem import HashingEmbedder, MemoryContext, create_memory_capability

    async def main(store: str, mode: str, text: str) -> None:
        cap = create_memory_capability(store=store, embedder=HashingEmbedder(256))
        ctx = MemoryContext(user_id="u-1", session_id="s-1")
        if mode == "write":
            await cap.add_semantic_fact(ctx, text)
        print(json.dumps({
            "facts": [f.text for f in await cap.facts(ctx)],
            "recall": [i.text for i in await cap.recall(ctx, text)],
        }))

    asyncio.run(main(*sys.argv[1:]))
    """
)


def _child(store_path: str, mode: str, text: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, store_path, mode, text],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def test_child_process_sees_parent_writes(
    capability: MemoryCapability, ctx: MemoryContext, store_path: str
) -> None:
    await capability.add_semantic_fact(ctx, "Moni is allergic to shellfish.")
    seen = _child(store_path, "read", "shellfish allergy")
    assert seen["facts"] == ["Moni is allergic to shellfish."]
    assert seen["recall"] == ["Moni is allergic to shellfish."]


async def test_parent_sees_child_writes_with_the_same_open_capability(
    capability: MemoryCapability, ctx: MemoryContext, store_path: str
) -> None:
    await capability.add_semantic_fact(ctx, "The user plays tennis on Sundays.")
    assert [i.text for i in await capability.recall(ctx, "tennis")] == ["The user plays tennis on Sundays."]
    child = _child(store_path, "write", "The user collects vintage typewriters.")
    assert "The user collects vintage typewriters." in child["facts"]
    assert sorted(f.text for f in await capability.facts(ctx)) == [
        "The user collects vintage typewriters.",
        "The user plays tennis on Sundays.",
    ]
    found = await capability.recall(ctx, "vintage typewriters")
    assert [i.text for i in found][:1] == ["The user collects vintage typewriters."]


def test_a_home_relative_store_path_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    store = Store("~/tiermem-store", embedder_id="hashing-256", dimensions=256)
    assert store.uri == str(tmp_path / "tiermem-store")
    assert (tmp_path / "tiermem-store").is_dir()
    assert not Path("~").exists()


# -- full-text cues are words, never query syntax -------------------------------------------------

FTS_SCOPE = {"namespace": "default", "user_id": "u-1"}
FTS_NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _fact(fact_id: str, text: str) -> Fact:
    return Fact(
        id=fact_id,
        namespace="default",
        user_id="u-1",
        subject="user",
        text=text,
        created_at=FTS_NOW,
        updated_at=FTS_NOW,
        reinforced_at=FTS_NOW,
    )


def _text_store(path: str) -> Store:
    store = Store(path, embedder_id="hashing-v1-8", dimensions=8)
    texts = ["The user moved to Lisbon in May.", "Moni plays tennis on Sundays."]
    store.upsert("facts", [_fact(f"f-{i}", text) for i, text in enumerate(texts)], np.ones((2, 8), dtype=np.float32))
    return store


@pytest.fixture
def text_store(store_path: str) -> Store:
    return _text_store(store_path)


@pytest.mark.parametrize(
    ("cue", "found"),
    [
        ('"Lisbon"', ["f-0"]),
        ('"moved to Lisbon', ["f-0"]),
        ("Lisbon AND (tennis", ["f-0", "f-1"]),
        ("NOT tennis OR", ["f-1"]),
        ("text:Lisbon", ["f-0"]),
        ("Lisbon^3 tennis~2", ["f-0", "f-1"]),
        ("\\Lisbon\\", ["f-0"]),
        ("😀 Lisbon 😀", ["f-0"]),
        ("+-*~^:()[]{}\"'\\", []),
        ("Lisbon " + "x" * 50_000, ["f-0"]),
        ("word " * 5_000 + "Lisbon", ["f-0"]),
        (" ".join(f"w{i}" for i in range(100)) + " Lisbon", []),
    ],
    ids=[
        "quoted-phrase",
        "unbalanced-quote",
        "operators-parens",
        "bare-operators",
        "field-prefix",
        "boost-fuzzy",
        "backslashes",
        "emoji",
        "only-syntax",
        "very-long-word",
        "many-repeated-words",
        "too-many-distinct-words",
    ],
)
def test_text_search_reads_any_cue_as_words(text_store: Store, cue: str, found: list[str]) -> None:
    hits = text_store.text_search("facts", cue, Where(eq=FTS_SCOPE), limit=5)
    assert sorted(h.record.id for h in hits) == found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cue=st.text(max_size=300))
def test_text_search_never_raises(text_store: Store, cue: str) -> None:
    hits = text_store.text_search("facts", cue, Where(eq=FTS_SCOPE), limit=5)
    assert {h.record.id for h in hits} <= {"f-0", "f-1"}


# -- insert if absent -----------------------------------------------------------------------------


def test_insert_absent_leaves_existing_ids_untouched(store_path: str) -> None:
    store = Store(store_path, embedder_id="hashing-v1-8", dimensions=8)
    vectors = np.ones((3, 8), dtype=np.float32)

    assert store.insert_absent("facts", [_fact("a", "first a"), _fact("b", "first b")], vectors[:2]) == 2
    assert (
        store.insert_absent("facts", [_fact("b", "second b"), _fact("c", "first c"), _fact("c", "again c")], vectors)
        == 1
    )
    assert store.insert_absent("facts", [], None) == 0
    assert {f.id: f.text for f in store.query("facts", Where(eq=FTS_SCOPE))} == {
        "a": "first a",
        "b": "first b",
        "c": "first c",
    }
    store.upsert("facts", [_fact("c", "one"), _fact("c", "two")], vectors[:2])  # of one id twice, the last wins
    assert [f.text for f in store.get("facts", Where(eq=FTS_SCOPE), ["c"])] == ["two"]
    assert store.count("facts") == 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2026, 3, 1, 9, 0, tzinfo=UTC), "TIMESTAMP '2026-03-01T09:00:00.000000Z'"),
        (
            datetime(2026, 3, 1, 10, 0, 0, 5, tzinfo=timezone(timedelta(hours=1))),
            "TIMESTAMP '2026-03-01T09:00:00.000005Z'",
        ),
    ],
    ids=["utc", "other-zone"],
)
def test_sql_timestamp_renders_utc(value: datetime, expected: str) -> None:
    assert sql_timestamp(value) == expected


@pytest.mark.parametrize("value", [datetime(2026, 3, 1), "2026-03-01", None], ids=["naive", "string", "none"])
def test_sql_timestamp_rejects(value: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        sql_timestamp(value)
