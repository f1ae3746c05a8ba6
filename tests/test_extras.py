"""The extras: a command whose optional dependency is missing names the extra to install.

The missing package is simulated in the subprocess by a ``sitecustomize`` that blocks its import.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _tiermem() -> list[str]:
    script = Path(sys.executable).with_name("tiermem")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tiermem.memory._cli._main"]


@pytest.mark.parametrize(
    ("blocked", "command", "extra"),
    [
        (
            "sqlalchemy",
            ["worker", "--model", "rules", "--embedder", "hashing", "--jobstore", "sqlite:///jobs.db"],
            "worker",
        ),
        ("mcp", ["mcp", "--embedder", "hashing", "--user-id", "u-1"], "mcp"),
        ("fastapi", ["serve", "--embedder", "hashing", "--model", "rules", "--keys", "keys.json"], "rest"),
    ],
    ids=["worker-jobstore", "mcp", "rest"],
)
def test_a_missing_extra_is_named(tmp_path: Path, blocked: str, command: list[str], extra: str) -> None:
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(f"import sys\nsys.modules[{blocked!r}] = None\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"PYTHONPATH": str(guard), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    result = subprocess.run(
        [*_tiermem(), command[0], "--store", str(tmp_path / "store"), *command[1:]],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode != 0
    assert f"pip install 'tiermem[{extra}]'" in result.stderr, result.stderr[-2000:]


ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("blocked", "name", "extra"),
    [
        ("langgraph", "TiermemStore", "langgraph"),
        ("agents", "TiermemSession", "openai-agents"),
        ("pydantic_ai", "TiermemToolset", "pydantic-ai"),
    ],
    ids=["langgraph", "openai-agents", "pydantic-ai"],
)
def test_an_adapter_without_its_framework_names_the_extra(tmp_path: Path, blocked: str, name: str, extra: str) -> None:
    """``import tiermem`` never imports a framework; asking for its adapter without it names the extra."""
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(f"import sys\nsys.modules[{blocked!r}] = None\n")
    script = (
        "import sys, tiermem\n"
        "assert not {'langgraph', 'agents', 'pydantic_ai'} & {m.split('.')[0] for m in sys.modules if sys.modules[m]}\n"
        f"from tiermem import {name}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"PYTHONPATH": os.pathsep.join([str(guard), str(ROOT)]), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode != 0
    assert "ConfigurationError" in result.stderr and f"pip install 'tiermem[{extra}]'" in result.stderr, result.stderr
