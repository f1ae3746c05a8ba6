"""Recall's fast path: items built without model_construct's loop, filter masks kept per block, and BLAS chunks.

What it keeps between recalls (parsed records, masks) must never leak a caller's change into the next
recall, and must follow every write, this process's or another's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
import pytest

from tiermem import Fact, HashingEmbedder, MemoryContext, MemoryItem, RankedMemoryItem, Store, create_memory_capability
from tiermem.memory._index import _products, _vectors
from tiermem.memory._tiers._memory_items import built
from tiermem.memory.testing import FrozenClock, Where

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DIMS = 8
SCOPE = {"namespace": "default", "user_id": "u-1"}
TEXTS = [
    "The user moved to Lisbon in May.",
    "Moni plays tennis on Sundays.",
    "The user went hiking with Moni near Lisbon.",
    "Tennis lessons start again in September.",
]


def _fact(
    fact_id: str,
    text: str,
    *,
    subject: str = "user",
    status: Literal["active", "superseded", "archived"] = "active",
    metadata: dict[str, Any] | None = None,
) -> Fact:
    return Fact(
        id=fact_id,
        namespace="default",
        user_id="u-1",
        subject=subject,
        text=text,
        status=status,
        created_at=NOW,
        updated_at=NOW,
        reinforced_at=NOW,
        metadata=metadata or {},
    )


def _write(store: Store, facts: list[Fact], seed: int = 0) -> None:
    vectors = np.random.default_rng(seed).standard_normal((len(facts), DIMS)).astype(np.float32)
    store.upsert("facts", facts, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


@pytest.fixture
def store(store_path: str) -> Store:
    store = Store(store_path, embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS)
    _write(store, [_fact(f"f-{i}", t, subject="moni" if "Moni" in t else "user") for i, t in enumerate(TEXTS)])
    return store


# -- items ----------------------------------------------------------------------------------

VALUES: dict[str, Any] = {
    "id": "f-1",
    "tier": "semantic",
    "subject": "user",
    "text": "The user moved to Lisbon.",
    "confidence": 0.7,
    "created_at": NOW,
    "updated_at": NOW + timedelta(days=1),
    "provenance": ("t-1", "t-2"),
    "metadata": {"status": "active", "labels": ["a"]},
}


@pytest.mark.parametrize(
    ("cls", "extra"),
    [(MemoryItem, {}), (RankedMemoryItem, {"score": 0.5, "relevance": 0.25})],
    ids=["item", "ranked"],
)
def test_built_items_equal_constructed_ones(cls: type[MemoryItem], extra: dict[str, Any]) -> None:
    # The shortcut is model_construct for these classes only while they have no aliases, post-init or private state.
    assert not cls.__pydantic_post_init__ and not cls.__private_attributes__
    assert all(f.alias is None and f.validation_alias is None for f in cls.model_fields.values())
    made, constructed = built(cls, **VALUES, **extra), cls.model_construct(**VALUES, **extra)
    assert made == constructed
    assert made.model_fields_set == constructed.model_fields_set
    assert made.model_dump_json() == constructed.model_dump_json()
    assert list(made.model_dump()) == list(cls.model_fields)
    copied = made.model_copy(update={"confidence": 0.1})
    assert copied.confidence == 0.1 and made.confidence == 0.7
    with pytest.raises(ValueError, match="frozen"):
        made.text = "changed"  # type: ignore[misc]


async def test_a_callers_change_to_a_recalled_item_never_reaches_the_next_recall(
    store_path: str, clock: FrozenClock
) -> None:
    cap = create_memory_capability(store=store_path, embedder=HashingEmbedder(64), clock=clock)
    ctx = MemoryContext(user_id="u-1")
    cap.tiers.add_semantic_fact(ctx, "The user moved to Lisbon in May.", metadata={"labels": ["move"]})
    cap.tiers.add_semantic_fact(ctx, "The user plays tennis in Lisbon.")
    first = await cap.recall(ctx, "Lisbon", limit=5, tiers=["semantic"])
    expected = [item.model_dump() for item in first]
    assert any(item.metadata.get("labels") == ["move"] for item in first)
    for item in first:  # the parsed records stay cached between recalls: change everything reachable
        item.metadata.setdefault("labels", []).append("changed")
        item.metadata["status"] = "changed"
    again = await cap.recall(ctx, "Lisbon", limit=5, tiers=["semantic"])
    assert [item.model_dump() for item in again] == expected


# -- filter masks ---------------------------------------------------------------------------

WHERES = [
    Where(eq=SCOPE),
    Where(eq=SCOPE, isin={"status": ["active"]}),
    Where(eq={**SCOPE, "subject": "moni"}, isin={"status": ["active", "superseded"]}),
    Where(eq=SCOPE, isin={"id": ["f-0", "f-2"]}, ne={"subject": "moni"}),
    Where(eq=SCOPE, isin={"id": [f"f-{i}" for i in range(100)]}),  # too many values to keep
]
WHERE_IDS = ["user", "active", "subject", "ids-and-ne", "many-ids"]


def _block(store: Store) -> _vectors.VectorBlock:
    store.vector_search("facts", np.ones(DIMS, dtype=np.float32), Where(eq=SCOPE), limit=1)
    block = store._vectors.peek(("facts", "default", "u-1"))
    assert block is not None
    return block


def _rest(where: Where) -> dict[str, str]:
    return {k: v for k, v in where.eq.items() if k not in SCOPE}


def test_kept_masks_are_what_the_filters_select(store: Store) -> None:
    block = _block(store)
    fresh = [block._tested(_rest(w), w.isin or {}, w.ne or {}).copy() for w in WHERES]
    for _ in range(2):  # kept, then served again; more scopes than kept, so some are dropped on the way
        for where in [*WHERES, *reversed(WHERES)]:
            keep = block.mask(_rest(where), where.isin or {}, where.ne or {})
            assert np.array_equal(keep, fresh[WHERES.index(where)])
    assert 0 < len(block.masks) <= _vectors._MASKS


@pytest.mark.parametrize("where", WHERES, ids=WHERE_IDS)
def test_a_mask_is_read_only(store: Store, where: Where) -> None:
    keep = _block(store).mask(_rest(where), where.isin or {}, where.ne or {})
    with pytest.raises(ValueError, match="read-only"):
        keep[0] = not keep[0]


def _found(store: Store, where: Where) -> set[str]:
    text = {h.record.id for h in store.text_search("facts", "Lisbon tennis Moni", where, limit=10)}
    vector = {h.record.id for h in store.vector_search("facts", np.ones(DIMS, dtype=np.float32), where, limit=10)}
    assert text <= vector  # every row is a vector hit at this limit: the words only narrow it
    return vector


@pytest.mark.parametrize("writer", ["this-process", "another-process"])
def test_masks_follow_writes(store_path: str, store: Store, writer: str) -> None:
    active = Where(eq=SCOPE, isin={"status": ["active"]})
    assert _found(store, active) == {"f-0", "f-1", "f-2", "f-3"}  # the mask of this scope is kept now
    other = store if writer == "this-process" else Store(store_path, embedder_id=f"hashing-v1-{DIMS}", dimensions=DIMS)
    _write(other, [_fact("f-0", TEXTS[0], status="archived"), _fact("f-9", "Lisbon trams are yellow.")], seed=1)
    assert _found(store, active) == {"f-1", "f-2", "f-3", "f-9"}
    assert _found(store, Where(eq=SCOPE)) == {"f-0", "f-1", "f-2", "f-3", "f-9"}


# -- vector products ------------------------------------------------------------------------


@pytest.mark.parametrize("dims", [384, 768, 1024], ids=["384", "768", "1024"])
def test_a_chunk_stays_under_the_blas_threading_threshold(dims: int) -> None:
    # OpenBLAS runs an sgemv of fewer than 115,200 x 4 elements on the calling thread (see PRODUCT).
    step = max(_products.ROWS, _products.PRODUCT // dims // _products.ROWS * _products.ROWS)
    assert step * dims < 115_200 * 4
