"""A store's recorded options against this version's models: fields added or removed since are no conflict."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tiermem import HashingEmbedder, RecallOptions, SemanticOptions, Store, create_memory_capability
from tiermem.memory._store._recorded import META_KEY

EMBEDDER = HashingEmbedder(64)


def _older_store(tmp_path: Path, record: dict[str, Any]) -> str:
    """A store whose options were recorded by an older tiermem: ``record`` as it wrote the meta row."""
    path = str(tmp_path / "store")
    Store(path, embedder_id=EMBEDDER.id, dimensions=EMBEDDER.dimensions).record_meta(META_KEY, json.dumps(record))
    return path


def _recorded_defaults(tmp_path: Path) -> dict[str, Any]:
    path = str(tmp_path / "reference")
    create_memory_capability(store=path, embedder=EMBEDDER)
    found: dict[str, Any] = json.loads(
        Store(path, embedder_id=EMBEDDER.id, dimensions=EMBEDDER.dimensions).meta()[META_KEY]
    )
    return found


def _without(record: dict[str, Any], *path: str) -> dict[str, Any]:
    """``record`` as a version without the field at ``path`` wrote it."""
    out: dict[str, Any] = json.loads(json.dumps(record))
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


# A field this version has and an older record lacks, at the top of a tier's options and nested.
MISSING = [("recall", "replied_weight"), ("semantic", "max_facts"), ("semantic", "relations", "max_edges")]
MISSING_IDS = ["recall-field", "tier-field", "nested-field"]


@pytest.mark.parametrize("missing", MISSING, ids=MISSING_IDS)
def test_a_field_added_since_the_record_is_no_conflict(
    missing: tuple[str, ...], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = _without(_recorded_defaults(tmp_path), *missing)
    store = _older_store(tmp_path, record)

    with caplog.at_level(logging.WARNING, logger="tiermem"):
        explicit = create_memory_capability(
            store=store, embedder=EMBEDDER, semantic=SemanticOptions(), recall=RecallOptions()
        )
        unset = create_memory_capability(store=store, embedder=EMBEDDER)

    assert explicit.option_conflicts == [] and unset.option_conflicts == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert unset.recall_options == RecallOptions()  # the missing field takes the model's default
    assert unset.tiers.semantic == SemanticOptions()


def test_a_field_removed_since_the_record_is_ignored(tmp_path: Path) -> None:
    record = _recorded_defaults(tmp_path)
    record["recall"]["retired_weight"] = 0.7
    record["semantic"]["relations"]["retired_switch"] = True
    store = _older_store(tmp_path, record)

    assert create_memory_capability(store=store, embedder=EMBEDDER).recall_options == RecallOptions()
    assert create_memory_capability(store=store, embedder=EMBEDDER, recall=RecallOptions()).option_conflicts == []


def test_an_added_field_set_otherwise_than_its_default_is_a_conflict(tmp_path: Path) -> None:
    """A record without the field means its default: that is what an unset option uses on this store."""
    store = _older_store(tmp_path, _without(_recorded_defaults(tmp_path), "recall", "replied_weight"))

    explicit = create_memory_capability(store=store, embedder=EMBEDDER, recall={"replied_weight": 0.9})

    assert explicit.recall_options.replied_weight == 0.9
    assert explicit.option_conflicts == [
        f'recall: the store {store!r} was created with {{"replied_weight": 0.15}}, '
        'this process uses {"replied_weight": 0.9}'
    ]


def test_a_conflict_names_only_the_fields_that_differ(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    create_memory_capability(store=store, embedder=EMBEDDER, semantic={"relations": True, "max_facts": 500})

    explicit = create_memory_capability(store=store, embedder=EMBEDDER, semantic={"max_facts": 500}, digest=False)

    assert explicit.option_conflicts == [
        f"semantic: the store {store!r} was created with "
        '{"relations": {"create_implicit_entities": false, "enabled": true, "max_edges": 500, "vocabulary": null}}, '
        'this process uses {"relations": {"create_implicit_entities": false, "enabled": false, "max_edges": 500, '
        '"vocabulary": null}}',
        f'digest: the store {store!r} was created with {{"max_facts": 60}}, this process uses false',
    ]
