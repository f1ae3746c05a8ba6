"""The ``tiermem`` command: every data command against a real store the library filled offline.

Most cases run the click command in-process (``CliRunner``); a handful run the installed console
script as a subprocess (help, version, an error's exit code and single line, JSON output).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tiermem import HashingEmbedder, MemoryContext, system
from tiermem.memory._cli._main import cli
from tiermem.memory.testing import FrozenClock

U1 = MemoryContext(user_id="u-1", session_id="s-1")
U2 = MemoryContext(user_id="u-2", session_id="s-9")
SAID = [
    "My wife Moni loves hiking. I am allergic to peanuts.",
    "My brother Tom lives in Berlin. I work at Acme Corp.",
]
SECRET = "The vault code is 4711."
HISTORY = [
    {"session_id": "2024-05-02", "turns": [
        {"at": "2024-05-02T10:00:00+00:00", "messages": [
            {"role": "user", "content": "My wife Moni loves hiking."}, {"role": "assistant", "content": "Nice!"},
        ]},
        {"at": "2024-05-02T10:05:00+00:00", "messages": [{"role": "user", "content": "I am allergic to peanuts."}]},
    ]},
    {"session_id": "2024-06-10", "turns": [
        {"at": "2024-06-10T09:00:00+00:00", "messages": [{"role": "user", "content": "I work at Acme Corp."}]},
    ]},
]  # fmt: skip
COMMANDS = [
    "users", "show", "search", "get", "history", "stats", "graph", "forget", "erase", "pin", "unpin", "grant",
    "revoke", "grants", "export", "import", "import-history", "ingest", "demo", "worker", "janitor", "mcp", "reembed",
    "serve", "ui",
]  # fmt: skip


async def _fill(path: str) -> None:
    mem = system(model="rules", store=path, embedder=HashingEmbedder(64), semantic={"relations": True})
    for text in SAID:
        await mem.capture(U1, [{"role": "user", "content": text}])
    await mem.end_session(U1)
    await mem.consolidate(U1)
    await mem.remember(U2, SECRET)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once: user u-1 from two captured turns (facts, an episode, edges), user u-2 with one fact."""
    path = tmp_path_factory.mktemp("cli") / "store"
    asyncio.run(_fill(str(path)))
    return path


@pytest.fixture
def store(filled: Path, tmp_path: Path) -> str:
    """A private copy of the filled store, for a test that changes it."""
    return str(shutil.copytree(filled, tmp_path / "store"))


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def ok(*args: str) -> Result:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result


def said(result: Result) -> list[str]:
    """stderr's lines but the one saying which store, namespace and model the command uses."""
    return [line for line in result.stderr.splitlines() if not line.startswith("tiermem: using store ")]


def as_json(*args: str) -> Any:
    return json.loads(ok(*args, "--json").stdout)


def fact_id(store: str, text: str) -> str:
    items = as_json("show", "u-1", "--store", store, "--tier", "semantic")
    return next(str(i["id"]) for i in items if text in i["text"])


def _tiermem() -> list[str]:
    script = Path(sys.executable).with_name("tiermem")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tiermem.memory._cli._main"]


def _process(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([*_tiermem(), *args], capture_output=True, text=True, env=env, timeout=120, check=False)


# -- the console script ------------------------------------------------------------------------


def test_help_lists_every_command() -> None:
    done = _process("--help")
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == COMMANDS


def test_version_is_the_installed_one() -> None:
    done = _process("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"tiermem {metadata.version('tiermem')}")


def test_an_error_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    done = _process("--store", str(tmp_path / "missing"), "show", "u-1")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"tiermem: error: no tiermem store at {str(tmp_path / 'missing')!r}; "
                                        "give --store PATH or set TIERMEM_STORE"]  # fmt: skip
    assert not (tmp_path / "missing").exists()  # a read never creates a store


def test_json_output_of_the_script_parses(filled: Path) -> None:
    done = _process("--json", "stats", "u-1", "--store", str(filled))
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["counts"]["semantic"]["active"] >= 2
    assert stats["bytes_on_disk"] > 0


# -- read --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    [["--store", "{s}", "users"], ["users", "--store", "{s}"], ["users"]],
    ids=["global-option", "after-the-command", "environment"],
)
def test_users_from_the_option_anywhere_or_the_environment(filled: Path, where: list[str]) -> None:
    result = run(*(w.format(s=filled) for w in where), env={"TIERMEM_STORE": str(filled)})
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["default", "u-1", "default", "u-2"]


