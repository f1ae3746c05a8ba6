"""The dependency rule, every clause checked by AST over the sources (see tests/sources.py).

The layers, bottom up::

    leaves      tiermem.memory modules that need only the standard library, pydantic and other leaves
                (records, options, subjects, errors, and whatever else qualifies: ids, decay, usage, ...)
    prompts     import leaves and prompts
    pipelines   import leaves, prompts and pipelines
    memory      the rest of tiermem.memory (store, embedders, recall, capability, ...): never pipelines or jobs
    root        the composition root, tiermem.memory._system, its own parts (modules named ``_system_<part>``:
                the write side, retries) and the write side's parts it composes (_capture, _sessions,
                _consolidation): the only memory modules wiring pipelines and jobs
    jobs        import memory (the root included), pipelines and jobs
    entry       the CLI (``_cli`` and its parts, ``_cli_<part>``) and the demo, above the root
    facade      tiermem/__init__.py: imports the layers; nothing of ours imports it

The clauses are written in these categories, not per file, so a module can be added or renamed
without touching this test. Runtime imports (module level or inside a function) follow the rule;
type-only imports (``if TYPE_CHECKING:``) may also name any memory module below the root.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.sources import FACADE, MODULES, REPO, STDLIB, Module, imports_in, ours

# The leaf modules the issue names; each must be a leaf (the other leaves are found, not listed).
CORE_LEAVES = ("records", "options", "subjects", "errors")
# Libraries every layer may speak: vocabulary, not engines.
VOCABULARY = frozenset({"pydantic", "numpy"})
COMPOSITION_ROOT = "tiermem.memory._system"
# The root's own parts are named after it (``_system_write_side``), as an adapter's are after its home.
ROOT_PARTS = frozenset(name for name in MODULES if name.startswith(f"{COMPOSITION_ROOT}_"))
ROOT = frozenset(
    {COMPOSITION_ROOT, *ROOT_PARTS, *(f"tiermem.memory._{part}" for part in ("capture", "sessions", "consolidation"))}
)
CLI = "tiermem.memory._cli"
ENTRY_POINTS = frozenset({CLI, "tiermem.memory._demo", *(name for name in MODULES if name.startswith(f"{CLI}_"))})
# Each engine is imported in exactly one adapter, where its exceptions become ours: the home module
# named here and its parts, modules named ``<home>_<part>`` beside it (``_store_meta``), so an
# adapter can stay in modules of a readable size. Engines not listed are held to one adapter too.
ENGINE_HOMES = {
    "lancedb": "tiermem.memory._store",
    "pyarrow": "tiermem.memory._store",
    "litellm": "tiermem.memory._llm",
    "click": CLI,
    "networkx": "tiermem.memory._graph",
    "apscheduler": "tiermem.jobs._scheduler",
    "model2vec": "tiermem.memory._embedders",
    "sentence_transformers": "tiermem.memory._embedders",
    "onnxruntime": "tiermem.memory._embedders",
}
OLD_TOP_LEVEL = frozenset({"memory", "pipelines", "jobs", "prompts"})


def _in(package: str) -> list[Module]:
    return [m for m in MODULES.values() if m.package == package]


def _ours_in(*packages: str) -> frozenset[str]:
    return frozenset(m.name for m in MODULES.values() if m.package in packages)


def _leaf_import(name: str, leaves: set[str] | frozenset[str]) -> bool:
    top = name.split(".")[0]
    return top in STDLIB or top == "pydantic" or name in leaves


def _find_leaves() -> frozenset[str]:
    """Memory modules whose runtime imports are all standard library, pydantic or other leaves."""
    candidates = _in("memory")
    leaves: set[str] = set()
    grew = True
    while grew:
        grew = False
        for module in candidates:
            if module.name not in leaves and all(_leaf_import(i.name, leaves) for i in module.imports if i.runtime):
                leaves.add(module.name)
                grew = True
    return frozenset(leaves)


LEAVES = _find_leaves()
MEMORY_BELOW_ROOT = _ours_in("memory") - ROOT - ENTRY_POINTS


def _params(modules: Iterable[Module]) -> list[Any]:
    return [pytest.param(m, id=m.shown) for m in sorted(modules, key=lambda m: m.name)]


def _offending(
    module: Module, allowed: frozenset[str], *, type_only_allowed: frozenset[str] = frozenset()
) -> list[str]:
    return [
        f"{module.shown}:{i.line} imports {i.name}"
        for i in module.imports
        if ours(i.name) and i.name not in allowed and not (i.type_only and i.name in type_only_allowed)
    ]


def test_scan_sees_every_layer_and_resolves_relative_imports() -> None:
    assert {m.package for m in MODULES.values()} == {FACADE, "memory", "pipelines", "jobs", "prompts"}
    assert all(name in MODULES for name in ROOT), "the composition root moved: update ROOT"
    assert all(name in MODULES for name in ENTRY_POINTS), "an entry point moved: update ENTRY_POINTS"
    assert {"tiermem.memory._records", COMPOSITION_ROOT} <= {i.name for i in MODULES[FACADE].imports}


@pytest.mark.parametrize("concept", CORE_LEAVES)
def test_core_leaf_imports_only_leaves_stdlib_and_pydantic(concept: str) -> None:
    found = [m for m in _in("memory") if m.stem == concept]
    assert len(found) == 1, f"no single memory module named after {concept!r}: {[m.name for m in found]}"
    module = found[0]
    assert module.name in LEAVES, [
        f"{module.shown}:{i.line} imports {i.name}"
        for i in module.imports
        if i.runtime and not _leaf_import(i.name, LEAVES)
    ]


def test_memory_package_init_is_a_leaf() -> None:
    """Importing any leaf runs ``tiermem/memory/__init__.py`` first, so it must import nothing heavier."""
    assert "tiermem.memory" in LEAVES


@pytest.mark.parametrize("module", _params(_in("prompts")))
def test_prompts_import_only_leaves_and_prompts(module: Module) -> None:
    assert not _offending(module, LEAVES | _ours_in("prompts"), type_only_allowed=MEMORY_BELOW_ROOT)


@pytest.mark.parametrize("module", _params(_in("pipelines")))
def test_pipelines_import_only_leaves_prompts_and_pipelines(module: Module) -> None:
    allowed = LEAVES | _ours_in("prompts", "pipelines")
    assert not _offending(module, allowed, type_only_allowed=MEMORY_BELOW_ROOT)


@pytest.mark.parametrize("module", _params(_in("jobs")))
def test_jobs_import_only_memory_pipelines_and_jobs(module: Module) -> None:
    assert not _offending(module, _ours_in("memory", "pipelines", "jobs") - ENTRY_POINTS)


@pytest.mark.parametrize("module", _params(MODULES[n] for n in MEMORY_BELOW_ROOT))
def test_memory_below_the_root_imports_no_pipelines_jobs_root_or_entry_point(module: Module) -> None:
    assert not _offending(module, _ours_in("memory", "prompts") - ROOT - ENTRY_POINTS)


@pytest.mark.parametrize("module", _params(MODULES[n] for n in ENTRY_POINTS))
def test_entry_points_import_memory_only(module: Module) -> None:
    assert not _offending(module, _ours_in("memory"))


@pytest.mark.parametrize("module", _params(m for m in MODULES.values() if m.name != FACADE))
def test_no_module_imports_the_facade(module: Module) -> None:
    """``tiermem`` imports every layer; a module importing it back (``from tiermem import X``) makes a cycle."""
    assert not _offending(module, frozenset(MODULES) - {FACADE})


def test_the_facade_imports_only_memory() -> None:
    assert not _offending(MODULES[FACADE], _ours_in("memory"))


def _module_level_graph() -> dict[str, set[str]]:
    """Edges that run at import time: module-level runtime imports, plus the packages they pass through."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for module in MODULES.values():
        parts = module.name.split(".")
        own_ancestors = {".".join(parts[:n]) for n in range(1, len(parts))}
        for i in module.imports:
            if i.lazy or i.type_only or not ours(i.name):
                continue
            target = i.name.split(".")
            passes = {".".join(target[:n]) for n in range(1, len(target) + 1)}
            graph[module.name] |= {p for p in passes if p in MODULES and p not in own_ancestors and p != module.name}
    return graph


