"""Which tables hold a user's records: the table of each tier, every table with a user's rows, and
the tables a memory id may name."""

from __future__ import annotations

from typing import Literal

from .._index import TableName
from .._records import Tier

__all__ = ["MEMORY_TABLES", "TIER_TABLES", "USER_TABLES", "TierTable"]

TierTable = Literal["working", "episodes", "facts", "digests", "edges"]
"""A table of one tier's records (a read of one is typed as that tier's records, never turns or aliases)."""
TIER_TABLES: dict[Tier, TierTable] = {
    "working": "working",
    "episodic": "episodes",
    "semantic": "facts",
    "digest": "digests",
    "relation": "edges",
}
USER_TABLES: tuple[TableName, ...] = (
    "working", "episodes", "facts", "digests", "edges", "turns", "aliases", "chunks", "documents",
)  # fmt: skip
MEMORY_TABLES: tuple[TableName, ...] = ("facts", "working", "episodes", "digests", "edges", "turns")
