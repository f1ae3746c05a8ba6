"""The README cannot rot: every Python block runs, and its two commands are the ones CI runs."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def _block_id(block: str) -> str:
    first = next((line for line in block.splitlines() if line.strip() and not line.startswith("#")), "empty")
    return re.sub(r"\W+", "-", first)[:40].strip("-")


def test_readme_has_python_blocks() -> None:
    assert BLOCKS, "README.md has no ```python blocks"


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{n}-{_block_id(b)}" for n, b in enumerate(BLOCKS)])
def test_readme_python_block_runs(block: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "TIERMEM_MODEL"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    done = subprocess.run(
        [sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_readme_test_command_is_the_one_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = ci.strip().splitlines()[-1]
    assert command in README


def test_readme_demo_command_installs_and_runs_the_demo() -> None:
    assert "pip install -e . && tiermem demo" in README


# -- every environment variable the code reads is in the README's Configuration section -------------

SOURCES = [ROOT / "memory", ROOT / "pipelines", ROOT / "jobs", ROOT / "prompts"]
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$")
_ENV_SUFFIX = re.compile(r"^_[A-Z][A-Z0-9_]*$")
_ENV_READS = {"get", "getenv", "setdefault", "pop"}


def _environment_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Variables the code reads (``environ.get("X")``, ``getenv``, ``environ["X"]``, click's ``envvar=``, and
    names of tiermem's own and the provider keys' families read through a table), and the suffixes it
    matches variables by (``k.endswith(("_API_KEY", ...))``)."""
    names: set[str] = set()
    suffixes: set[str] = set()
    # A type variable's name ("_R") is no variable suffix.
    type_names = {
        id(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("TypeVar") and node.args
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ENV_READS:
            receiver = ast.unparse(node.func.value)
            first = node.args[0] if node.args else None
            if ("environ" in receiver or receiver == "os") and isinstance(first, ast.Constant):
                names.add(str(first.value))
        key = node.slice if isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value) else None
        if isinstance(key, ast.Constant):
            names.add(str(key.value))
        if isinstance(node, ast.keyword) and node.arg == "envvar" and isinstance(node.value, ast.Constant):
            names.add(str(node.value.value))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            family = node.value.startswith(("TIERMEM_", "LITELLM_")) or node.value.endswith("_API_KEY")
            if family and _ENV_NAME.match(node.value):
                names.add(node.value)
            elif _ENV_SUFFIX.match(node.value) and id(node) not in type_names:
                suffixes.add(node.value)
    return names, suffixes


def _configuration_section() -> str:
    start = README.index("\n## Configuration\n")
    return README[start : README.index("\n## ", start + 1)]


def test_every_environment_variable_is_documented_under_configuration() -> None:
    names: set[str] = set()
    suffixes: set[str] = set()
    for folder in SOURCES:
        for path in folder.rglob("*.py"):
            found, matched = _environment_names(ast.parse(path.read_text(encoding="utf-8")))
            names |= found
            suffixes |= matched
    section = _configuration_section()

    assert {"TIERMEM_STORE", "TIERMEM_MODEL", "OPENAI_API_KEY", "TIERMEM_NAMESPACE"} <= names  # the scan sees
    assert "_API_KEY" in suffixes
    missing = sorted(n for n in names if f"`{n}`" not in section)
    missing += sorted(f"*{s}" for s in suffixes if f"`*{s}`" not in section)
    assert not missing, f"not in the README's Configuration section: {missing}"


def test_the_install_section_says_how_to_install_before_a_release() -> None:
    install = README[README.index("\n## Install\n") : README.index("\n## Two commands\n")]
    assert "No release is on PyPI yet" in install and "git+" in install
    # The block installs from the clone, so each line works before a release.
    block = install[install.index("```bash\n") + 8 : install.index("\n```", install.index("```bash\n"))]
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands and all(c == "pip install ." or c.startswith("pip install '.[") for c in commands), commands
