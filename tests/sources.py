"""Our modules and what each imports, read from the source tree by AST (nothing is imported here).

The import root is the ``tiermem/`` folder: the front door ``tiermem/__init__.py`` plus links to the
repository's ``memory/``, ``pipelines/``, ``jobs/`` and ``prompts/`` folders, walked through the links
exactly as the import system (and the editable install) sees them.
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMPORT_ROOT = REPO / "tiermem"
FACADE = "tiermem"
SUBPACKAGES = ("memory", "pipelines", "jobs", "prompts")
# What a module of ours may import besides our own modules without being an "engine": the standard
# library and the shared vocabulary every layer speaks (pydantic models, numpy arrays).
STDLIB = frozenset(sys.stdlib_module_names) | {"typing_extensions"}


@dataclass(frozen=True, kw_only=True)
class Import:
    """One import statement's target, resolved to an absolute name."""

    name: str  # our module ("tiermem.memory._records"), else the imported name as written ("lancedb.index")
    line: int
    lazy: bool  # inside a function: runs on first call, not when the module is imported
    type_only: bool  # under ``if TYPE_CHECKING:``: never runs

    @property
    def top(self) -> str:
        return self.name.split(".")[0]

    @property
    def runtime(self) -> bool:
        return not self.type_only


@dataclass(frozen=True, kw_only=True)
class Module:
    name: str  # "tiermem.memory._store._store"
    path: Path  # the file, through the links
    is_package: bool
    imports: tuple[Import, ...]

    @property
    def shown(self) -> str:
        """The path a reader of the repository knows: ``memory/_store/_store.py``, ``tiermem/__init__.py``."""
        rel = self.path.relative_to(IMPORT_ROOT).as_posix()
        return rel if rel.split("/")[0] in SUBPACKAGES else f"tiermem/{rel}"

    @property
    def package(self) -> str:
        """The layer: memory, pipelines, jobs or prompts; tiermem for the front door."""
        parts = self.name.split(".")
        return parts[1] if len(parts) > 1 else FACADE

    @property
    def stem(self) -> str:
        """The module's concept name: ``tiermem.memory._records`` -> ``records``."""
        return self.name.rsplit(".", 1)[-1].lstrip("_")


def _module_files() -> dict[str, tuple[Path, bool]]:
    found: dict[str, tuple[Path, bool]] = {}
    for folder, dirs, files in os.walk(IMPORT_ROOT, followlinks=True):
        dirs[:] = sorted(d for d in dirs if (Path(folder) / d / "__init__.py").is_file())
        base = Path(folder).relative_to(IMPORT_ROOT.parent).parts
        for file in sorted(f for f in files if f.endswith(".py")):
            if file == "__init__.py":
                found[".".join(base)] = (Path(folder) / file, True)
            else:
                found[".".join([*base, file[:-3]])] = (Path(folder) / file, False)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Collector(ast.NodeVisitor):
    def __init__(self, name: str, is_package: bool, ours: set[str]) -> None:
        self.package = name if is_package else name.rpartition(".")[0]
        self.ours = ours
        self.lazy = False
        self.type_only = False
        self.found: list[Import] = []

    def _add(self, node: ast.stmt, name: str) -> None:
        self.found.append(Import(name=name, line=node.lineno, lazy=self.lazy, type_only=self.type_only))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        lazy, self.lazy = self.lazy, True
        self.generic_visit(node)
        self.lazy = lazy

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        type_only, self.type_only = self.type_only, True
        for child in node.body:
            self.visit(child)
        self.type_only = type_only
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parts = self.package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1])
            module = f"{base}.{node.module}" if node.module else base
        else:
            module = node.module or ""
        for alias in node.names:
            # ``from pkg import sub`` imports the module pkg.sub; ``from pkg import name`` imports pkg.
            submodule = f"{module}.{alias.name}"
            self._add(node, submodule if submodule in self.ours else module)


def _scan() -> dict[str, Module]:
    files = _module_files()
    ours = set(files)
    modules: dict[str, Module] = {}
    for name, (path, is_package) in files.items():
        collector = _Collector(name, is_package, ours)
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        unique = {(i.name, i.lazy, i.type_only): i for i in collector.found}
        modules[name] = Module(name=name, path=path, is_package=is_package, imports=tuple(unique.values()))
    return modules


MODULES = _scan()


def imports_in(path: Path) -> list[str]:
    """Absolute names a file outside the import root (a test, a bench) imports; relative ones skipped."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.append(node.module)
    return names


def ours(name: str) -> bool:
    return name in MODULES
