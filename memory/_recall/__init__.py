"""Recall: candidate searches over the tiers, ranking and the relevance gate, and the per-turn context block."""

from __future__ import annotations

from ._context import TokenCounter, approx_tokens, render_context
from ._ranking import rank_without_cue
from ._scopes import labelled
from ._search import Search, SearchTier

__all__ = [
    "Search",
    "SearchTier",
    "TokenCounter",
    "approx_tokens",
    "labelled",
    "rank_without_cue",
    "render_context",
]
