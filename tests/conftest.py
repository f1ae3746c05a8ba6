"""Shared fixtures: a real LanceDB in a temporary folder, fake models, a frozen clock, no network."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _key in [k for k in os.environ if k.endswith("_API_KEY")]:
    del os.environ[_key]  # the rules model must be chosen, and no real provider reachable

import socket
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tiermem import MemoryCapability, MemoryContext, create_memory_capability
from tiermem.memory.testing import FrozenClock, HashingEmbedder, forbid_real_model_requests

forbid_real_model_requests()

pytest_plugins = ["tests.object_storage"]  # s3_server / s3_store: moto's S3 server on 127.0.0.1

_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and host not in {"127.0.0.1", "::1", "localhost"} and not host.startswith("/"):
        raise RuntimeError(f"tests must not touch the network (tried {address!r})")
    return _real_connect(self, address)


def _spawns_processes(item: pytest.Item) -> bool:
    """Whether the test's module starts interpreters (``subprocess``, ``tests.subprocesses``, the fault scenarios)."""
    module = getattr(item, "module", None)
    return module is not None and any(
        value is subprocess or getattr(value, "__module__", None) in _SPAWNING for value in vars(module).values()
    )


_SPAWNING = frozenset({"tests.subprocesses", "tests.faults.scenarios"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that start interpreters (the slowest tests: fault injection, workers, MCP servers,
    examples) come first, so that no long test starts last while the other workers have run dry.
    Scheduling only (a stable sort, collection order otherwise): every test runs, unchanged."""
    items.sort(key=lambda item: not _spawns_processes(item))


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(256)


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    return str(tmp_path / "store")


@pytest.fixture
def ctx() -> MemoryContext:
    return MemoryContext(user_id="u-1", session_id="s-1")


@pytest.fixture
def capability(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> Iterator[MemoryCapability]:
    yield create_memory_capability(store=store_path, embedder=embedder, clock=clock)
