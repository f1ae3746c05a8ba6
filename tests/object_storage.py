"""An S3-compatible server on 127.0.0.1 for tests: moto's server mode, one process per test session.

A real HTTP server in its own process (not moto's in-process mock): LanceDB's Rust object store
talks to it over a socket exactly as it would to S3, and worker subprocesses reach it too. moto
honours ``If-None-Match`` on PUT, the conditional write LanceDB commits with on S3, so concurrent
writers need no DynamoDB lock table.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["S3Server", "S3Store", "moto_server", "s3_server", "s3_store", "store_at"]

STARTUP = 60.0  # seconds: a bound for a slow CI machine, not an expected duration
_REQUEST = re.compile(r'HTTP/1\.[01]\S*" \d{3} ')  # werkzeug's access log line (possibly coloured)
_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_region": "us-east-1"}


@dataclass(frozen=True, kw_only=True)
class S3Store:
    """One fresh bucket: the store URI and how to reach it, as options or as environment variables."""

    uri: str
    endpoint: str

    @property
    def storage_options(self) -> dict[str, str]:
        """What ``system(storage_options=...)`` / ``lancedb.connect`` take."""
        return {**_CREDENTIALS, "aws_endpoint": self.endpoint, "allow_http": "true"}

    def env(self) -> dict[str, str]:
        """The same as ``AWS_*`` variables, for a process given only ``--store`` (``tiermem worker``)."""
        return {
            "AWS_ACCESS_KEY_ID": _CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": _CREDENTIALS["aws_secret_access_key"],
            "AWS_REGION": _CREDENTIALS["aws_region"],
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }


@dataclass(frozen=True, kw_only=True)
class S3Server:
    """A running moto server; :meth:`bucket` makes an empty bucket on it."""

    endpoint: str
    log: Path

    def requests(self) -> int:
        """HTTP requests served so far (one log line each)."""
        return len(_REQUEST.findall(self.log.read_text(errors="replace")))

    def bucket(self) -> S3Store:
        import boto3  # type: ignore[import-untyped]  # moto's dependency: the suite loads without it

        name = f"tiermem-{uuid.uuid4().hex[:12]}"
        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=_CREDENTIALS["aws_access_key_id"],
            aws_secret_access_key=_CREDENTIALS["aws_secret_access_key"],
            region_name=_CREDENTIALS["aws_region"],
        )
        client.create_bucket(Bucket=name)
        return S3Store(uri=f"s3://{name}/store", endpoint=self.endpoint)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto server exited with {process.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"moto server not listening on 127.0.0.1:{port} after {STARTUP}s: {log.read_text()[-2000:]}")


@contextlib.contextmanager
def moto_server(log: Path) -> Iterator[S3Server]:
    """moto's S3 server in a subprocess on 127.0.0.1 until the block ends; it logs every request to ``log``."""
    for _ in range(3):  # the port is free when chosen; another process may take it before moto binds it
        port = _free_port()
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_until_listening(port, process, log)
            break
        except RuntimeError:
            process.kill()
            process.wait()
    else:
        raise RuntimeError(f"moto server did not start: {log.read_text()[-2000:]}")
    try:
        yield S3Server(endpoint=f"http://127.0.0.1:{port}", log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One moto server for the whole test session (it starts in about a second)."""
    with moto_server(tmp_path_factory.mktemp("moto") / "server.log") as server:
        yield server


@pytest.fixture
def s3_store(s3_server: S3Server) -> S3Store:
    """An empty bucket on the session's S3 server, for one test."""
    return s3_server.bucket()


def store_at(where: str, folder: Path, request: pytest.FixtureRequest) -> tuple[str, dict[str, str] | None]:
    """A new store's URI and storage options: ``folder / "store"`` for "local", a fresh bucket for "s3"."""
    if where == "s3":
        s3: S3Store = request.getfixturevalue("s3_store")
        return s3.uri, s3.storage_options
    return str(folder / "store"), None
