"""The dependency rule, every clause checked by AST over the sources (see tests/sources.py).

``tiermem.memory`` is a root of shared vocabulary (records, errors, ids, text, options: the modules at
its top) and private folders, one per concern. The parts, bottom up::

    vocabulary  tiermem.memory's own modules: the standard library, pydantic, numpy and each other
    _index      in-process indexes of one user's rows (vectors, words, parsed records)
    _store      the LanceDB adapter                      _llm    the litellm adapter
    _embed      embedders                                _tiers  the tiers over the store
    _relations  the relations graph                      _recall search, ranking, the context block
    _govern     list/history/forget/erase/export         _read   the capability (the read side)
    prompts, pipelines                                   jobs    scheduled work
    _write      the composition root: the only part importing pipelines and jobs
    _rest       the REST server's app (FastAPI), run by ``tiermem serve``
    _adapters   framework adapters (LangGraph, the Agents SDK, Pydantic AI), each importing its framework
    _cli        the command line, the demo and the MCP server
    facade      tiermem/__init__.py

:data:`MAY_IMPORT` says which parts each part may import; every import counts, at module level, in a
function (lazy) or under ``if TYPE_CHECKING:``, except where :data:`TYPE_ONLY` allows a type-only one.
The table is a DAG, so no import cycle can pass between parts; within a part, the cycle test counts
every import too. Another folder is entered only through its front door (``from .._store import Store``,
never ``from .._store._tables import ...``), so a folder's modules can move without touching its users.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.sources import FACADE, MODULES, REPO, STDLIB, Module, imports_in, ours

MEMORY = "tiermem.memory"
FOLDERS = (
    "_index", "_store", "_llm", "_embed", "_tiers", "_relations", "_recall", "_govern", "_read", "_write", "_rest",
    "_cli", "_documents", "_adapters",
)  # fmt: skip
# What each part may import (besides itself), bottom up.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "vocabulary": frozenset(),
    "_index": frozenset({"vocabulary"}),
    "_store": frozenset({"vocabulary", "_index"}),
    "_llm": frozenset({"vocabulary"}),
    "_documents": frozenset({"vocabulary"}),
    "_embed": frozenset({"vocabulary", "_store", "_llm"}),
    "_tiers": frozenset({"vocabulary", "_store", "_embed"}),
    "_relations": frozenset({"vocabulary", "_tiers"}),
    "_recall": frozenset({"vocabulary", "_index", "_store", "_tiers", "_relations"}),
    "_govern": frozenset({"vocabulary", "_store", "_embed", "_tiers"}),
    "_read": frozenset({"vocabulary", "_store", "_embed", "_tiers", "_relations", "_recall", "_govern"}),
    "prompts": frozenset({"vocabulary"}),
    "pipelines": frozenset({"vocabulary", "prompts"}),
    "jobs": frozenset({"vocabulary", "_store", "_tiers", "_relations", "_read", "pipelines"}),
    "_write": frozenset(
        {
            "vocabulary",
            "_store",
            "_llm",
            "_embed",
            "_tiers",
            "_recall",
            "_govern",
            "_read",
            "_documents",
            "pipelines",
            "jobs",
        }
    ),
    "testing": frozenset({"vocabulary", "_store", "_embed", "_llm", "prompts"}),
    "_rest": frozenset({"vocabulary", "_govern", "_read", "_write"}),
    "_adapters": frozenset({"vocabulary", "_write"}),
    "_cli": frozenset({"vocabulary", "_store", "_embed", "_tiers", "_govern", "_read", "_write", "_rest", "testing"}),
    FACADE: frozenset({"vocabulary", *FOLDERS}) - {"_index", "_rest", "_cli"},
}
# Imports that never run: the stage model names the LLM's type, and nothing more of it.
TYPE_ONLY: dict[str, frozenset[str]] = {"pipelines": frozenset({"_llm"})}
# The leaf modules the issue names; each must be vocabulary.
CORE_LEAVES = ("records", "options", "subjects", "errors")
# Libraries every layer may speak: vocabulary, not engines.
VOCABULARY = frozenset({"pydantic", "numpy"})
# Each engine is imported in exactly one home, a folder or a module, where its exceptions become ours.
# Engines not listed are held to one home too.
ENGINE_HOMES = {
    "lancedb": f"{MEMORY}._store",
    "pyarrow": f"{MEMORY}._store",
    "litellm": f"{MEMORY}._llm",
    "click": f"{MEMORY}._cli",
    "fastapi": f"{MEMORY}._rest",
    "starlette": f"{MEMORY}._rest",
    "networkx": f"{MEMORY}._relations._graph",
    "apscheduler": "tiermem.jobs._scheduler",
    "model2vec": f"{MEMORY}._embed",
    "sentence_transformers": f"{MEMORY}._embed",
    "onnxruntime": f"{MEMORY}._embed",
    "markdown_it": f"{MEMORY}._documents._markdown",
    "pypdf": f"{MEMORY}._documents._pdf",
    "langgraph": f"{MEMORY}._adapters._langgraph",
    "agents": f"{MEMORY}._adapters._agents",
    "pydantic_ai": f"{MEMORY}._adapters._pydantic_ai",
}
OLD_TOP_LEVEL = frozenset({"memory", "pipelines", "jobs", "prompts"})


def part(name: str) -> str:
    """The part a module of ours belongs to: a folder of ``tiermem.memory``, its vocabulary, or a package."""
    parts = name.split(".")
    if len(parts) == 1:
        return FACADE
    if parts[1] != "memory":
        return parts[1]
    if len(parts) == 2:
        return "vocabulary"
    if parts[2] == "testing":
        return "testing"
    return parts[2] if parts[2] in FOLDERS else "vocabulary"


def _params(modules: Iterable[Module]) -> list[Any]:
    return [pytest.param(m, id=m.shown) for m in sorted(modules, key=lambda m: m.name)]


def test_scan_sees_every_part() -> None:
    assert {m.package for m in MODULES.values()} == {FACADE, "memory", "pipelines", "jobs", "prompts"}
    assert {part(name) for name in MODULES} == set(MAY_IMPORT)
    assert all(f"{MEMORY}.{folder}" in MODULES for folder in FOLDERS), "a folder moved: update FOLDERS"
    assert {f"{MEMORY}._records", f"{MEMORY}._write"} <= {i.name for i in MODULES[FACADE].imports}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(f"{MEMORY}._index._vectors", "_index", id="folder-module"),
        pytest.param(f"{MEMORY}._store", "_store", id="front-door"),
        pytest.param(f"{MEMORY}._records", "vocabulary", id="vocabulary"),
        pytest.param(f"{MEMORY}.testing", "testing", id="testing"),
        pytest.param("tiermem.jobs._scheduler", "jobs", id="package"),
    ],
)
def test_a_modules_part_is_its_folder(name: str, expected: str) -> None:
    assert part(name) == expected


def test_the_parts_form_a_dag() -> None:
    """Bottom up order exists: so no cycle can pass from one part to another."""
    order: list[str] = []
    remaining = dict(MAY_IMPORT)
    while remaining:
        ready = sorted(p for p, deps in remaining.items() if deps <= set(order))
        assert ready, f"the parts import each other in a cycle: {sorted(remaining)}"
        order += ready
        for p in ready:
            del remaining[p]


@pytest.mark.parametrize("module", _params(MODULES.values()))
def test_each_module_imports_only_the_parts_below_it(module: Module) -> None:
    own = part(module.name)
    allowed = MAY_IMPORT[own] | {own}
    type_only = TYPE_ONLY.get(own, frozenset())
    assert not [
        f"{module.shown}:{i.line} imports {i.name} ({part(i.name)})"
        for i in module.imports
        if ours(i.name) and part(i.name) not in allowed and not (i.type_only and part(i.name) in type_only)
    ]


@pytest.mark.parametrize("module", _params(MODULES.values()))
def test_other_folders_are_entered_through_their_front_door(module: Module) -> None:
    """``from .._store import Store``: a folder's modules are its own; the tests may reach in, the library not."""
    own = part(module.name)
    assert not [
        f"{module.shown}:{i.line} imports {i.name}"
        for i in module.imports
        if ours(i.name) and part(i.name) in FOLDERS and part(i.name) != own and i.name != f"{MEMORY}.{part(i.name)}"
    ]


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_front_door_exports_what_it_imports(folder: str) -> None:
    module = MODULES[f"{MEMORY}.{folder}"]
    assert all(i.name.startswith(f"{MEMORY}.{folder}.") for i in module.imports if ours(i.name)), module.shown


