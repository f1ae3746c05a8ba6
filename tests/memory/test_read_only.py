"""Read paths never write (issue 33 item 9): the read commands, a read-only capability and an MCP server
without the write tools create no table, record no option and change no byte of the store.

A store with only some of its tables (no digest, no edges: none was ever needed) is the case that wrote
before: opening a missing table for a read created it. Such a table reads as empty instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import tiermem
from tests.subprocesses import clean_env
from tiermem import HashingEmbedder, MemoryContext, create_memory_capability, system
from tiermem.memory._cli._main import cli
from tiermem.memory._cli._mcp import McpConfig, build_server
from tiermem.memory._identity import lease_key
from tiermem.memory._store import Leases

U1 = MemoryContext(user_id="u-1", session_id="s-1")


async def _fill(path: Path) -> str:
    """A store with turns, working entries, an episode and facts, but no digest or edges table; a fact's id."""
    mem = system(model="rules", store=str(path), embedder=HashingEmbedder(64))
    await mem.capture(U1, [{"role": "user", "content": "My wife Moni loves hiking. I live in Paris."}])
    await mem.end_session(U1)
    await mem.consolidate(U1)
    facts = await mem.facts(U1)
    await mem.aclose()
    return facts[0].id


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "store"
    fact = asyncio.run(_fill(path))
    assert {"digests.lance", "edges.lance"}.isdisjoint(p.name for p in path.iterdir())  # the case that wrote
    return path, fact


def _commands(fact: str) -> list[list[str]]:
    return [
        ["users"], ["show", "u-1"], ["search", "u-1", "where does the user live"], ["stats"],
        ["get", fact, "--user", "u-1"], ["history", fact, "--user", "u-1"], ["export", "u-1"], ["graph", "u-1"],
    ]  # fmt: skip


def _snapshot(path: Path) -> dict[str, str]:
    """Every file of the store by its path, as a hash of its bytes."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest() for p in path.rglob("*") if p.is_file()
    }


def test_read_commands_leave_every_byte_of_the_store_as_it_was(filled: tuple[Path, str]) -> None:
    path, fact = filled
    before = _snapshot(path)
    for command in _commands(fact):
        result = CliRunner().invoke(cli, ["--store", str(path), *command], catch_exceptions=False)
        assert result.exit_code == 0, (command, result.output)
        assert _snapshot(path) == before, command


async def test_a_read_only_capability_and_a_read_only_mcp_server_write_nothing(filled: tuple[Path, str]) -> None:
    path, fact = filled
    before = _snapshot(path)
    reader = create_memory_capability(store=str(path), create=False)  # the embedder the store names
    assert (await reader.recall(U1, "Paris")) and (await reader.get(U1, fact)).id == fact
    assert (await reader.stats(U1)).counts and await reader.format_context(U1, "Paris")
    build_server(McpConfig(store=str(path), user_id="u-1", relations=True))
    assert _snapshot(path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to a read-only folder all the same")
def test_read_commands_work_on_a_store_no_one_may_write(filled: tuple[Path, str], tmp_path: Path) -> None:
    path, fact = filled
    subprocess.run(["chmod", "-R", "a-w", str(path)], check=True)
    try:
        env = clean_env(PYTHONPATH=str(Path(tiermem.__file__).parents[1]), TIERMEM_STORE=str(path))
        for command in _commands(fact):
            done = subprocess.run(
                [sys.executable, "-m", "tiermem.memory._cli", *command],
                cwd=tmp_path,  # never the repository (see tests/subprocesses.py)
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, (command, done.stderr[-2000:])
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(path)], check=True)


async def test_reading_a_lease_of_a_store_without_a_leases_table_creates_none(tmp_path: Path) -> None:
    path = tmp_path / "store"
    writer = system(model="rules", store=str(path), embedder=HashingEmbedder(64))
    await writer.capture(U1, [{"role": "user", "content": "I live in Paris."}])
    await writer.aclose()
    shutil.rmtree(path / "leases.lance")  # as a store an older tiermem made, before leases
    before = _snapshot(path)
    reader = create_memory_capability(store=str(path), create=False)
    assert Leases(reader.store).holder(lease_key("consolidate", U1)) is None
    assert _snapshot(path) == before
