"""``tiermem ingest``: documents into a store from the console script, run as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.memory.documents import HANDBOOK_MD, HANDBOOK_PDF_PAGES, tiny_pdf

pytest.importorskip("pypdf")


def _tiermem(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    script = Path(sys.executable).with_name("tiermem")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "tiermem.memory._cli._main"]
    return subprocess.run(
        [*command, "--store", str(store), "--embedder", "hashing", *args],
        capture_output=True, text=True, env=env, timeout=180, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_ingest_writes_documents_once_with_a_progress_bar(tmp_path: Path) -> None:
    (tmp_path / "handbook.md").write_text(HANDBOOK_MD)
    (tmp_path / "scan.pdf").write_bytes(tiny_pdf(HANDBOOK_PDF_PAGES, title="Scanned handbook"))
    files = [str(tmp_path / "handbook.md"), str(tmp_path / "scan.pdf")]
    store = tmp_path / "store"
    first = _tiermem(store, "--json", "ingest", "u-1", *files)
    assert first.returncode == 0, first.stderr
    reports = json.loads(first.stdout)
    assert [r["document"]["title"] for r in reports] == ["Staff handbook", "Scanned handbook"]
    assert [r["duplicate"] for r in reports] == [False, False] and reports[1]["document"]["pages"] == 3
    assert all(r["written"] == r["document"]["chunks"] > 0 for r in reports)
    assert str(tmp_path / "scan.pdf") in first.stderr  # the progress bar's label, on stderr
    again = _tiermem(store, "ingest", "u-1", *files)
    assert again.returncode == 0 and again.stdout.count("unchanged") == 2, again.stderr
    found = _tiermem(store, "--json", "search", "u-1", "paid leave days")
    assert any(i["tier"] == "document" and "25 days" in i["text"] for i in json.loads(found.stdout))


def test_ingest_of_a_corrupt_pdf_is_one_error_line_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog")
    store = tmp_path / "store"
    result = _tiermem(store, "ingest", "u-1", "--namespace", "acme", str(tmp_path / "broken.pdf"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("tiermem: error: the PDF cannot be read")
    shown = _tiermem(store, "--json", "search", "u-1", "--namespace", "acme", "catalog")
    assert shown.returncode == 1 and "no user 'u-1' in namespace 'acme'" in shown.stderr  # nothing was written
