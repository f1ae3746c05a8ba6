"""Which extra installs each adapter's framework, and loading an adapter with a clear error without it."""

from __future__ import annotations

import importlib

from .._errors import ConfigurationError

__all__ = ["ADAPTERS", "load"]

ADAPTERS = {
    "TiermemStore": ("._langgraph", "langgraph", "langgraph"),
    "TiermemSession": ("._agents", "openai-agents", "agents"),
    "TiermemToolset": ("._pydantic_ai", "pydantic-ai", "pydantic_ai"),
}
"""An adapter's name -> (its module here, the extra installing its framework, the framework's import name)."""


def load(name: str) -> object:
    """The adapter class, imported (with its framework) on first use."""
    module, extra, package = ADAPTERS[name]
    try:
        return getattr(importlib.import_module(module, __package__), name)
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] != package:
            raise
        raise ConfigurationError(f"{name} needs {package}: pip install 'tiermem[{extra}]'") from exc
