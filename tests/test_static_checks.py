"""The library, tests, benches and examples stay ruff- and ``mypy --strict``-clean: CI runs both here.

Slow (mypy checks about 250 files from a cold cache), so ``pytest -m "not slow"`` leaves it out.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.sources import REPO

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["ruff", "check", "."], id="ruff-check"),
        pytest.param(["ruff", "format", "--check", "."], id="ruff-format"),
        pytest.param(["mypy"], id="mypy-strict"),
    ],
)
def test_static_check_is_clean(command: list[str]) -> None:
    """Each tool as the README's contributors run it, with its settings from pyproject.toml."""
    done = subprocess.run(
        [sys.executable, "-m", *command], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
