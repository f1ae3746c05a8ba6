"""Running Python in a fresh interpreter for tests: no API key, no repository on the path."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
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


def run_together(
    code: str, args: Sequence[Sequence[str]], folder: Path, *, env: dict[str, str] | None = None
) -> list[str]:
    """Run ``code`` once per entry of ``args`` in fresh interpreters released at one moment; their stdouts.

    Each gets its arguments, then its index and the path of a go file; it touches ``ready-<index>``
    beside the go file once set up and waits for the go file, so slow interpreter starts do not spread
    the processes out. A process that fails fails the test with its stderr.
    """
    go = folder / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", code, *argv, str(index), str(go)],
            cwd=folder,  # never the repository (see run_python)
            env=clean_env(**(env or {})),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index, argv in enumerate(args)
    ]
    deadline = time.monotonic() + 120  # a bound for a slow machine, not an expected duration
    while len(list(folder.glob("ready-*"))) < len(workers) and time.monotonic() < deadline:
        if any(w.poll() not in (None, 0) for w in workers):
            break
        time.sleep(0.01)
    go.touch()
    outputs = []
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 0, stderr[-3000:]
        outputs.append(stdout)
    return outputs
