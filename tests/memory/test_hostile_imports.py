"""Hostile export files: each is refused with one clear error before anything is written, through the API and
the CLI; an older export never undoes a later update; text that cannot be stored is refused where it enters."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tiermem import HashingEmbedder, InvalidArgumentError, MemoryContext, MemorySystem, system
from tiermem.memory._cli._main import cli
from tiermem.memory.testing import FrozenClock

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

USER = MemoryContext(user_id="u-1", session_id="s-1")
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SAID = ["My wife Moni loves hiking. I am allergic to peanuts.", "I work at Acme Corp as a data engineer."]


def make(path: Path, clock: FrozenClock | None = None) -> MemorySystem:
    return system(model="rules", store=str(path), embedder=HashingEmbedder(64), clock=clock or FrozenClock(START))


async def _fill(path: Path) -> list[str]:
    mem = make(path)
    for text in SAID:
        await mem.capture(USER, [{"role": "user", "content": text}])
    await mem.end_session(USER)
    await mem.consolidate(USER)
    exported = path.parent / "u-1.jsonl"
    await mem.export(USER, exported)
    return exported.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Built once: user u-1 with turns, working entries, an episode and facts, and its export's lines."""
    path = tmp_path_factory.mktemp("hostile") / "store"
    return path, asyncio.run(_fill(path))


@pytest.fixture
def store(filled: tuple[Path, list[str]], tmp_path: Path) -> Path:
    return Path(shutil.copytree(filled[0], tmp_path / "store"))


@pytest.fixture
def good(filled: tuple[Path, list[str]]) -> list[str]:
    return filled[1]


def disk(path: Path) -> dict[str, str]:
    """Every file of the store and its bytes' hash: what "nothing was written" is checked against."""
    return {
        str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.rglob("*"))
        if f.is_file()
    }


def _errors(stderr: str) -> list[str]:
    """What a command printed on stderr besides the line naming the store it uses."""
    return [line for line in stderr.splitlines() if not line.startswith("tiermem: using store ")]


def _index(lines: list[str], kind: str) -> int:
    return next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == kind)


def _fact(lines: list[str], edit: Callable[[str], str]) -> list[str]:
    """The export with its first fact's line rewritten (facts come after the turns, working entries and
    episodes: a file checked line by line as it is written would have written those by then)."""
    i = _index(lines, "fact")
    return [*lines[:i], edit(lines[i]), *lines[i + 1 :]]


def _field(name: str, raw: str) -> Callable[[str], str]:
    """A fact line whose ``name`` field is the raw JSON text ``raw``."""

    def edit(line: str) -> str:
        row = json.loads(line)
        row["record"][name] = "@@RAW@@"
        return json.dumps(row).replace('"@@RAW@@"', raw)

    return edit


def _header(edit: Callable[[dict[str, object]], object]) -> Callable[[list[str]], list[str]]:
    def change(lines: list[str]) -> list[str]:
        header = json.loads(lines[0])
        edit(header)
        return [json.dumps(header), *lines[1:]]

    return change


