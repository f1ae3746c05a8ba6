"""Running ``tiermem`` servers as real subprocesses in tests: the command, an offline environment, a port;
and the headless Chromium that reads the inspector's pages."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "assert_no_network",
    "free_port",
    "server_env",
    "tiermem_command",
    "wait_for_port",
]

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium, driven by Playwright in the inspector's browser tests."""
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

GUARD = """
import os, socket
_connect = socket.socket.connect
def _guarded(self, address):
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and host not in {"127.0.0.1", "::1", "localhost"} and not host.startswith("/"):
        with open(os.environ["TIERMEM_TEST_NETWORK_LOG"], "a") as log:
            log.write(repr(address) + "\\n")
        raise OSError("tests must not touch the network")
    return _connect(self, address)
socket.socket.connect = _guarded
"""


def tiermem_command() -> list[str]:
    """The installed ``tiermem`` script beside this interpreter, else the module it runs."""
    script = Path(sys.executable).with_name("tiermem")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tiermem.memory._cli._main"]


def server_env(folder: Path) -> dict[str, str]:
    """The server's environment: no API keys, the local cost map, and the socket guard."""
    guard = folder / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(GUARD)
    return {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(guard), os.environ.get("PYTHONPATH")])),  # the tree tested
        "TIERMEM_TEST_NETWORK_LOG": str(folder / "network.log"),
    }


def assert_no_network(folder: Path) -> None:
    log = folder / "network.log"
    assert not log.exists(), f"the server tried the network: {log.read_text()}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout  # a bound for a slow machine, not an expected duration
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError("the server never listened")
