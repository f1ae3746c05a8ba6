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


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers it too; here as well so `-p no:xdist` runs stay free of unknown-mark warnings
    config.addinivalue_line("markers", "xdist_group(name): tests that must run on one pytest-xdist worker")


_SHARED_SCOPES = frozenset({"module", "package", "session"})


def _spawns_processes(item: pytest.Item) -> bool:
    """Whether the test's module starts interpreters (``subprocess``, ``tests.subprocesses``, the fault scenarios)."""
    module = getattr(item, "module", None)
    return module is not None and any(
        value is subprocess or getattr(value, "__module__", None) in _SPAWNING for value in vars(module).values()
    )


_SPAWNING = frozenset({"tests.subprocesses", "tests.faults.scenarios"})


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist turns the marks into work units (`--dist loadgroup`)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Scheduling only; every test runs, unchanged.

    - A module's tests stay on one xdist worker when they share a module- or session-scoped fixture
      the module defines (a store built once, a wheel, the first-import interpreters), so it is built
      once, as under `--dist loadfile`; every other test is scheduled on its own (`--dist loadgroup`).
    - The modules that start interpreters (the slowest tests: fault injection, workers, MCP servers,
      examples) come first, so that no long test starts last while the other workers have run dry.
    """
    items.sort(key=lambda item: not _spawns_processes(item))  # stable: collection order otherwise
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name in info.names_closure:
            definitions = info.name2fixturedefs.get(name, ())
            if definitions and definitions[-1].scope in _SHARED_SCOPES and definitions[-1].baseid == module:
                item.add_marker(pytest.mark.xdist_group(module))
                break


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
