"""Explicit signatures at the front doors: typos fail the type checker and raise our error at run time;
async helpers match their blocking twins; wrong types raise TiermemError, never AttributeError."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tiermem import (
    ConfigurationError,
    MemoryCapability,
    MemoryContext,
    MemorySystem,
    TiermemError,
    create_memory_capability,
    system,
)
from tiermem.memory._read._async_tiers import AsyncTiers
from tiermem.memory.testing import FrozenClock, HashingEmbedder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mem(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> MemorySystem:
    return system(model="rules", store=store_path, embedder=embedder, clock=clock, semantic={"relations": True})


# -- unknown options ----------------------------------------------------------------------------


def test_mypy_strict_rejects_a_misspelt_option(tmp_path: Path) -> None:
    snippet = tmp_path / "typo.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from tiermem import create_memory_capability, system

            system(working={"capacity": 3})
            system(workin={"capacity": 3})
            create_memory_capability(stor="./data")
            """
        )
    )
    # Only tiermem is analysed (third-party packages count as Any): seconds, not minutes.
    config = tmp_path / "mypy.ini"
    config.write_text(
        f"[mypy]\nstrict = True\nmypy_path = {ROOT}\nfollow_imports = skip\nignore_missing_imports = True\n"
        "\n[mypy-tiermem.*]\nfollow_imports = silent\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", str(snippet)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [int(line.split(":")[1]) for line in errors] == [5, 6], done.stdout + done.stderr
    assert '"workin"' in errors[0] and '"stor"' in errors[1]


FACTORIES: list[Callable[..., object]] = [system, create_memory_capability]


TYPOS = [("workin", "working"), ("stor", "store"), ("sematic", "semantic")]


@pytest.mark.parametrize("factory", FACTORIES, ids=["system", "create_memory_capability"])
@pytest.mark.parametrize(("typo", "meant"), TYPOS, ids=[typo for typo, _ in TYPOS])
def test_an_unknown_option_names_the_closest_valid_one(
    factory: Callable[..., object], typo: str, meant: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match=rf"'{typo}' \(did you mean '{meant}'\?\)"):
        factory(**{typo: True}, embedder="hashing")
    assert not (tmp_path / "store").exists()  # rejected before anything is opened


BAD_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("model-int", {"model": 3}),
    ("timeout-str", {"timeout": "60"}),
    ("timeout-zero", {"timeout": 0}),
    ("retries-float", {"num_retries": 1.5}),
    ("store-int", {"store": 42}),
    ("preset-unknown", {"preset": "everything"}),
    ("working-str", {"working": "yes"}),
    ("max-context-tokens-str", {"max_context_tokens": "1000"}),
]


@pytest.mark.parametrize("options", [o for _, o in BAD_OPTIONS], ids=[i for i, _ in BAD_OPTIONS])
def test_a_wrong_option_type_raises_configuration_error(options: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        system(**{"store": str(tmp_path / "store"), "embedder": "hashing", **options})


def test_an_option_with_no_close_name_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"valid options: .*working"):
        system(colour="blue")  # type: ignore[arg-type]  # the type checker rejects it too


# -- sync and async twins -----------------------------------------------------------------------

# Each async helper of the capability and its blocking twin on the component that does the work.
TWINS = [
    ("add_alias", "tiers"),
    ("aliases", "tiers"),
    ("working_memory", "tiers"),
    ("add_working_memory", "tiers"),
    ("add_episode", "tiers"),
    ("recent_episodes", "tiers"),
    ("facts", "tiers"),
    ("add_semantic_fact", "tiers"),
    ("set_digest", "tiers"),
    ("latest_digest", "tiers"),
    ("connections", "relations"),
    ("relate", "relations"),
    ("ego_graph", "relations"),
]


@pytest.mark.parametrize(("name", "component"), TWINS, ids=[name for name, _ in TWINS])
def test_an_async_helper_has_the_signature_of_its_blocking_twin(
    capability: MemoryCapability, name: str, component: str
) -> None:
    asynchronous = getattr(capability, name)
    blocking = getattr(getattr(capability, component), name)
    assert inspect.iscoroutinefunction(asynchronous) and not inspect.iscoroutinefunction(blocking)
    assert inspect.signature(asynchronous) == inspect.signature(blocking)


