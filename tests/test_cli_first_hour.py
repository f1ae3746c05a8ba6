"""What a new user meets in the first hour of ``tiermem`` (issue 36): the demo's store looked at with the
wrong namespace, a mistyped path, a missing key, a usage slip. Each is said in one line and exits non-zero.

In-process through click's runner, as ``tests/test_cli.py``; the console script as a subprocess where the
exact bytes on stderr or a server process matter (usage errors, ``tiermem mcp``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from litellm.llms.custom_llm import CustomLLMError

from tests.test_cli import _tiermem, said
from tiermem.memory._cli._main import cli
from tiermem.memory._llm._client import install_fake_provider

# litellm lazily imports a module whose pydantic TypedDict warns on every model call.
pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

HISTORY = [
    {"session_id": "s-1", "turns": [
        {"at": "2024-05-02T10:00:00+00:00", "messages": [{"role": "user", "content": "My wife Moni loves hiking."}]},
        {"at": "2024-05-02T10:05:00+00:00", "messages": [{"role": "user", "content": "I am allergic to peanuts."}]},
    ]},
]  # fmt: skip


def script(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script, stdin closed (a stdio MCP server ends at once), no API key in its environment."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [*_tiermem(), *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def as_json(*args: str) -> Any:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def counts(store: str) -> dict[str, dict[str, int]]:
    stats: dict[str, dict[str, int]] = as_json("--store", store, "stats", "sam", "--namespace", "demo")["counts"]
    return stats


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The store `tiermem demo --store` leaves: user sam in namespace demo."""
    path = str(tmp_path_factory.mktemp("demo") / "store")
    result = run("demo", "--store", path)
    assert result.exit_code == 0, result.output
    assert "namespace: demo, model: rules" in result.stdout and "show sam --namespace demo" in result.stdout
    return path


# -- the demo ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_rerunning_the_demo_into_one_store_doubles_nothing(demo: str, tmp_path: Path) -> None:
    store = str(shutil.copytree(demo, tmp_path / "store"))
    first = counts(store)

    again = run("demo", "--store", store)

    assert again.exit_code == 0, again.output
    assert counts(store) == first
    assert sum(first["turns"].values()) == 8  # the demo's eight turns, once


# -- which store, namespace and model ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["show", "sam", "-n", "demo"], "namespace demo, user sam; model none (reads only)"),
        (["stats", "sam", "-n", "demo", "--json"], "namespace demo, user sam; model none (reads only)"),
        (["users"], "every namespace; model none (reads only)"),
        (["export", "sam", "-n", "demo"], "namespace demo, user sam; model none (reads only)"),
        (["forget", "{fact}", "-u", "sam", "-n", "demo"], "namespace demo, user sam; model rules"),
        (["search", "sam", "Moni", "-n", "demo"], "namespace demo, user sam; model none (reads only)"),
        (["graph", "sam", "-n", "demo", "--json"], "namespace demo, user sam; model none (reads only)"),
        (["history", "{fact}", "-u", "sam", "-n", "demo"], "namespace demo, user sam; model none (reads only)"),
        (["pin", "{fact}", "-u", "sam", "-n", "demo"], "namespace demo, user sam; model rules"),
    ],
    ids=["show", "stats-json", "users", "export", "forget", "search", "graph-json", "history", "pin"],
)
def test_each_command_says_its_store_namespace_and_model_on_stderr(
    demo: str, tmp_path: Path, args: list[str], line: str
) -> None:
    store = str(shutil.copytree(demo, tmp_path / "store"))
    fact = as_json("--store", store, "show", "sam", "-n", "demo", "--tier", "semantic")[0]["id"]

    result = run("--store", store, *(a.format(fact=fact) for a in args))

    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == f"tiermem: using store {store}; {line}"
    assert "tiermem: using" not in result.stdout
    if "--json" in args:  # the line is on stderr, so stdout stays JSON
        printed = json.loads(result.stdout)
        assert printed["counts"]["semantic"] if args[0] == "stats" else printed


# -- an unknown user or namespace ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "sam"], "no user 'sam' in namespace 'default'; the store holds this user in namespace 'demo': "
                          "give --namespace demo"),
        (["search", "sam", "Moni"], "no user 'sam' in namespace 'default'; the store holds this user in namespace"),
        (["stats", "sam"], "no user 'sam' in namespace 'default'"),
        (["graph", "sam"], "no user 'sam' in namespace 'default'"),
        (["export", "sam"], "no user 'sam' in namespace 'default'"),
        (["show", "nobody", "-n", "demo"], "no user 'nobody' in namespace 'demo'; namespaces in the store: 'demo'"),
    ],
    ids=["show", "search", "stats", "graph", "export", "unknown-user"],
)  # fmt: skip
def test_an_unknown_user_or_namespace_is_an_error_naming_what_exists(demo: str, args: list[str], message: str) -> None:
    result = run("--store", demo, *args)

    assert result.exit_code == 1
    assert len(said(result)) == 1 and said(result)[0].startswith(f"tiermem: error: {message}")
    assert result.stdout == ""


