"""What a deferred turn or episode records, and when it is tried again.

A failed model (or embedder) call never loses work: the record stays with its error, its attempt
count and the earliest time a scheduled retry may take it up (exponential backoff). After
``max_attempts`` failures in a row it is *parked*: left alone by scheduled retries, visible in
``stats()``, and retried only when asked (``retry_pending(include_parked=True)``). A permanent
failure (a 401, a model that does not exist) also records the fingerprint of the model
configuration it happened under and waits until that configuration changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from ._errors import ConfigurationError, EmbedderError, ModelError, error_kind
from ._records import Episode, Turn

__all__ = ["NO_ERROR", "Failure", "RetryPolicy", "blocked", "due", "model_config"]

Failure = ModelError | EmbedderError
"""What defers work: a model call that failed or never validated, or an embedder that failed."""

NO_ERROR: dict[str, object] = {"error": None, "error_kind": None, "error_config": None, "retry_at": None}

R = TypeVar("R", Turn, Episode)


def model_config(stages: object) -> str:
    """The stage model's configuration fingerprint (an LLM's covers model, settings and provider env)."""
    fingerprint = getattr(stages, "fingerprint", None)
    return fingerprint if isinstance(fingerprint, str) else str(getattr(stages, "name", type(stages).__name__))


def blocked(record: Turn | Episode, config: str) -> bool:
    """Failed permanently under the configuration still in use: a retry would fail the same way."""
    return record.error_kind == "permanent" and record.error_config == config


def due(record: Turn | Episode, now: datetime) -> bool:
    """A scheduled retry may take the record up now (its backoff has passed)."""
    return record.retry_at is None or record.retry_at <= now


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Bounded retries per item: ``max_attempts`` failures in a row park it; backoff doubles from ``backoff``."""

    max_attempts: int = 6
    backoff: timedelta = timedelta(seconds=30)
    max_backoff: timedelta = timedelta(hours=1)

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be an int >= 1, not {self.max_attempts!r}")
        if not isinstance(self.backoff, timedelta) or self.backoff < timedelta(0):
            raise ConfigurationError(f"backoff must be a non-negative timedelta, not {self.backoff!r}")

    def delay(self, attempts: int) -> timedelta:
        """How long a scheduled retry waits after the ``attempts``-th failure in a row."""
        factor: int = 2 ** max(attempts - 1, 0)
        return min(self.backoff * factor, self.max_backoff)

    def failed(self, record: R, exc: Failure, *, config: str, now: datetime, parked_status: str) -> R:
        """``record`` after one more failure: its error, attempts, next retry time, parked when out of attempts."""
        attempts = record.attempts + 1
        update: dict[str, object] = {
            "error": str(exc)[:2000],
            "error_kind": error_kind(exc),
            "error_config": config,
            "attempts": attempts,
            "retry_at": now + self.delay(attempts),
        }
        if attempts >= self.max_attempts and error_kind(exc) == "transient":
            update["status"] = parked_status  # permanent failures wait for a new configuration instead
        if isinstance(record, Episode):
            update["updated_at"] = now
        return record.model_copy(update=update)
