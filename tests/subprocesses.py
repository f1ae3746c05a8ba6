"""Running Python in a fresh interpreter for tests: no API key, no repository on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def clean_env(**extra: str) -> dict[str, str]:
    """No API key, no network lookups, and nothing on the path but what is installed."""
    env = {
        k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in {"PYTHONPATH", "TIERMEM_MODEL"}
    }
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.update(extra)
    return env


def run_python(code: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,  # never the repository: its memory/ and jobs/ folders must not be importable
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def two_at_a_time(function: Callable[[T], R], items: Iterable[T]) -> list[R]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(function, items))
