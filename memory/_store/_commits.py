"""Retrying a write that lost a commit race: exponential backoff with full jitter, then give up.

LanceDB commits optimistically: when two processes write one table at once, the later commit
fails with a retryable conflict. The store maps that to :class:`StoreConflictError` and runs every
write through :func:`retry_conflicts`, so a caller only sees the error once the race was lost
``attempts`` times in a row (seconds of contention, not one unlucky moment).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .._errors import InvalidArgumentError, StoreConflictError

__all__ = ["CommitRetry", "retry_conflicts"]

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class CommitRetry:
    """How often and how long a write retries a lost commit race.

    The n-th retry sleeps a uniform random time in ``[0, min(max_delay, base_delay * 2**n)]``
    ("full jitter": racing writers spread out instead of colliding again in step). With the
    defaults the worst case sleeps about 5 s in all.
    """

    attempts: int = 8
    """Tries in all, the first included."""
    base_delay: float = 0.02
    """Seconds: the cap of the first retry's random sleep."""
    max_delay: float = 1.5
    """Seconds: the cap of any one sleep."""

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_delay < 0 or self.max_delay < 0:
            raise InvalidArgumentError("CommitRetry needs attempts >= 1 and delays >= 0")

    def delay(self, retry: int, rng: Callable[[], float] = random.random) -> float:
        """The sleep before retry number ``retry`` (0-based)."""
        return rng() * min(self.max_delay, self.base_delay * 2.0**retry)


def retry_conflicts(
    write: Callable[[], T],
    *,
    action: str,
    policy: CommitRetry,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``write()``, run again after a :class:`StoreConflictError` until ``policy.attempts`` are used up.

    ``write`` must be safe to repeat: a lost commit left nothing behind, so it is.
    """
    for retry in range(policy.attempts):
        try:
            return write()
        except StoreConflictError as exc:
            if retry + 1 >= policy.attempts:
                raise StoreConflictError(
                    f"{exc} (gave up after {policy.attempts} attempts: other writers kept winning the race)"
                ) from exc.__cause__
            pause = policy.delay(retry)
            log.debug(
                "commit conflict on %s (attempt %d of %d), retrying in %.3f s",
                action,
                retry + 1,
                policy.attempts,
                pause,
            )
            sleep(pause)
    raise AssertionError("unreachable: CommitRetry.attempts must be at least 1")
