"""What the write side's operations report back."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._records import Digest, Episode, Turn, WorkingEntry

__all__ = ["CaptureResult", "ConsolidationResult", "DigestResult", "RetryReport", "SessionResult"]


@dataclass(frozen=True, kw_only=True)
class CaptureResult:
    """What ``capture`` did with one turn."""

    turn: Turn
    entries: list[WorkingEntry]
    deferred: bool = False
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class SessionResult:
    """What ``end_session`` produced."""

    episode: Episode | None
    deferred: bool = False
    error: str | None = None


@dataclass(kw_only=True)
class ConsolidationResult:
    """Counts from one ``consolidate`` run."""

    episodes: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)
    deferred: bool = False
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class DigestResult:
    """What ``digest`` wrote."""

    digest: Digest | None
    deferred: bool = False
    error: str | None = None


@dataclass(kw_only=True)
class RetryReport:
    """Counts from one ``retry_pending`` run."""

    turns: int = 0
    turns_ok: int = 0
    episodes: int = 0
    episodes_ok: int = 0
    consolidations: int = 0
