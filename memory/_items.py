"""The uniform view of a memory of any tier, as recall, the tools and every read surface give it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ._records import Instant, Tier, _Record

__all__ = ["MemoryItem", "RankedMemoryItem"]


class MemoryItem(_Record):
    """The uniform view of a memory of any tier."""

    id: str = Field(description="Id of the underlying record.")
    tier: Tier = Field(description="Tier the record lives in.")
    subject: str = Field(description="Canonical subject.")
    text: str = Field(description="Text shown to the agent.")
    confidence: float = Field(description="Effective confidence or salience now, 0..1.")
    created_at: Instant = Field(description="When the record was created.")
    updated_at: Instant = Field(description="When the record last changed.")
    provenance: tuple[str, ...] = Field(default=(), description="Source ids back to captured turns.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Tier-specific details.")

    def past_mark(self) -> str:
        """ "(past, until 2026-03-16)" when it no longer holds (a superseded fact, a turn whose every fact was
        superseded, a closed edge), "(past)" when it is not known since when; "" while it holds. Every read
        surface (the context block, the tools and MCP, the CLI, the demo) marks the past with it."""
        meta = self.metadata
        ended = meta.get("superseded") or meta.get("current") is False
        if not (ended or (self.tier == "semantic" and meta.get("valid_to"))):
            return ""
        until = meta.get("valid_to")
        return f"(past, until {until[:10]})" if isinstance(until, str) else "(past)"


class RankedMemoryItem(MemoryItem):
    """A memory item with the score recall gave it."""

    score: float = Field(description="Final ranking score (higher is better).")
    relevance: float = Field(default=0.0, description="Relevance to the cue alone, 0..1.")
