"""Fresh interpreters: every package and every module of ours can be the first import, and the read
path never loads litellm (click's tests/test_imports.py does the same with a subprocess)."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.sources import MODULES
from tests.subprocesses import run_python, two_at_a_time

# One worker runs this module (pytest-xdist --dist loadgroup), so that its first-import
# interpreters (packages_first) start once, on one worker.
pytestmark = pytest.mark.xdist_group("imports")
PACKAGES = ("tiermem", "tiermem.memory", "tiermem.pipelines", "tiermem.jobs", "tiermem.prompts")


@dataclass(frozen=True)
class FirstImport:
    module: str
    error: str  # the last line of stderr; empty when the import worked
    loaded: frozenset[str]  # every module in sys.modules afterwards
    stderr: str


def import_first(module: str, cwd: Path) -> FirstImport:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    done = run_python(code, cwd=cwd)
    if done.returncode != 0:
        return FirstImport(module, (done.stderr.strip().splitlines() or ["?"])[-1], frozenset(), done.stderr)
    return FirstImport(module, "", frozenset(json.loads(done.stdout)), done.stderr)


@pytest.fixture(scope="module")
def packages_first(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FirstImport]:
    """Each package imported first in a fresh interpreter, two interpreters at a time.

    ``import tiermem.memory`` runs ``tiermem/__init__.py`` to the end before ``tiermem.memory``
    starts, so a subpackage that importing ``tiermem`` first already loads has had its first import
    there, in the very same order: it shares that interpreter's result. Only the subpackages the
    facade leaves for later need an interpreter of their own.
    """
    cwd = tmp_path_factory.mktemp("first")
    root, *subpackages = PACKAGES
    facade = import_first(root, cwd)
    shared = [p for p in subpackages if p in facade.loaded]
    later = [p for p in subpackages if p not in facade.loaded]
    first = [facade, *(replace(facade, module=p) for p in shared)]
    first += two_at_a_time(lambda p: import_first(p, cwd), later)
    return {result.module: result for result in first}


@pytest.mark.parametrize("package", PACKAGES, ids=PACKAGES)
def test_package_is_importable_first(package: str, packages_first: dict[str, FirstImport]) -> None:
    assert not packages_first[package].error, packages_first[package].stderr


@pytest.mark.slow
def test_every_module_is_importable_first(packages_first: dict[str, FirstImport], tmp_path: Path) -> None:
    """Each module of ours is the first import of a fresh interpreter.

    ``import a.b.c`` runs ``a`` and then ``a.b`` to the end before ``a.b.c`` starts, so a module its
    package's first import already loads has had its first import above. Only the modules the
    packages leave for later (the CLI, litellm's adapter, the test doubles, ...) need their own
    interpreter, which keeps this to a handful of interpreters instead of one per module.
    """

    def public_package(name: str) -> str:
        """The nearest public package holding ``name`` (``tiermem.memory`` for ``tiermem.memory._cli._main``)."""
        parent = name.rpartition(".")[0]
        return parent if parent in PACKAGES else public_package(parent)

    later = sorted(
        name
        for name in MODULES
        if name not in PACKAGES
        and name.rpartition(".")[2] != "__main__"  # an entry script: run (``python -m``), never imported
        and name not in packages_first[public_package(name)].loaded
    )
    assert set(MODULES) <= {n for f in packages_first.values() for n in f.loaded} | set(later) | {
        n for n in MODULES if n.endswith(".__main__")
    }
    # The same argument one level down: a private folder's first import (``tiermem.memory._cli``) is the
    # first import of every module it loads, so only what the folders leave for later needs its own.
    folders = [name for name in later if MODULES[name].is_package]
    done = two_at_a_time(lambda m: import_first(m, tmp_path), folders)
    loaded = {n for f in done for n in f.loaded}
    rest = [name for name in later if name not in folders and name not in loaded]
    done += two_at_a_time(lambda m: import_first(m, tmp_path), rest)
    failed = [(f.module, f.error) for f in done if f.error]
    assert not failed


def test_importing_tiermem_does_not_import_litellm(packages_first: dict[str, FirstImport]) -> None:
    assert "tiermem" in packages_first["tiermem"].loaded
    assert "litellm" not in packages_first["tiermem"].loaded


def test_read_only_flow_never_imports_litellm(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import asyncio, sys
        from tiermem import HashingEmbedder, MemoryContext, create_memory_capability

        async def main() -> None:
            cap = create_memory_capability(store=sys.argv[1], embedder=HashingEmbedder(64))
            ctx = MemoryContext(user_id="u", session_id="s")
            await cap.add_semantic_fact(ctx, "Moni is allergic to shellfish.", subject="Moni")
            assert await cap.recall(ctx, "shellfish")
            assert "<memory>" in await cap.format_context(ctx, "shellfish")
            envelope = await cap.tools(ctx)[0].call({"query": "shellfish"})
            assert envelope["ok"], envelope

        asyncio.run(main())
        assert "litellm" not in sys.modules, "litellm was imported"
        """
    )
    done = run_python(code, str(tmp_path / "store"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
