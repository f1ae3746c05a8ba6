"""Graph-expanded recall: entities named in the cue bring their edges and their neighbours' facts.

The store is seeded through the public typed helpers (``add_semantic_fact_sync``, ``put_edges_sync``)
once per module and copied per test; recall runs on a capability opened over the copy with
relations on or off, so "off" sees exactly the same rows.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tiermem import (
    Edge,
    MemoryCapability,
    MemoryContext,
    RankedMemoryItem,
    RecallOptions,
    create_memory_capability,
    system,
)
from tiermem.memory._identity import edge_id
from tiermem.memory._recall._relevance import calibration
from tiermem.memory.testing import FrozenClock, HashingEmbedder

# litellm builds a pydantic adapter for a TypedDict with ReadOnly items on its first completion;
# pyproject's filterwarnings=error turns that third-party UserWarning into a failed model call.
pytestmark = pytest.mark.filterwarnings("ignore:Item.*using the `ReadOnly` qualifier:UserWarning")

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CTX = MemoryContext(user_id="u-1", session_id="s-1")
QUERY = "What is new with Moni?"
TOM_FACT = "Tom collects vintage stamps."
MONI_FACT = "Moni started a pottery class."
# Unrelated to QUERY under the hashing embedder in the user's voice too ("I paints ...": recipe 3 embeds that)
USER_FACT = "The user paints landscapes."
IVY_FACT = "Ivy collects antique coins."  # a person with no edges: never reached through the graph
MARRIED = "user --married to--> moni"
SIBLING = "moni --sibling of--> tom"


def edge(source: str, relation: str, target: str, *, confidence: float = 0.8) -> Edge:
    return Edge(
        id=edge_id(CTX, source=source, relation=relation, target=target),
        namespace=CTX.namespace,
        user_id=CTX.user_id,
        source=source,
        relation=relation,
        target=target,
        confidence=confidence,
        created_at=START,
        updated_at=START,
    )


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """user -married to-> moni, moni -sibling of-> tom; one fact each for moni, tom, user and ivy."""
    path = tmp_path_factory.mktemp("graph-recall") / "store"
    writer = create_memory_capability(
        store=str(path), embedder=HashingEmbedder(256), clock=FrozenClock(START), semantic={"relations": True}
    )
    for subject, text in [("moni", MONI_FACT), ("tom", TOM_FACT), ("user", USER_FACT), ("ivy", IVY_FACT)]:
        writer.tiers.add_semantic_fact(CTX, text, subject=subject)
    writer.relations.put_edges(CTX, [edge("user", "married to", "moni"), edge("moni", "sibling of", "tom")])
    return path


def open_copy(
    seeded: Path, store_path: str, embedder: HashingEmbedder, clock: FrozenClock, on: bool
) -> MemoryCapability:
    shutil.copytree(seeded, store_path)
    return create_memory_capability(store=store_path, embedder=embedder, clock=clock, semantic={"relations": on})


@pytest.fixture(params=[True, False], ids=["relations-on", "relations-off"])
def on(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def mem(seeded: Path, store_path: str, embedder: HashingEmbedder, clock: FrozenClock, on: bool) -> MemoryCapability:
    return open_copy(seeded, store_path, embedder, clock, on)


def texts(items: list[RankedMemoryItem], tier: str) -> set[str]:
    return {i.text for i in items if i.tier == tier}


def test_precondition_tom_fact_is_unrelated_to_the_query(embedder: HashingEmbedder) -> None:
    """Without the graph nothing links the fact to the cue: no shared word, and a similarity below the
    meaning gate (what the best of the store's four facts would reach were they all unrelated)."""
    query, fact = embedder.embed([QUERY, TOM_FACT])
    calibrated = calibration(embedder)
    assert words(QUERY) & words(TOM_FACT) == set()
    similarity = float(calibrated.similarity(calibrated.query(query), fact)[0])
    assert similarity < calibrated.threshold(4, RecallOptions().unrelated_rate)


async def test_neighbour_fact_surfaces_only_through_the_graph(mem: MemoryCapability, on: bool) -> None:
    found = await mem.recall(CTX, QUERY)
    semantic = texts(found, "semantic")
    assert MONI_FACT in semantic  # the named entity's own fact, found by keyword either way
    assert (TOM_FACT in semantic) is on
    assert (USER_FACT in semantic) is on
    assert IVY_FACT not in semantic


async def test_recall_tool_surfaces_the_neighbour_fact(mem: MemoryCapability, on: bool) -> None:
    envelope = await mem.tools(CTX).get("memory_recall").call({"query": QUERY})  # type: ignore[union-attr]
    assert envelope["ok"] is True
    assert (TOM_FACT in {r["text"] for r in envelope["results"]}) is on


async def test_named_entity_edges_join_as_relation_items(mem: MemoryCapability, on: bool) -> None:
    found = await mem.recall(CTX, QUERY)
    assert texts(found, "relation") == ({MARRIED, SIBLING} if on else set())
    relations = [i for i in found if i.tier == "relation"]
    assert all(i.metadata["source"] in {"user", "moni"} and i.relevance > 0 for i in relations)


async def test_graph_item_ranks_below_a_direct_match(
    seeded: Path, store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    mem = open_copy(seeded, store_path, embedder, clock, True)
    found = [i.text for i in await mem.recall(CTX, QUERY)]
    assert found.index(MONI_FACT) < found.index(TOM_FACT)


async def test_display_name_alias_in_the_cue_expands_the_user(
    seeded: Path, store_path: str, embedder: HashingEmbedder, clock: FrozenClock, on: bool
) -> None:
    mem = open_copy(seeded, store_path, embedder, clock, on)
    await mem.add_alias(CTX, "Sam", "user")
    found = await mem.recall(CTX, "How is Sam doing?")
    assert (MONI_FACT in texts(found, "semantic")) is on
    assert texts(found, "relation") == ({MARRIED} if on else set())


@pytest.mark.parametrize(
    ("cue", "kwargs"),
    [
        ("vintage stamps", {}),
        (QUERY, {"subject": "moni"}),
        (QUERY, {"tiers": ["episodic", "working"]}),
        ("What is new with Zed?", {}),
    ],
    ids=["no-entity-named", "subject-filter", "semantic-tier-not-searched", "unknown-entity"],
)
async def test_no_expansion(
    seeded: Path, store_path: str, embedder: HashingEmbedder, clock: FrozenClock, cue: str, kwargs: dict[str, Any]
) -> None:
    mem = open_copy(seeded, store_path, embedder, clock, True)
    found = await mem.recall(CTX, cue, **kwargs)
    assert texts(found, "relation") == set()
    assert USER_FACT not in texts(found, "semantic")


async def test_expansion_reads_a_new_edge_at_once(
    seeded: Path, store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    mem = open_copy(seeded, store_path, embedder, clock, True)
    assert IVY_FACT not in texts(await mem.recall(CTX, QUERY), "semantic")  # the graph is cached now
    mem.relations.put_edges(CTX, [edge("ivy", "friend of", "moni")])
    found = await mem.recall(CTX, QUERY)
    assert IVY_FACT in texts(found, "semantic")
    assert "ivy --friend of--> moni" in texts(found, "relation")


async def test_format_context_has_the_relations(mem: MemoryCapability, on: bool) -> None:
    block = await mem.format_context(CTX, QUERY)
    assert ('title="Relations"' in block) is on
    assert ("user --married to--&gt; moni" in block) is on  # the block escapes markup
    assert (TOM_FACT in block) is on


async def test_rules_model_end_to_end(store_path: str, embedder: HashingEmbedder, clock: FrozenClock, on: bool) -> None:
    """Captured by the rules model; the user's own fact is reached from Moni through "married to"."""
    mem = system(model="rules", store=store_path, embedder=embedder, clock=clock, semantic={"relations": on})
    await mem.capture(CTX, [{"role": "user", "content": "My wife Moni loves hiking. I collect vintage stamps."}])
    await mem.end_session(CTX)
    await mem.consolidate(CTX)
    found = await asyncio.to_thread(mem.recall_sync, CTX, QUERY, tiers=["semantic"])
    semantic = texts(found, "semantic")
    assert any("Moni" in t and "hiking" in t for t in semantic)
    assert any("stamps" in t for t in semantic) is on
