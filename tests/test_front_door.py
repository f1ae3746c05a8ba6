"""The front door: an exact ``__all__`` per package (as httpx's tests/test_exported_members.py does),
private implementation modules, the error tree and the provider Protocol."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

import tiermem
from tests.sources import MODULES
from tiermem import MemoryCapability, MemoryProvider, TiermemError

PACKAGES = (
    "tiermem",
    "tiermem.memory",
    "tiermem.pipelines",
    "tiermem.jobs",
    "tiermem.prompts",
    "tiermem.memory.testing",
)
# Public subpackages and modules reached by their dotted path rather than exported as names.
NAMESPACES = {
    "tiermem": {"memory", "pipelines", "jobs", "prompts"},
    "tiermem.memory": {"testing"},
}
# Names a package serves on first use from an extra's framework: out of ``__all__``, so that
# ``from tiermem import *`` needs none of them installed.
OPTIONAL = {"tiermem": {"TiermemSession", "TiermemStore", "TiermemToolset"}}


def _ruf022_key(name: str) -> tuple[int, list[int | str]]:
    """Ruff's RUF022 "isort-style" order: SCREAMING_SNAKE_CASE, then CamelCase, then the rest; natural sort."""
    if len(name) > 1 and name.isupper():
        group = 0
    elif name[:1].isupper():
        group = 1
    else:
        group = 2
    return group, [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _bound_names(target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple | ast.List):
        return {n for element in target.elts for n in _bound_names(element)}
    return set()


def _top_level_names(path: Path) -> tuple[set[str], set[str]]:
    """Public names a module binds at its top level, by AST: (defined here, imported from our modules).

    Definitions are ``def``, ``class`` and assignments; imports count only from our own modules,
    including those under ``if TYPE_CHECKING:`` (how a lazily loaded name is declared).
    """
    defined: set[str] = set()
    imported: set[str] = set()

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign):
                defined.update(n for target in node.targets for n in _bound_names(target))
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                defined.update(_bound_names(node.target))
            elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("tiermem")):
                imported.update(alias.asname or alias.name for alias in node.names)
            elif isinstance(node, ast.If):
                walk(node.body)
                if not _is_type_checking(node.test):
                    walk(node.orelse)
            elif isinstance(node, ast.Try):
                walk([*node.body, *node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)])

    walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body)
    return {n for n in defined if not n.startswith("_")}, {n for n in imported if not n.startswith("_")}


def _all(package: str) -> list[str]:
    exported: list[str] = importlib.import_module(package).__all__
    return exported


# -- __all__ -----------------------------------------------------------------------------------


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_exactly_the_public_names(package: str) -> None:
    """A package's ``__init__`` exports what it defines and imports; a module (``testing``) exports what
    it defines and may re-export our names (what it imports only to use stays out, as mypy's
    no-implicit-reexport reads it)."""
    defined, imported = _top_level_names(MODULES[package].path)
    exported = set(_all(package))
    if MODULES[package].is_package:
        assert exported == (defined | imported) - NAMESPACES.get(package, set()) - OPTIONAL.get(package, set())
    else:
        assert defined <= exported, f"defined here but not exported: {sorted(defined - exported)}"
        assert exported <= defined | imported, f"exported but not bound here: {sorted(exported - defined - imported)}"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_public_object_of_ours_is_left_out_of_all(package: str) -> None:
    """The run-time view of the same rule: the public attributes that are our objects are in ``__all__``."""
    module = importlib.import_module(package)
    home = "tiermem" if MODULES[package].is_package else package
    ours = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name not in NAMESPACES.get(package, set())
        and (
            value.__name__ == f"{package}.{name}"
            if isinstance(value, ModuleType)
            else str(getattr(value, "__module__", "")).startswith(home)
        )
    }
    assert ours <= set(_all(package))


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted_and_unique(package: str) -> None:
    exported = _all(package)
    assert exported == sorted(exported, key=_ruf022_key)
    assert len(exported) == len(set(exported))


EXPORTS = [(package, name) for package in PACKAGES for name in _all(package)]


@pytest.mark.parametrize(("package", "name"), EXPORTS, ids=[f"{p}.{n}" for p, n in EXPORTS])
def test_every_exported_name_resolves(package: str, name: str) -> None:
    assert getattr(importlib.import_module(package), name) is not None


def test_memory_exports_nothing_the_front_door_does() -> None:
    assert _all("tiermem.memory") == []


PACKAGE_NAMES = sorted(m.name for m in MODULES.values() if m.is_package)


@pytest.mark.parametrize("package", PACKAGE_NAMES)
def test_public_submodules_are_api(package: str) -> None:
    """Implementation modules are ``_``-prefixed; a public one is exported or a documented namespace."""
    children = {m.name.rsplit(".", 1)[1] for m in MODULES.values() if m.name.rpartition(".")[0] == package}
    public = {child for child in children if not child.startswith("_")}
    assert public <= set(_all(package)) | NAMESPACES.get(package, set())


