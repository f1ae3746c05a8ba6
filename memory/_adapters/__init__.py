"""Framework adapters: tiermem behind other frameworks' memory interfaces, each framework in its own extra.

Each adapter's module imports its framework, so this front door imports none until a name is asked for:
``TiermemStore`` (LangGraph, ``pip install 'tiermem[langgraph]'``), ``TiermemSession`` (the OpenAI Agents
SDK, ``pip install 'tiermem[openai-agents]'``) and ``TiermemToolset`` (Pydantic AI, ``'tiermem[pydantic-ai]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._frameworks import ADAPTERS, load

if TYPE_CHECKING:
    from ._agents import TiermemSession
    from ._langgraph import TiermemStore
    from ._pydantic_ai import TiermemToolset

__all__ = ["ADAPTERS", "TiermemSession", "TiermemStore", "TiermemToolset", "load"]


def __getattr__(name: str) -> object:
    if name in ADAPTERS:
        return load(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
