"""The README cannot rot: every Python block runs, and its two commands are the ones CI runs."""

from __future__ import annotations

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
