"""Benches, docs and code find the shared data relative to the repository (``../shared/data/...``),
never by an absolute path of one machine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sources import REPO

# The folders one machine's checkouts and data live in (this workplace's /work, the usual homes), as
# they would appear in a path. Not the checkout's own parent: CI clones anywhere, /tmp included,
# where `--out /tmp/x.md` in a usage line is fine.
PREFIXES = {"/work", "/home", "/Users", "/root"}
MACHINE_PATHS = re.compile("|".join(re.escape(f"{prefix.rstrip('/')}/") for prefix in sorted(PREFIXES)))
TEXT = sorted(
    {REPO / "README.md", REPO / "pyproject.toml"}
    | {p for folder in ("bench", "docs") for pattern in ("*.py", "*.md") for p in (REPO / folder).rglob(pattern)}
    | {
        p
        for folder in ("memory", "pipelines", "jobs", "prompts", "tiermem", "tests")
        for p in (REPO / folder).rglob("*.py")
    }
)


@pytest.mark.parametrize("path", TEXT, ids=[p.relative_to(REPO).as_posix() for p in TEXT])
def test_no_absolute_path_of_this_machine(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert not [f"{n}: {line.strip()}" for n, line in enumerate(lines, 1) if MACHINE_PATHS.search(line)]