# -- graph --json, pin on a turn --------------------------------------------------------------------------


def test_graph_json_is_json(demo: str) -> None:
    graph = as_json("--store", demo, "graph", "sam", "-n", "demo")

    assert "user" in graph["nodes"] and "moni" in graph["nodes"]
    assert {(e["source"], e["relation"], e["target"]) for e in graph["edges"]} >= {("user", "married to", "moni")}
    assert all(e["id"].startswith("edge_") and e["current"] in (True, False) for e in graph["edges"])
    both = run("--store", demo, "graph", "sam", "-n", "demo", "--json", "--format", "svg")
    assert both.exit_code == 1 and "--json prints the graph as JSON" in said(both)[0]


def test_pinning_a_turn_says_what_can_be_pinned(demo: str) -> None:
    fact = as_json("--store", demo, "show", "sam", "-n", "demo", "--tier", "semantic")[0]["id"]
    turn = as_json("--store", demo, "history", fact, "-u", "sam", "-n", "demo")[0]["turns"][0]["id"]

    result = run("--store", demo, "pin", turn, "-u", "sam", "-n", "demo")

    assert result.exit_code == 1
    assert said(result) == [
        f"tiermem: error: {turn!r} is a captured turn (what was said, kept in the turn log): only facts and "
        "episodes can be pinned; pin the fact or episode learnt from it (list them with tier semantic or episodic)"
    ]


# -- import-history ------------------------------------------------------------------------------------


def test_import_history_of_an_empty_list_imports_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("[]")

    result = run("--store", str(tmp_path / "store"), "--embedder", "hashing", "import-history", "u-1", str(empty))

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("imported 0 conversation(s), 0 turn(s)")


def _unauthorized(model: str, messages: list[dict[str, Any]], call: Any = None) -> str:
    raise CustomLLMError(status_code=401, message="Incorrect API key provided")  # type: ignore[no-untyped-call]  # litellm leaves it untyped


def test_import_history_exits_non_zero_when_every_turn_was_deferred(tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    history.write_text(json.dumps(HISTORY))
    model = install_fake_provider("first-hour-401", _unauthorized)
    store = ["--store", str(tmp_path / "store"), "--embedder", "hashing"]

    result = run(*store, "import-history", "u-1", str(history), "--model", model)

    assert result.exit_code == 1
    assert "tiermem: error: all 2 turn(s) deferred, none observed: check the model and its key" in result.stderr
    assert json.loads(run(*store, "--json", "stats", "u-1").stdout)["counts"]["turns"] == {"pending": 2}


def test_a_near_miss_of_rules_is_refused_by_the_cli(tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    history.write_text(json.dumps(HISTORY))

    result = run("--store", str(tmp_path / "store"), "import-history", "u-1", str(history), "--model", "rule")

    assert result.exit_code == 1
    assert (
        said(result) == ["tiermem: error: unknown model 'rule': did you mean 'rules' (the offline rules model)?"]
        and not (tmp_path / "store").exists()
    )


# -- usage errors and tiermem mcp, through the console script ------------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["show"], "tiermem: error: Missing argument 'USER'. (see 'tiermem show --help')"),
        (["--bogus"], "tiermem: error: No such option '--bogus'. (see 'tiermem --help')"),
        (["bogus"], "tiermem: error: No such command 'bogus'. (see 'tiermem --help')"),
        (["show", "u-1", "--limit", "0"], "tiermem: error: Invalid value for '--limit': 0 is not in the range x>=1."
                                          " (see 'tiermem show --help')"),
    ],
    ids=["missing-argument", "unknown-option", "unknown-command", "bad-value"],
)  # fmt: skip
def test_a_usage_error_is_one_line_pointing_at_help(args: list[str], line: str) -> None:
    done = script(*args)

    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (2, [line], "")


def _mcp(*args: str) -> subprocess.CompletedProcess[str]:
    return script("mcp", "--user-id", "u-1", "--embedder", "hashing", *args)


@pytest.mark.slow
@pytest.mark.parametrize("writes", [[], ["--allow-writes"]], ids=["read-only", "allow-writes"])
def test_mcp_refuses_a_store_that_is_not_there(tmp_path: Path, writes: list[str]) -> None:
    pytest.importorskip("mcp")
    typo = tmp_path / "stroe"

    done = _mcp("--store", str(typo), *writes)

    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"tiermem: error: no tiermem store at {str(typo)!r}; check the path, or add "
                                        "--create to start one" + ("" if writes else " (a new one needs "
                                        "--allow-writes --create)")]  # fmt: skip
    assert not typo.exists()


@pytest.mark.slow
def test_mcp_create_starts_a_new_store(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    fresh = tmp_path / "fresh"

    done = _mcp("--store", str(fresh), "--allow-writes", "--create")  # stdin closed: the server ends at once

    assert done.returncode == 0, done.stderr
    assert f"tiermem: using store {fresh}; namespace default, user u-1; model rules" in done.stderr
    assert fresh.is_dir()
