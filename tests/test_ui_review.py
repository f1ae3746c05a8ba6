"""What keeps the inspector's browser tests honest where they cannot run: CI installs the Chromium they drive,
and every screenshot they take has a reviewed copy in tests/data/ui/ (refreshed with ``TIERMEM_UI_SHOTS``).

These run without Chromium or playwright, so a machine that skips the browser tests still checks them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests import servers

ROOT = Path(__file__).resolve().parents[1]
BROWSER_TESTS = ROOT / "tests" / "memory" / "test_ui.py"
REVIEWED = ROOT / "tests" / "data" / "ui"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _shot_names() -> set[str]:
    """The names of the screenshots the browser tests take: each ``_shot(page, tmp_path, "name")`` call."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(BROWSER_TESTS.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_shot":
            name = node.args[-1]
            assert isinstance(name, ast.Constant) and isinstance(name.value, str), ast.unparse(node)
            names.add(name.value)
    return names


def test_ci_installs_the_chromium_the_browser_tests_drive() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install = next((line for line in ci.splitlines() if "apt-get install" in line), "")
    assert "chromium" in install.split(), f".ci/run installs no Debian chromium: {install!r}"
    assert f"-x {servers.CHROMIUM}" in ci  # the path it checks is the one the tests launch


def test_every_screenshot_the_browser_tests_take_has_a_reviewed_copy() -> None:
    taken = _shot_names()
    assert len(taken) >= 5, taken  # the scan sees the calls
    committed = {path.stem for path in REVIEWED.glob("*.png")}
    assert sorted(taken - committed) == [], "screenshots never committed: refresh with TIERMEM_UI_SHOTS=tests/data/ui"
    assert sorted(committed - taken) == [], "screenshots no test takes any more: remove them"
    for name in taken:
        assert (REVIEWED / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE), name
