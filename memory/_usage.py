"""The usage ledger: model calls, tokens, cost and latency per pipeline stage."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

__all__ = ["StageUsage", "UsageLedger"]


@dataclass
class StageUsage:
    """Counters for one pipeline stage."""

    calls: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0


@dataclass
class UsageLedger:
    """Model usage per stage, readable as ``mem.usage()``."""

    stages: dict[str, StageUsage] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, stage: str, **deltas: float) -> None:
        with self._lock:
            usage = self.stages.setdefault(stage, StageUsage())
            for key, value in deltas.items():
                setattr(usage, key, getattr(usage, key) + value)

    def snapshot(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {stage: dict(vars(u)) for stage, u in sorted(self.stages.items())}

    def total_calls(self) -> int:
        with self._lock:
            return sum(u.calls for u in self.stages.values())