def test_module_level_imports_have_no_cycle() -> None:
    graph = _module_level_graph()
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
    assert not cycles, [" -> ".join(c) for c in cycles]


def _third_party(module: Module) -> set[str]:
    return {i.top for i in module.imports if not ours(i.name) and i.top not in STDLIB and i.top != FACADE}


ENGINES = sorted({top for m in MODULES.values() for top in _third_party(m)} - VOCABULARY)


def _adapter(name: str) -> str:
    """The adapter a module belongs to: ``_store_creation`` is a part of ``_store``, ``_store`` its own."""
    package, _, stem = name.rpartition(".")
    homes = {home for home in ENGINE_HOMES.values() if home.rpartition(".")[0] == package}
    for home in sorted(homes, key=len, reverse=True):
        if stem == home.rpartition(".")[2] or stem.startswith(home.rpartition(".")[2] + "_"):
            return home
    return name


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_is_imported_in_one_adapter(engine: str) -> None:
    """An engine is spoken in one adapter: its home module and the home's parts (``_store_*``), no other."""
    importers = sorted(m.name for m in MODULES.values() if engine in _third_party(m))
    adapters = sorted({_adapter(name) for name in importers})
    assert len(adapters) == 1, importers
    assert adapters[0] == ENGINE_HOMES.get(engine, adapters[0]), f"{engine} belongs in {ENGINE_HOMES[engine]}"