DEEP = 100_000
HOSTILE: dict[str, Callable[[list[str]], list[str] | bytes]] = {
    "lone-surrogate": lambda lines: _fact(lines, _field("text", '"The user \\ud800 likes tea."')),
    "lone-surrogate-in-metadata": lambda lines: _fact(lines, _field("metadata", '{"note": "\\udfff"}')),
    "deep-nesting": lambda lines: _fact(lines, _field("metadata", "[" * DEEP + "]" * DEEP)),
    "5000-digit-number": lambda lines: _fact(lines, _field("confidence", "9" * 5000)),
    "nan": lambda lines: _fact(lines, _field("confidence", "NaN")),
    "infinity": lambda lines: _fact(lines, _field("confidence", "-Infinity")),
    "huge-string": lambda lines: _fact(lines, _field("text", json.dumps("tea " * 1_500_000))),
    "wrong-type": lambda lines: _fact(lines, _field("provenance", "5")),
    "year-1-with-an-offset": lambda lines: _fact(lines, _field("created_at", '"0001-01-01T00:00:00+05:00"')),
    "year-9999-behind-utc": lambda lines: _fact(lines, _field("updated_at", '"9999-12-31T23:00:00-05:00"')),
    "duplicate-keys": lambda ls: _fact(ls, lambda line: line.replace('"kind": "fact"', '"kind": 1, "kind": "fact"')),
    "truncated-last-line": lambda lines: [*lines[:-1], lines[-1][: len(lines[-1]) // 2]],
    "not-an-object": lambda lines: _fact(lines, lambda line: f"[{line}]"),
    "header-without-namespace": _header(lambda h: h.pop("namespace")),
    "header-without-user": _header(lambda h: h.pop("user_id")),
    "header-user-not-an-id": _header(lambda h: h.update(user_id=["u-1"])),
    "bom": lambda lines: b"\xef\xbb\xbf" + "\n".join(lines).encode(),
    "not-utf-8": lambda lines: "\n".join(lines).encode().replace(b"Moni", b"M\xffni", 1),
}  # fmt: skip


def write(case: str, good: list[str], path: Path) -> Path:
    content = HOSTILE[case](good)
    path.write_bytes(content if isinstance(content, bytes) else "\n".join(content).encode("utf-8", "surrogatepass"))
    return path


@pytest.mark.parametrize("case", list(HOSTILE), ids=list(HOSTILE))
async def test_a_hostile_file_is_refused_and_the_store_is_byte_identical(
    store: Path, good: list[str], tmp_path: Path, case: str
) -> None:
    path = write(case, good, tmp_path / "hostile.jsonl")
    mem = make(store)
    target = MemoryContext(user_id="u-new")  # a user who has nothing yet: any line written would show
    before = disk(store)

    with pytest.raises(InvalidArgumentError) as refused:
        await mem.import_(target, path)

    assert disk(store) == before
    assert len(str(refused.value)) < 1_000 and "\n" not in str(refused.value).strip()


@pytest.mark.parametrize("case", list(HOSTILE), ids=list(HOSTILE))
def test_the_cli_prints_one_error_line_for_a_hostile_file(
    store: Path, good: list[str], tmp_path: Path, case: str
) -> None:
    path = write(case, good, tmp_path / "hostile.jsonl")
    before = disk(store)

    result = CliRunner().invoke(cli, ["--store", str(store), "import", "u-new", str(path)], catch_exceptions=False)

    assert result.exit_code == 1
    (line,) = _errors(result.stderr)
    assert line.startswith("tiermem: error: line ") or line.startswith("tiermem: error: ")
    assert len(line) < 2_100 and result.stdout == ""
    assert disk(store) == before


def _tiermem() -> list[str]:
    script = Path(sys.executable).with_name("tiermem")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tiermem.memory._cli._main"]


@pytest.mark.parametrize("case", ["lone-surrogate", "deep-nesting"], ids=["lone-surrogate", "deep-nesting"])
def test_the_console_script_prints_one_error_line_and_writes_nothing(
    store: Path, good: list[str], tmp_path: Path, case: str
) -> None:
    path = write(case, good, tmp_path / "hostile.jsonl")
    before = disk(store)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    done = subprocess.run(
        [*_tiermem(), "--store", str(store), "import", "u-new", str(path)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip

    assert done.returncode == 1
    (line,) = _errors(done.stderr)
    assert line.startswith("tiermem: error: line ")
    assert disk(store) == before


async def test_an_older_export_does_not_undo_a_later_update(store: Path, good: list[str], tmp_path: Path) -> None:
    clock = FrozenClock(START + timedelta(days=1))
    mem = make(store, clock)
    old = tmp_path / "old.jsonl"
    await mem.export(USER, old)
    clock.advance(days=1)
    acme = next(f for f in await mem.facts(USER) if "Acme" in f.text)
    updated = await mem.update(USER, acme.id, text="The user works at Initech as a data engineer.")

    await mem.import_(USER, old)

    active = {f.id: f.text for f in await mem.facts(USER) if "data engineer" in f.text}
    assert active == {updated.id: "The user works at Initech as a data engineer."}
    history = {f.id: f.status for f in await mem.facts(USER, include_inactive=True) if "data engineer" in f.text}
    assert history == {acme.id: "superseded", updated.id: "active"}


@pytest.mark.parametrize(
    "write_it",
    [
        pytest.param(lambda mem: mem.capture(USER, [{"role": "user", "content": "I like \ud800 tea."}]), id="capture"),
        pytest.param(lambda mem: mem.capture(USER, [{"role": "user", "content": "Hi", "name": "\udc00"}]), id="name"),
        pytest.param(lambda mem: mem.remember(USER, "The user likes \ud800 tea."), id="remember"),
        pytest.param(
            lambda mem: mem.capture(
                USER, [{"role": "user", "content": "Hi"}], at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))
            ),
            id="capture-at-year-1",
        ),
    ],
)
async def test_text_or_a_time_that_cannot_be_stored_is_refused_where_it_enters(
    store: Path, write_it: Callable[[MemorySystem], object]
) -> None:
    mem = make(store)
    before = disk(store)

    with pytest.raises(InvalidArgumentError):
        await write_it(mem)  # type: ignore[misc]

    assert disk(store) == before


# -- import-history: past conversations (a JSON list), the same corpus of hostile files --------------------

HISTORY = [
    {
        "session_id": f"h-{n}",
        "turns": [
            {"at": f"2025-05-0{n}T10:0{i}:00+00:00", "messages": [{"role": "user", "content": f"I like tea {i}."}]}
            for i in range(2)
        ],
    }
    for n in (1, 2)
]


def _last(edit: Callable[[dict[str, Any]], object]) -> Callable[[], str]:
    """The history with its last conversation edited (a file checked as it is written would have written the
    first by then); the edit may leave ``@@RAW@@`` for raw JSON text put in afterwards."""

    def text() -> str:
        history = json.loads(json.dumps(HISTORY))
        edit(history[-1])
        return json.dumps(history)

    return text


def _raw(where: Callable[[dict[str, Any]], dict[str, Any]], key: str, raw: str) -> Callable[[], str]:
    return lambda: _last(lambda c: where(c).update({key: "@@RAW@@"}))().replace('"@@RAW@@"', raw)


def _turn(c: dict[str, Any]) -> dict[str, Any]:
    return c["turns"][-1]  # type: ignore[no-any-return]


def _message(c: dict[str, Any]) -> dict[str, Any]:
    return c["turns"][-1]["messages"][0]  # type: ignore[no-any-return]


HOSTILE_HISTORY: dict[str, Callable[[], str | bytes]] = {
    "lone-surrogate": _raw(_message, "content", '"I like \\ud800 tea."'),
    "lone-surrogate-in-session-id": _raw(lambda c: c, "session_id", '"h-\\udfff"'),
    "lone-surrogate-in-name": _raw(_message, "name", '"\\udc00"'),
    "deep-nesting": _raw(_message, "content", "[" * DEEP + "]" * DEEP),
    "5000-digit-number": _raw(_turn, "at", "9" * 5000),
    "nan": _raw(_turn, "at", "NaN"),
    "duplicate-keys": lambda: json.dumps(HISTORY).replace('"role": "user"', '"role": "user", "role": "user"', 1),
    "truncated": lambda: json.dumps(HISTORY)[:-7],
    "year-1-with-an-offset": _raw(_turn, "at", '"0001-01-01T00:00:00+05:00"'),
    "wrong-type": _raw(_turn, "messages", "5"),
    "unknown-role": _raw(_message, "role", '"robot"'),
    "not-a-list": lambda: json.dumps(HISTORY[0]),
    "bom": lambda: b"\xef\xbb\xbf" + json.dumps(HISTORY).encode(),
    "not-utf-8": lambda: json.dumps(HISTORY).encode().replace(b"tea", b"t\xffa", 1),
}  # fmt: skip
# Files Python's own parser reads into objects: the API is handed those objects.
PARSED = ["lone-surrogate", "lone-surrogate-in-session-id", "lone-surrogate-in-name", "year-1-with-an-offset",
          "wrong-type", "unknown-role"]  # fmt: skip


def write_history(case: str, path: Path) -> Path:
    content = HOSTILE_HISTORY[case]()
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    return path


@pytest.mark.parametrize("case", list(HOSTILE_HISTORY), ids=list(HOSTILE_HISTORY))
def test_import_history_prints_one_error_line_for_a_hostile_file_and_writes_nothing(
    store: Path, tmp_path: Path, case: str
) -> None:
    path = write_history(case, tmp_path / "history.json")
    before = disk(store)

    result = CliRunner().invoke(
        cli, ["--store", str(store), "import-history", "u-new", str(path), "--model", "rules"], catch_exceptions=False
    )

    assert result.exit_code == 1, result.output
    (line,) = _errors(result.stderr)
    assert line.startswith("tiermem: error: ") and len(line) < 2_100
    assert disk(store) == before


@pytest.mark.parametrize("case", PARSED, ids=PARSED)
async def test_import_conversations_refuses_hostile_history_whole_and_writes_nothing(
    store: Path, tmp_path: Path, case: str
) -> None:
    conversations = json.loads(write_history(case, tmp_path / "history.json").read_text("utf-8", "surrogatepass"))
    mem = make(store)
    before = disk(store)

    with pytest.raises(InvalidArgumentError) as refused:
        await mem.import_conversations(MemoryContext(user_id="u-new"), conversations)

    assert disk(store) == before
    assert len(str(refused.value)) < 1_000 and "\n" not in str(refused.value).strip()


def test_the_history_corpus_imports_when_nothing_is_hostile(store: Path, tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_text(json.dumps(HISTORY))

    result = CliRunner().invoke(cli, ["--store", str(store), "import-history", "u-new", str(path), "--model", "rules"])

    assert result.exit_code == 0, result.output
    stats = asyncio.run(make(store).stats(MemoryContext(user_id="u-new")))
    assert sum(stats.counts["turns"].values()) == 4
