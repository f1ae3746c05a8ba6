"""Every benchmark the README names still imports against the library as it is now.

A bench is run by hand, not by the suite, so a renamed or moved name it imports would otherwise
only show when someone next runs it. One fresh interpreter imports them all (their ``main`` is not run).
"""

from __future__ import annotations

from pathlib import Path

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