@pytest.mark.parametrize("concept", CORE_LEAVES)
def test_core_leaf_is_vocabulary(concept: str) -> None:
    found = [m for m in MODULES.values() if m.name == f"{MEMORY}._{concept}"]
    assert len(found) == 1
    assert part(found[0].name) == "vocabulary"


def test_vocabulary_speaks_only_the_standard_library_and_the_shared_libraries() -> None:
    """The root of tiermem.memory (and its package init) imports no engine: importing a record is cheap."""
    vocabulary = [m for m in MODULES.values() if part(m.name) == "vocabulary"]
    assert f"{MEMORY}" in {m.name for m in vocabulary}
    assert not [
        f"{m.shown}:{i.line} imports {i.name}"
        for m in vocabulary
        for i in m.imports
        if not ours(i.name) and i.top not in STDLIB and i.top not in VOCABULARY
    ]


@pytest.mark.parametrize("module", _params(m for m in MODULES.values() if m.name != FACADE))
def test_no_module_imports_the_facade(module: Module) -> None:
    """``tiermem`` imports every layer; a module importing it back (``from tiermem import X``) makes a cycle."""
    assert not [f"{module.shown}:{i.line}" for i in module.imports if i.name == FACADE]


def _graph() -> dict[str, set[str]]:
    """Every import between our modules (module level, lazy and type-only), and the packages it passes through."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for module in MODULES.values():
        parts = module.name.split(".")
        own_ancestors = {".".join(parts[:n]) for n in range(1, len(parts))}
        for i in module.imports:
            if not ours(i.name):
                continue
            target = i.name.split(".")
            passes = {".".join(target[:n]) for n in range(1, len(target) + 1)}
            graph[module.name] |= {p for p in passes if p in MODULES and p not in own_ancestors and p != module.name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    return cycles


def test_no_import_cycle_counting_lazy_and_type_only_imports() -> None:
    assert not [" -> ".join(c) for c in _cycles(_graph())]


@pytest.mark.parametrize(
    ("graph", "found"),
    [
        pytest.param({"a": {"b"}, "b": {"a"}}, True, id="two"),
        pytest.param({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True, id="three"),
        pytest.param({"a": {"b"}, "b": {"c"}, "c": set()}, False, id="chain"),
    ],
)
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], found: bool) -> None:
    assert bool(_cycles(graph)) is found


def _third_party(module: Module) -> set[str]:
    return {i.top for i in module.imports if not ours(i.name) and i.top not in STDLIB and i.top != FACADE}


ENGINES = sorted({top for m in MODULES.values() for top in _third_party(m)} - VOCABULARY)


def _home(name: str, engine: str) -> str:
    """Where a module importing ``engine`` belongs: the listed home containing it, else its folder or itself."""
    listed = ENGINE_HOMES.get(engine)
    if listed and (name == listed or name.startswith(listed + ".")):
        return listed
    own = part(name)
    return f"{MEMORY}.{own}" if own in FOLDERS else name


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_is_imported_in_one_home(engine: str) -> None:
    importers = sorted(m.name for m in MODULES.values() if engine in _third_party(m))
    homes = sorted({_home(name, engine) for name in importers})
    assert len(homes) == 1, importers
    assert homes[0] == ENGINE_HOMES.get(engine, homes[0]), f"{engine} belongs in {ENGINE_HOMES[engine]}"


LITELLM_MODULES = sorted(
    (m for m in MODULES.values() if any(i.top == "litellm" and not i.lazy for i in m.imports)), key=lambda m: m.name
)


@pytest.mark.parametrize("module", [pytest.param(m, id=m.shown) for m in LITELLM_MODULES])
def test_litellm_is_imported_only_after_the_offline_cost_map_is_set(module: Module) -> None:
    """litellm fetches its cost map over the network at import unless told not to; whichever part loads first."""
    first = min(i.line for i in module.imports if i.top == "litellm")
    offline = [i.line for i in module.imports if i.name == f"{MEMORY}._llm._offline"]
    assert offline and offline[0] < first, f"{module.shown} imports litellm before {MEMORY}._llm._offline"


@pytest.mark.parametrize("module", _params(MODULES.values()))
def test_no_module_imports_the_old_top_level_names(module: Module) -> None:
    assert not [f"{module.shown}:{i.line} imports {i.name}" for i in module.imports if i.top in OLD_TOP_LEVEL]


OUTSIDE = sorted(p for folder in ("tests", "bench") for p in (REPO / folder).rglob("*.py"))


@pytest.mark.parametrize("path", OUTSIDE, ids=[p.relative_to(REPO).as_posix() for p in OUTSIDE])
def test_tests_and_benches_import_tiermem_not_the_folders(path: Path) -> None:
    assert not [name for name in imports_in(path) if name.split(".")[0] in OLD_TOP_LEVEL]