REQUIRED_EXPORTS = [
    "system",
    "create_memory_capability",
    "MemoryCapability",
    "MemoryProvider",
    "MEMORY_CAPABILITY_PRESETS",
    "MemoryContext",
    "MemoryItem",
    "RankedMemoryItem",
    "WorkingEntry",
    "Episode",
    "Fact",
    "Digest",
    "Edge",
    "Alias",
    "Turn",
    "Message",
    "Tier",
    "WorkingOptions",
    "EpisodicOptions",
    "SemanticOptions",
    "RelationsOptions",
    "DigestOptions",
    "HygieneOptions",
    "RecallOptions",
    "TiermemError",
    "ConfigurationError",
    "InvalidSubjectError",
    "InvalidArgumentError",
    "StoreError",
    "StoreMismatchError",
    "EmbedderError",
    "ModelError",
    "ModelOutputError",
    "effective_confidence",
    "edge_to_memory_item",
    "canonical_subject",
    "is_canonical_subject",
    "Toolset",
    "MemoryTool",
    "ToolEnvelope",
    "HashingEmbedder",
    "StaticEmbedder",
    "Embedder",
]


@pytest.mark.parametrize("name", REQUIRED_EXPORTS)
def test_required_name_is_exported(name: str) -> None:
    assert name in tiermem.__all__


# Leaf modules whose every public class is part of the API (records, contexts, options, errors, subjects).
DATA_MODULES = sorted(
    m.name
    for m in MODULES.values()
    if m.package == "memory" and m.stem in {"records", "context", "options", "errors", "subjects"}
)
# Defined there, not imported: read from the source, since tiermem's front door renames every class's __module__.
DATA_CLASSES = [
    (module, name)
    for module in DATA_MODULES
    for name, value in vars(importlib.import_module(module)).items()
    if inspect.isclass(value) and name in _top_level_names(MODULES[module].path)[0] and not name.startswith("_")
]


def test_the_data_classes_are_found() -> None:
    assert len(DATA_CLASSES) >= 30 and ("tiermem.memory._context", "MemoryContext") in DATA_CLASSES


@pytest.mark.parametrize(("module", "name"), DATA_CLASSES, ids=[f"{m}.{n}" for m, n in DATA_CLASSES])
def test_record_option_and_error_classes_are_exported(module: str, name: str) -> None:
    assert name in tiermem.__all__
    assert getattr(tiermem, name) is getattr(importlib.import_module(module), name)


# -- errors ------------------------------------------------------------------------------------

ERROR_CLASSES = sorted(
    {
        value
        for module in MODULES
        for value in vars(importlib.import_module(module)).values()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__.startswith("tiermem")
    },
    key=lambda cls: cls.__qualname__,
)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=[c.__name__ for c in ERROR_CLASSES])
def test_every_error_derives_from_tiermem_error_and_is_exported(cls: type[BaseException]) -> None:
    assert issubclass(cls, TiermemError)
    assert getattr(tiermem, cls.__name__, None) is cls


EXPORTED_EXCEPTIONS = [
    name
    for name in tiermem.__all__
    if inspect.isclass(getattr(tiermem, name)) and issubclass(getattr(tiermem, name), BaseException)
]


@pytest.mark.parametrize("name", EXPORTED_EXCEPTIONS)
def test_exported_exceptions_are_tiermem_errors(name: str) -> None:
    assert issubclass(getattr(tiermem, name), TiermemError)


def test_root_error_does_not_shadow_the_builtin_memory_error() -> None:
    assert TiermemError.__name__ != "MemoryError"
    assert "MemoryError" not in tiermem.__all__
    assert not issubclass(TiermemError, MemoryError)


def test_configuration_errors_are_value_errors() -> None:
    assert issubclass(tiermem.ConfigurationError, ValueError)
    assert issubclass(tiermem.InvalidArgumentError, tiermem.ConfigurationError)
    assert issubclass(tiermem.StoreMismatchError, tiermem.StoreError)


# -- the provider Protocol ---------------------------------------------------------------------


def test_capability_is_a_memory_provider(capability: MemoryCapability) -> None:
    assert isinstance(capability, MemoryProvider)


@pytest.mark.parametrize("method", ["recall", "format_context"])
def test_capability_signatures_match_the_protocol(method: str) -> None:
    wanted = inspect.signature(getattr(MemoryProvider, method))
    got = inspect.signature(getattr(MemoryCapability, method))
    assert list(got.parameters) == list(wanted.parameters)
    assert [p.kind for p in got.parameters.values()] == [p.kind for p in wanted.parameters.values()]
    assert [p.default for p in got.parameters.values()] == [p.default for p in wanted.parameters.values()]
    assert inspect.iscoroutinefunction(getattr(MemoryCapability, method))


def test_a_star_import_needs_no_framework_installed() -> None:
    """The adapters are served on first use (each needs its framework); ``import *`` never touches them."""
    assert not OPTIONAL["tiermem"] & set(tiermem.__all__)
    assert all(hasattr(tiermem, name) for name in OPTIONAL["tiermem"])  # the test extra installs the frameworks
