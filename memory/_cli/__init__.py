"""The ``tiermem`` command line, the offline demo, and the MCP server it runs."""

from __future__ import annotations

from ._main import main

__all__ = ["main"]
