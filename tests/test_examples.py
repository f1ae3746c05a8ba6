"""Every example runs offline, as a user would run it: a fresh interpreter, no key, no network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))


def test_every_example_is_run_here() -> None:
    assert {p.name for p in SCRIPTS} >= {"agent_loop.py", "fastapi_app.py", "sync_script.py", "mcp_client.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_example_runs_offline(script: Path, tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in ("AGENT_MODEL", "TIERMEM_MODEL")
    }
    env.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)  # the examples must stay offline on their own
    env["TIERMEM_STORE"] = str(tmp_path / "store")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "an example shows what it did"
    assert "model cost map fetch" not in done.stderr, "an example tried the network"


def test_mcp_host_configuration_starts_the_tiermem_server() -> None:
    config = json.loads((EXAMPLES / "mcp_host.json").read_text())
    server = config["mcpServers"]["tiermem"]
    assert server["command"] == "tiermem"
    assert server["args"][0] == "mcp" and "--user-id" in server["args"] and "--store" in server["args"]