def test_every_generated_twin_is_checked_against_its_blocking_method() -> None:
    # twin() builds them from the blocking methods; TWINS above must name each, so none goes unchecked.
    generated = {
        name for name, member in vars(AsyncTiers).items() if not name.startswith("_") and hasattr(member, "__wrapped__")
    }
    assert generated and generated <= {name for name, _ in TWINS}


BODIES = [("recall", "recall_sync"), ("format_context", "format_context_sync")]


@pytest.mark.parametrize(("name", "body"), BODIES, ids=[name for name, _ in BODIES])
def test_recall_and_context_match_their_blocking_bodies(capability: MemoryCapability, name: str, body: str) -> None:
    assert inspect.signature(getattr(capability, name)) == inspect.signature(getattr(capability, body))


READ_API = sorted(
    name
    for name, member in vars(MemoryCapability).items()
    if not name.startswith("_") and inspect.isfunction(member) and name != "blocking"
)


@pytest.mark.parametrize("name", READ_API)
def test_the_system_delegates_each_read_method_with_its_signature(
    mem: MemorySystem, capability: MemoryCapability, name: str
) -> None:
    assert inspect.signature(getattr(mem, name)) == inspect.signature(getattr(capability, name))
    assert inspect.iscoroutinefunction(getattr(mem, name)) == inspect.iscoroutinefunction(getattr(capability, name))


@pytest.mark.parametrize("name", ["recall", "format_context", "facts", "add_semantic_fact", "capture", "end_session"])
def test_the_blocking_facade_keeps_the_signature(mem: MemorySystem, name: str) -> None:
    assert inspect.signature(getattr(mem.blocking(), name)) == inspect.signature(getattr(mem, name))


# -- wrong types --------------------------------------------------------------------------------

CTX = MemoryContext(user_id="u-1", session_id="s-1")
AS_DICT = {"user_id": "u-1", "session_id": "s-1"}
Call = Callable[[Any], Any]  # Any: these calls are wrong on purpose
WRONG: list[tuple[str, Call]] = [
    ("recall-dict-ctx", lambda m: m.recall(AS_DICT, "dinner")),
    ("recall-int-cue", lambda m: m.recall(CTX, 42)),
    ("recall-str-limit", lambda m: m.recall(CTX, "dinner", limit="5")),
    ("recall-str-tiers", lambda m: m.recall(CTX, "dinner", tiers="semantic")),
    ("format-context-swapped", lambda m: m.format_context("dinner", CTX)),
    ("format-context-str-budget", lambda m: m.format_context(CTX, "dinner", max_tokens="400")),
    ("facts-dict-ctx", lambda m: m.facts(AS_DICT)),
    ("add-alias-int-name", lambda m: m.add_alias(CTX, 7)),
    ("add-fact-none-text", lambda m: m.add_semantic_fact(CTX, None)),
    ("add-episode-dict", lambda m: m.add_episode({"summary": "x"})),
    ("connections-int-entity", lambda m: m.connections(CTX, 3)),
    ("tools-dict-ctx", lambda m: m.tools(AS_DICT)),
    ("capture-dict-ctx", lambda m: m.capture(AS_DICT, [{"role": "user", "content": "hi"}])),
    ("capture-str-messages", lambda m: m.capture(CTX, "hi")),
    ("end-session-dict-ctx", lambda m: m.end_session(AS_DICT)),
    ("consolidate-dict-ctx", lambda m: m.consolidate(AS_DICT)),
    ("digest-dict-ctx", lambda m: m.digest(AS_DICT)),
    ("retry-pending-dict-ctx", lambda m: m.retry_pending(AS_DICT)),
    ("recall-sync-dict-ctx", lambda m: m.recall_sync(AS_DICT, "dinner")),
    ("repository-dict-ctx", lambda m: m.tiers.facts(AS_DICT)),
    ("relations-dict-ctx", lambda m: m.relations.edges(AS_DICT)),
]


@pytest.mark.parametrize("call", [c for _, c in WRONG], ids=[i for i, _ in WRONG])
async def test_a_wrong_type_raises_a_tiermem_error(mem: MemorySystem, call: Call) -> None:
    with pytest.raises(TiermemError):
        result = call(mem)
        if inspect.isawaitable(result):
            await result
