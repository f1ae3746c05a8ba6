"""The installed package: a wheel built from the sources (the links followed, the assets shipped) and
the editable install both import as ``tiermem`` beside an application's own ``memory.py``, ``jobs/``
and ``prompts.py``, and neither makes a top-level ``memory``, ``jobs``, ``pipelines`` or ``prompts``.

Offline: the wheel is built without build isolation or an index, from a copy of the sources."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sources import IMPORT_ROOT, MODULES, REPO, SUBPACKAGES
from tests.subprocesses import clean_env, run_python

# One worker runs this module (pytest-xdist --dist loadgroup), so that the wheel (built) is
# built once, on one worker.
pytestmark = [pytest.mark.xdist_group("packaging"), pytest.mark.slow]
OLD_TOP_LEVEL = set(SUBPACKAGES)
PROJECT_FILES = ("pyproject.toml", "README.md", "LICENSE", "tiermem", *SUBPACKAGES)
ASSETS = sorted(
    p.relative_to(REPO).as_posix()
    for folder in ("_assets", "_rest/_ui")  # the embedders' files; the web inspector's pages and scripts
    for p in (REPO / "memory" / folder).rglob("*")
    if p.is_file()
)


@dataclass(frozen=True)
class Built:
    source: Path  # the copy the wheel was built from
    wheel: Path
    site: Path


def _pip(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--no-index", "--no-deps", "--quiet"],
        cwd=cwd,
        env=clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Build the wheel once per module (from a copy, so the build leaves nothing in the repository)."""
    tmp = tmp_path_factory.mktemp("packaging")
    source = tmp / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in PROJECT_FILES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, symlinks=True, ignore=ignore)  # the tiermem/ links stay links
        elif path.exists():
            shutil.copy2(path, source / name)
    assert (source / "tiermem" / "memory").is_symlink()
    _pip("wheel", "--no-build-isolation", "-w", str(tmp / "dist"), ".", cwd=source)
    (wheel,) = (tmp / "dist").glob("tiermem-*.whl")
    _pip("install", "--target", str(tmp / "site"), str(wheel), cwd=tmp)
    return Built(source=source, wheel=wheel, site=tmp / "site")


def test_wheel_holds_every_module_as_a_real_file(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        infos = {info.filename: info for info in wheel.infolist()}
        for module in MODULES.values():
            rel = module.name.replace(".", "/")
            name = f"{rel}/__init__.py" if module.is_package else f"{rel}.py"
            assert name in infos, name
            assert not stat.S_ISLNK(infos[name].external_attr >> 16), f"{name} is a link in the wheel"
            copied = built.source / "tiermem" / module.path.relative_to(IMPORT_ROOT)
            assert wheel.read(name) == copied.read_bytes(), name
            if module.is_package and not module.name.rpartition(".")[2].startswith("_"):
                # PEP 561: a public package's marker covers its private folders (tiermem.memory._store)
                assert f"{rel}/py.typed" in infos


@pytest.mark.parametrize("asset", ASSETS)
def test_wheel_ships_the_assets(built: Built, asset: str) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        assert f"tiermem/{asset}" in wheel.namelist(), "not shipped: check [tool.setuptools.package-data]"
        assert wheel.getinfo(f"tiermem/{asset}").file_size == (built.source / asset).stat().st_size


def test_wheel_has_only_tiermem_at_the_top(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"tiermem"}
    assert not OLD_TOP_LEVEL & set(os.listdir(built.site))


PROBE = textwrap.dedent(
    """
    import importlib.util, json
    from importlib import resources
    from tiermem import system, create_memory_capability, MemoryContext
    import tiermem, memory, jobs, prompts
    assets = resources.files("tiermem.memory") / "_assets"
    print(json.dumps({
        "tiermem": tiermem.__file__,
        "memory": memory.__file__,
        "jobs": jobs.__file__,
        "prompts": prompts.__file__,
        "pipelines": importlib.util.find_spec("pipelines") is not None,
        "own": [memory.OWN, jobs.OWN, prompts.OWN],
        "assets": sorted(p.name for p in assets.iterdir() if p.is_dir()),
    }))
    """
)


def _application(folder: Path) -> Path:
    """An agent project with modules named like ours."""
    folder.mkdir()
    (folder / "memory.py").write_text("OWN = 'memory'\n", encoding="utf-8")
    (folder / "jobs").mkdir()
    (folder / "jobs" / "__init__.py").write_text("OWN = 'jobs'\n", encoding="utf-8")
    (folder / "prompts.py").write_text("OWN = 'prompts'\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("install", ["wheel", "editable"])
def test_tiermem_imports_beside_an_applications_own_modules(install: str, request: pytest.FixtureRequest) -> None:
    """The issue's acceptance: ``from tiermem import ...`` works from an agent project's own folder."""
    app = _application(request.getfixturevalue("tmp_path") / "app")
    if install == "wheel":
        site = request.getfixturevalue("built").site
        env, home = clean_env(PYTHONPATH=str(site)), site / "tiermem"
    else:
        env, home = clean_env(), REPO / "tiermem"  # the editable install this suite runs against
    done = run_python(PROBE, cwd=app, env=env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert Path(seen["tiermem"]).parent == home
    assert (seen["memory"], seen["jobs"], seen["prompts"]) == (
        str(app / "memory.py"),
        str(app / "jobs" / "__init__.py"),
        str(app / "prompts.py"),
    )
    assert seen["own"] == ["memory", "jobs", "prompts"]
    assert not seen["pipelines"]
    assert seen["assets"] == sorted(p.name for p in (REPO / "memory" / "_assets").iterdir() if p.is_dir())
