"""What governing a user's memory reads back: a page of ``list``, a version of ``history``, ``stats``."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from .._items import MemoryItem
from .._records import Turn

__all__ = ["MemoryPage", "MemoryStats", "MemoryVersion"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MemoryPage(_Frozen):
    """One page of ``list``: memories oldest first, by ``(created_at, id)``, and where it stands among them."""

    items: tuple[MemoryItem, ...] = Field(description="The memories of this page.")
    next_cursor: str | None = Field(default=None, description="Pass it back for the next page; None at the end.")
    prev_cursor: str | None = Field(default=None, description="Pass it back for the page before; None on the first.")
    total: int = Field(ge=0, description="How many memories match the filters, over every page.")
    offset: int = Field(ge=0, description="How many of them come before this page.")


class MemoryVersion(_Frozen):
    """One version of a memory in its supersession chain."""

    item: MemoryItem = Field(description="The version as a memory item.")
    status: str = Field(description="active, superseded, archived, ... as stored.")
    valid_from: datetime | None = Field(default=None, description="Start of validity, when known.")
    valid_to: datetime | None = Field(default=None, description="End of validity (set when superseded).")
    superseded_by: str | None = Field(default=None, description="The version that replaced it.")
    supersedes: tuple[str, ...] = Field(default=(), description="The versions it replaced.")
    pinned: bool = Field(default=False, description="Pinned by the user.")
    turns: tuple[Turn, ...] = Field(default=(), description="The captured turns behind this version.")
    feedback: tuple[dict[str, object], ...] = Field(
        default=(), description="Recall feedback applied to this version, oldest first (see ``feedback``)."
    )


class MemoryStats(_Frozen):
    """What one user's memory holds."""

    counts: dict[str, dict[str, int]] = Field(description="Rows per tier (and turns, aliases) per status.")
    pending: dict[str, int] = Field(description="Work not done yet: unobserved turns, unconsolidated episodes.")
    bytes_on_disk: int | None = Field(description="Bytes of the whole store folder; None when not local.")
    redacted: dict[str, int] = Field(
        default_factory=dict,
        description="Secrets (and PII, when asked) this process replaced with a placeholder in what it captured, "
        "imported or wrote for the user, by kind (``api-key``, ``password``, ...); the store keeps no count.",
    )