def test_users_json(filled: Path) -> None:
    assert as_json("--store", str(filled), "users") == [
        {"namespace": "default", "user_id": "u-1"},
        {"namespace": "default", "user_id": "u-2"},
    ]


def test_show_lists_memories_and_filters_them(filled: Path) -> None:
    s = str(filled)
    assert "allergic to peanuts" in ok("show", "u-1", "--store", s).stdout
    facts = as_json("show", "u-1", "--store", s, "--tier", "semantic")
    assert facts and {f["tier"] for f in facts} == {"semantic"}
    assert SECRET not in json.dumps(facts)  # another user's memory never shows
    about_moni = as_json("show", "u-1", "--store", s, "--subject", "Moni")
    about = [(i["subject"], i["metadata"].get("target"), *i["metadata"].get("subjects", [])) for i in about_moni]
    assert about and all("moni" in subjects for subjects in about)
    one = run("show", "u-1", "--store", s, "--limit", "1")
    assert len(one.stdout.splitlines()) == 1 and "raise --limit" in one.stderr


def test_search_recalls_for_a_query(filled: Path) -> None:
    found = as_json("search", "u-1", "what am I allergic to?", "--store", str(filled), "--limit", "3")
    assert "peanuts" in found[0]["text"] and found[0]["score"] > 0


def test_get_and_history_need_the_owner(filled: Path) -> None:
    s = str(filled)
    rid = fact_id(s, "peanuts")
    assert as_json("get", rid, "--user", "u-1", "--store", s)["id"] == rid
    versions = as_json("history", rid, "-u", "u-1", "--store", s)
    assert [v["status"] for v in versions] == ["active"]
    assert any("peanuts" in m["content"] for t in versions[0]["turns"] for m in t["messages"])
    wrong = run("get", rid, "--user", "u-2", "--store", s)
    assert wrong.exit_code == 1 and said(wrong)[0].startswith("tiermem: error: no memory")


def test_history_shows_a_correction(store: str) -> None:
    rid = fact_id(store, "Berlin")
    mem = system(model="rules", store=store)
    asyncio.run(mem.update(U1, rid, text="My brother Tom lives in Munich."))
    text = ok("history", rid, "--user", "u-1", "--store", store).stdout
    assert text.index("superseded") < text.index("active") and "Munich" in text and "replaces " + rid in text


def test_stats_of_a_user_and_of_the_store(filled: Path) -> None:
    s = str(filled)
    assert "semantic:" in ok("stats", "u-1", "--store", s).stdout
    whole = as_json("stats", "--store", s)
    assert [u["user_id"] for u in whole["users"]] == ["u-1", "u-2"] and whole["bytes_on_disk"] > 0


def test_graph_dot_has_subjects_and_labelled_edges(filled: Path) -> None:
    dot = ok("graph", "u-1", "--store", str(filled)).stdout
    assert dot.startswith('digraph "default/u-1" {') and dot.rstrip().endswith("}")
    assert '"user" -> "moni" [label="married to"];' in dot
    assert '"tom" -> "user" [label="brother of"];' in dot


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_graph_svg(filled: Path, tmp_path: Path) -> None:
    out = tmp_path / "graph.svg"
    ok("graph", "u-1", "--store", str(filled), "--format", "svg", "-o", str(out))
    assert "<svg" in out.read_text() and "married to" in out.read_text()


def test_graph_svg_without_graphviz_says_how_to_install_it(filled: Path, tmp_path: Path) -> None:
    result = run("graph", "u-1", "--store", str(filled), "--format", "svg", env={"PATH": str(tmp_path)})
    assert result.exit_code == 1
    assert len(said(result)) == 1 and "apt-get install graphviz" in result.stderr


