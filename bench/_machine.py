"""What the benchmark reports say about the machine they ran on."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path

__all__ = ["cpu_name", "package_version"]


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo, else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"