LITELLM_MODULES = sorted(
    (m for m in MODULES.values() if any(i.top == "litellm" and not i.lazy for i in m.imports)), key=lambda m: m.name
)


@pytest.mark.parametrize("module", [pytest.param(m, id=m.shown) for m in LITELLM_MODULES])
def test_litellm_is_imported_only_after_the_offline_cost_map_is_set(module: Module) -> None:
    """litellm fetches its cost map over the network at import unless told not to; whichever part loads first."""
    first = min(i.line for i in module.imports if i.top == "litellm")
    offline = [i.line for i in module.imports if i.name == "tiermem.memory._llm_offline"]
    assert offline and offline[0] < first, f"{module.shown} imports litellm before tiermem.memory._llm_offline"


@pytest.mark.parametrize(
    ("module", "adapter"),
    [
        pytest.param("tiermem.memory._store", "tiermem.memory._store", id="home"),
        pytest.param("tiermem.memory._store_meta", "tiermem.memory._store", id="part"),
        pytest.param("tiermem.memory._stores", "tiermem.memory._stores", id="name-alike"),
        pytest.param("tiermem.memory._llm_calls", "tiermem.memory._llm", id="other-engine-part"),
        pytest.param("tiermem.pipelines._store_x", "tiermem.pipelines._store_x", id="other-package"),
    ],
)
def test_an_adapters_parts_are_named_after_its_home(module: str, adapter: str) -> None:
    assert _adapter(module) == adapter


@pytest.mark.parametrize("module", _params(MODULES.values()))
def test_no_module_imports_the_old_top_level_names(module: Module) -> None:
    assert not [f"{module.shown}:{i.line} imports {i.name}" for i in module.imports if i.top in OLD_TOP_LEVEL]


OUTSIDE = sorted(p for folder in ("tests", "bench") for p in (REPO / folder).rglob("*.py"))


@pytest.mark.parametrize("path", OUTSIDE, ids=[p.relative_to(REPO).as_posix() for p in OUTSIDE])
def test_tests_and_benches_import_tiermem_not_the_folders(path: Path) -> None:
    assert not [name for name in imports_in(path) if name.split(".")[0] in OLD_TOP_LEVEL]