# -- change ------------------------------------------------------------------------------------


def test_forget_removes_the_memory(store: str) -> None:
    rid = fact_id(store, "peanuts")
    report = as_json("forget", rid, "--user", "u-1", "--store", store)
    assert rid in report["forgotten"]
    assert "peanuts" not in ok("show", "u-1", "--store", store, "--tier", "semantic").stdout
    again = run("forget", rid, "--user", "u-1", "--store", store)
    assert again.exit_code == 1 and "no memory" in again.stderr


def test_pin_and_unpin(store: str) -> None:
    rid = fact_id(store, "peanuts")
    assert ok("pin", rid, "--user", "u-1", "--store", store).stdout.strip() == f"pinned {rid}"
    assert as_json("history", rid, "--user", "u-1", "--store", store)[-1]["pinned"] is True
    assert as_json("unpin", rid, "--user", "u-1", "--store", store)["pinned"] is False


def test_erase_needs_yes_then_erases_the_user(store: str) -> None:
    assert run("erase", "u-1", "--store", store).exit_code == 1
    assert "u-1" in ok("users", "--store", store).stdout
    report = as_json("erase", "u-1", "--yes", "--store", store)
    assert report["rows"]["facts"] >= 2
    assert ok("users", "--store", store).stdout.split() == ["default", "u-2"]


# -- move --------------------------------------------------------------------------------------


def test_export_import_round_trip(filled: Path, tmp_path: Path) -> None:
    exported = ok("export", "u-1", "--store", str(filled))
    lines = exported.stdout.splitlines()
    assert json.loads(lines[0])["format"] == "tiermem-export" and "exported" in exported.stderr
    dump = tmp_path / "u-1.jsonl"
    dump.write_text(exported.stdout)
    fresh = str(tmp_path / "fresh")
    imported = as_json("--embedder", "hashing", "import", "u-1", str(dump), "--store", fresh)
    assert imported["records"]["fact"] == sum(json.loads(line)["kind"] == "fact" for line in lines[1:])
    ok("export", "u-1", "--store", fresh, "-o", str(tmp_path / "again.jsonl"))
    assert (tmp_path / "again.jsonl").read_text().splitlines()[1:] == lines[1:]
    again = CliRunner().invoke(cli, ["--store", fresh, "import", "u-1", "-"], input=exported.stdout)
    assert again.exit_code == 0 and again.stdout.startswith("imported"), again.output  # from stdin, idempotent
    assert ok("export", "u-1", "--store", fresh).stdout.splitlines()[1:] == lines[1:]


