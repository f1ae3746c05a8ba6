"""Id recipes: one home (``tiermem.memory._identity``), and values frozen, since stored records are found by them."""

from __future__ import annotations

import ast
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tiermem import Fact, MemoryContext, Message, Turn
from tiermem.memory import _identity as ids

CTX = MemoryContext(user_id="u-1", session_id="s-1")
NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TURN = Turn(id="turn_x", namespace="default", user_id="u-1", session_id="s-1", seq=0, created_at=NOW,
            messages=(Message(role="user", content="hi"),))  # fmt: skip

# Computed with the recipes as they were before they moved here (blake2b-128 of the "\x1f"-joined parts).
FROZEN: dict[str, tuple[Callable[[], str], str]] = {
    "turn": (lambda: ids.turn_id(CTX, session_id="s-1", key="k-3"), "turn_ada5443a1c25055ded1ca9a5ab1fd366"),
    "observation": (lambda: ids.observation_id(TURN, index=2), "wm_6558bc65ac449c89f0d14bfb7795b63c"),
    "working-entry": (
        lambda: ids.working_entry_id(CTX, session_id="s-1", subject="moni", text="Moni likes  Jazz."),
        "wm_0e6064d005e31861dc5615de27a37a35",
    ),
    "episode": (lambda: ids.episode_id(CTX, session_id="s-1"), "ep_0cb1c3e5843edd5e209d5ef1ab3be648"),
    "fact": (
        lambda: ids.fact_id(CTX, subject="user", text="The user  likes TEA."),
        "fact_e13ed1ab198f83b2f1b8d62515c4476f",
    ),
    "edge": (
        lambda: ids.edge_id(CTX, source="user", relation="married to", target="moni"),
        "edge_5edf5fb4e8cc10161a70a2bb69c19bd4",
    ),
    "digest": (lambda: ids.digest_id(CTX), "digest_4033c4245c2e0513bc785ee325ae18a3"),
    "alias": (lambda: ids.alias_id(CTX, name="caroline"), "alias_7eaa3edd540095bedf4ae7c84684647f"),
    # Computed when documents landed (2026-12-04): a re-ingest finds its document and chunks by them.
    "document": (
        lambda: ids.document_id(CTX, content="c0ffee", chunking="md-256-32"),
        "doc_e5a7bd9781fe5ab9fafb65e0883f9ae4",
    ),
    "chunk": (lambda: ids.chunk_id(CTX, document_id="doc_x", index=3), "chunk_f2d202c7fb4eb0e336647738a7096592"),
}


@pytest.mark.parametrize("kind", list(FROZEN), ids=list(FROZEN))
def test_id_recipes_are_frozen(kind: str) -> None:
    make, expected = FROZEN[kind]
    assert make() == expected


def test_every_record_kind_has_its_recipe() -> None:
    recipes = {name for name in ids.__all__ if name.endswith("_id")}
    assert recipes == {
        "alias_id", "chunk_id", "digest_id", "document_id", "edge_id", "episode_id", "fact_id", "observation_id",
        "turn_id", "working_entry_id",
    }  # fmt: skip


def test_fact_id_ignores_case_and_spacing_but_not_subject() -> None:
    same = ids.fact_id(CTX, subject="user", text="the user likes tea.")
    assert ids.fact_id(CTX, subject="user", text="  The USER likes   tea. ") == same
    assert ids.fact_id(CTX, subject="moni", text="the user likes tea.") != same
    assert (
        ids.fact_id(CTX.model_copy(update={"namespace": "other"}), subject="user", text="the user likes tea.") != same
    )


def test_fact_set_fingerprint_changes_with_any_version() -> None:
    a = Fact.new(CTX, subject="user", text="The user likes tea.", now=NOW)
    b = Fact.new(CTX, subject="user", text="The user likes jazz.", now=NOW)
    later = a.model_copy(update={"updated_at": NOW + timedelta(seconds=1)})

    assert ids.fact_set_fingerprint([a, b]) == ids.fact_set_fingerprint([b, a])
    assert ids.fact_set_fingerprint([later, b]) != ids.fact_set_fingerprint([a, b])
    assert ids.fact_set_fingerprint([a]) != ids.fact_set_fingerprint([a, b])


def test_fact_new_builds_an_active_fact_with_its_id() -> None:
    fact = Fact.new(CTX, subject="moni", text="Moni likes jazz.", now=NOW, provenance=["turn_1"], metadata={"k": 1})

    assert fact.id == ids.fact_id(CTX, subject="moni", text="Moni likes jazz.")
    assert (fact.namespace, fact.user_id, fact.status, fact.reinforcements) == ("default", "u-1", "active", 0)
    assert fact.created_at == fact.updated_at == fact.reinforced_at == NOW
    assert (fact.provenance, fact.metadata, fact.valid_from) == (("turn_1",), {"k": 1}, None)


def _calls(tree: ast.AST, names: set[str]) -> list[int]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in names:
                found.append(node.lineno)
    return found


SOURCES = sorted(
    p
    for folder in ("memory", "pipelines", "jobs", "prompts")
    for p in (Path(__file__).resolve().parents[2] / folder).rglob("*.py")
)


@pytest.mark.parametrize("path", SOURCES, ids=[f"{p.parent.name}/{p.name}" for p in SOURCES])
def test_only_the_identity_module_hashes_ids_and_only_fact_new_builds_a_fact(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if path.name != "_identity.py":
        assert _calls(tree, {"blake2b", "stable_id", "_stable_id"}) == [], "build ids with tiermem.memory._identity"
    if path.name != "_records.py":
        assert _calls(tree, {"Fact"}) == [], "build facts with Fact.new(...)"
