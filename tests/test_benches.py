"""Every benchmark the README names still imports against the library as it is now.

A bench is run by hand, not by the suite, so a renamed or moved name it imports would otherwise
only show when someone next runs it. One fresh interpreter imports them all (their ``main`` is not run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.subprocesses import run_python

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py"))

IMPORT_ALL = """
import importlib, sys
sys.path.insert(0, sys.argv[1])
failed = []
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


def test_every_bench_imports(tmp_path: Path) -> None:
    assert {"recall", "import_history", "capture", "capture_latency", "locomo"} <= set(SCRIPTS)
    done = run_python(IMPORT_ALL, str(BENCH), *SCRIPTS, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout


def test_the_documents_bench_runs_in_its_smoke_mode(tmp_path: Path) -> None:
    """bench/documents.py end to end on two documents with the hashing embedder: both tables, every method scored."""
    out = tmp_path / "RESULTS-documents.md"
    done = run_python(
        "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
        str(BENCH / "documents.py"), "--smoke", "--embedder", "hashing", "--out", str(out),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines() if line.startswith("| ")}
    for method in ("tiermem recall (document tier)", "fixed 800-char windows, plain cosine",
                   "tiermem recall, mixed with conversation memories"):  # fmt: skip
        hit1, hit3 = (float(v) for v in rows[method].strip("| ").split(" | ")[1:3])
        assert 0 <= hit1 <= hit3 <= 1
    ingest = rows["tiermem ingest (parse, chunk, redact, embed, store)"].strip("| ").split(" | ")
    assert int(ingest[2]) > 0 and int(ingest[4]) > 0  # chunks and pages ingested


@pytest.mark.parametrize(
    ("condition", "said"),
    [("--told", "each the assistant's"), ("--long", "each in passing in a long message")],
    ids=["told", "long"],
)
def test_the_turns_bench_runs_each_condition(tmp_path: Path, condition: str, said: str) -> None:
    """bench/paraphrase_turns.py with the memory said by the assistant (``--told``) or in passing in a long
    message (``--long``), every pair as one turn, the hashing embedder: the table and its counts; ``--told``
    with ``--replies`` is refused."""
    run = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    script = str(BENCH / "paraphrase_turns.py")
    done = run_python(
        run, script, condition, "--size", "1", "--per-session", "50", "--embedder", "hashing", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert f"129 turns, {said}, 50 a session, 129 paraphrase cues" in done.stdout
    rows = {line.split(" | ")[0].strip("| "): line for line in done.stdout.splitlines() if line.startswith("| ")}
    for system in ("tiermem", "dense"):
        hit1, hit3, hit10 = (float(v) for v in rows[system].strip("| ").split(" | ")[1:4])
        assert 0 <= hit1 <= hit3 <= hit10 <= 1
    assert "unrelated cues recalling anything:" in done.stdout and "recall (query embedding included" in done.stdout
    refused = run_python(run, script, "--told", "--replies", cwd=tmp_path)
    assert refused.returncode == 2 and "choose one" in refused.stderr