def test_import_history_dates_memories_by_the_history(tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    history.write_text(json.dumps(HISTORY))
    fresh = ["--store", str(tmp_path / "fresh"), "--embedder", "hashing"]
    report = as_json(*fresh, "import-history", "u-1", str(history), "--model", "rules")
    assert (report["conversations"], report["turns"], report["episodes"], report["errors"]) == (2, 3, 2, [])
    remembered = as_json(*fresh, "show", "u-1", "--tier", "episodic", "--tier", "semantic")
    assert {i["tier"] for i in remembered} == {"episodic", "semantic"}
    assert all(i["created_at"].startswith("2024-") for i in remembered)
    again = as_json(*fresh, "import-history", "u-1", str(history), "--model", "rules")
    assert again["duplicates"] == 3  # a rerun (after a crash) skips what is in


def held(*store: str) -> list[tuple[str, str, object]]:
    """What ``show`` lists of u-1, without the confidence (which decays as the clock runs)."""
    return sorted((i["id"], i["tier"], i["metadata"].get("status")) for i in as_json(*store, "show", "u-1"))


def test_janitor_after_import_history_keeps_it_and_says_so_per_tier(tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    history.write_text(json.dumps(HISTORY))
    fresh = ["--store", str(tmp_path / "fresh"), "--embedder", "hashing"]
    ok(*fresh, "import-history", "u-1", str(history), "--model", "rules")
    shown = held(*fresh)

    dry = as_json(*fresh, "janitor", "--dry-run", "--model", "rules")
    said = ok(*fresh, "janitor", "--model", "rules").stdout

    removed = ("facts_archived", "episodes_expired", "turns_removed", "stopped")
    assert (dry["dry_run"], dry["users"], [dry[k] for k in removed]) == (True, 1, [0, 0, 0, []])
    assert said.startswith("1 user(s), removed: 0 fact(s) archived, 0 episode(s) expired, 0 turn(s) deleted")
    assert held(*fresh) == shown and {tier for _, tier, _ in shown} >= {"semantic", "episodic"}


def test_janitor_guard_stops_a_wipe_and_force_runs_it(tmp_path: Path) -> None:
    # Imported in mid-2024 and untouched since: by today every fact faded and every episode is past its TTL.
    path = str(tmp_path / "old")
    then = FrozenClock(datetime(2024, 7, 1, tzinfo=UTC))
    mem = system(model="rules", store=path, embedder=HashingEmbedder(64), clock=then, hygiene={"guard_min_removed": 0})
    asyncio.run(mem.import_conversations(MemoryContext(user_id="u-1"), HISTORY))
    shown = held("--store", path)

    dry = ok("--store", path, "janitor", "--dry-run").stdout
    stopped = as_json("--store", path, "janitor")
    assert held("--store", path) == shown
    forced = as_json("--store", path, "janitor", "--force")

    assert "stopped for default/u-1: it would remove 3 facts, 2 episodes, 3 turns (100% of 8)" in dry
    assert "--force" in dry
    assert [(s["user_id"], s["would_remove"], s["share"]) for s in stopped["stopped"]] == [
        ("u-1", {"facts": 3, "episodes": 2, "turns": 3}, 1.0)
    ]
    assert stopped["facts_archived"] == stopped["episodes_expired"] == 0
    removed = (forced["facts_archived"], forced["episodes_expired"], forced["turns_removed"], forced["stopped"])
    assert removed == (3, 2, 3, [])
    left = {(tier, status) for _, tier, status in held("--store", path) if tier in ("semantic", "episodic")}
    assert left == {("semantic", "archived")}


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["get", "fact_nope", "--user", "u-1"], 1, "tiermem: error: no memory 'fact_nope'"),
        (["import", "u-1", "{tmp}/missing.jsonl"], 1, "tiermem: error: no export file"),
        (["show", "u-1", "--limit", "0"], 2, "Invalid value for '--limit'"),
        (["show", "u-1", "--tier", "bogus"], 2, "Invalid value for '--tier'"),
        (["history", "fact_x"], 2, "Missing option '--user'"),
        (["show", "bad\u0007user"], 2, "control characters"),
        (["export", "u-1", "-o", "{tmp}/no/such/folder/u-1.jsonl"], 1, "tiermem: error:"),
        (["erase", "u-1"], 1, "tiermem: error: erase deletes all of 'u-1' in 'default' for good; add --yes"),
        (["import-history", "u-1", "{tmp}/not.json"], 1, "not.json: not JSON"),
        (["import-history", "u-1", "{tmp}/bad.json"], 1, "conversation 0: session_id must be a non-empty string"),
    ],
    ids=[
        "unknown-id",
        "missing-import-file",
        "bad-limit",
        "bad-tier",
        "no-user",
        "bad-user-id",
        "unwritable",
        "erase",
        "history-not-json",
        "history-bad-conversation",
    ],
)
def test_bad_input_exits_non_zero_with_a_message(
    filled: Path, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    (tmp_path / "not.json").write_text("{not json")
    (tmp_path / "bad.json").write_text('[{"session_id": 1, "turns": []}]')
    result = run("--store", str(filled), *(a.format(tmp=tmp_path) for a in args))
    assert result.exit_code == code
    assert message in result.stderr
    assert result.stdout == ""
    assert len(said(result)) == 1  # one line, a usage error too
