"""What the write side's operations report back."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._errors import EmbedderError, ErrorKind, ModelError, error_kind
from ._records import Digest, Episode, Turn, WorkingEntry

__all__ = ["CaptureResult", "ConsolidationResult", "DigestResult", "RetryReport", "SessionResult"]


class _Deferral:
    """What the model-backed results share: the typed failure that deferred the work, if any."""

    exception: ModelError | EmbedderError | None

    @property
    def error_kind(self) -> ErrorKind | None:
        """``"permanent"`` (fix the configuration), ``"transient"`` (retried later) or None."""
        return None if self.exception is None else error_kind(self.exception)


@dataclass(frozen=True, kw_only=True)
class CaptureResult(_Deferral):
    """What ``capture`` did with one turn."""

    turn: Turn
    entries: list[WorkingEntry]
    deferred: bool = False
    duplicate: bool = False
    """The capture was a rerun: the turn was journaled before (same idempotency key), no turn was added
    (a turn the first attempt left pending is observed now)."""
    queued: bool = False
    """Journaled and queued for observation in the background (``capture(..., background=True)``)."""
    error: str | None = None
    exception: ModelError | EmbedderError | None = None


@dataclass(frozen=True, kw_only=True)
class SessionResult(_Deferral):
    """What ``end_session`` produced."""

    episode: Episode | None
    deferred: bool = False
    busy: bool = False
    """Another process holds this session's lease and is encoding it."""
    error: str | None = None
    exception: ModelError | EmbedderError | None = None


@dataclass(kw_only=True)
class ConsolidationResult(_Deferral):
    """Counts from one ``consolidate`` run."""

    episodes: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)
    deferred: bool = False
    busy: bool = False
    """Another process holds this user's consolidation lease; nothing was done here."""
    error: str | None = None
    exception: ModelError | EmbedderError | None = None


@dataclass(frozen=True, kw_only=True)
class DigestResult(_Deferral):
    """What ``digest`` wrote."""

    digest: Digest | None
    deferred: bool = False
    busy: bool = False
    """Another process holds this user's digest lease; nothing was done here."""
    unchanged: bool = False
    """Nothing the latest digest was written from changed: it is returned as it is, no model call made."""
    error: str | None = None
    exception: ModelError | EmbedderError | None = None


@dataclass(kw_only=True)
class RetryReport:
    """Counts from one ``retry_pending`` run."""

    turns: int = 0
    turns_ok: int = 0
    episodes: int = 0
    episodes_ok: int = 0
    consolidations: int = 0
    sessions: int = 0
    """Ended sessions re-encoded because a turn of theirs was observed late."""
    skipped: int = 0
    """Turns and episodes left alone: they failed permanently under the current model configuration."""
