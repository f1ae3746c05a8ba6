"""Time and turn decay: how much a memory still counts now."""

from __future__ import annotations

from datetime import datetime, timedelta

from .records import Edge, Fact

__all__ = ["DEFAULT_HALF_LIFE", "effective_confidence", "recency", "turn_decay"]

DEFAULT_HALF_LIFE = timedelta(days=180)


def effective_confidence(fact: Fact | Edge, now: datetime, *, half_life: timedelta = DEFAULT_HALF_LIFE) -> float:
    """``confidence * 0.5 ** (age / half_life)``, age counted from the last reinforcement."""
    since = fact.reinforced_at if isinstance(fact, Fact) else fact.updated_at
    age = max((now - since).total_seconds(), 0.0)
    return float(fact.confidence * 0.5 ** (age / half_life.total_seconds()))


def recency(when: datetime, now: datetime, *, half_life: timedelta) -> float:
    """1.0 for now, 0.5 one half-life ago."""
    age = max((now - when).total_seconds(), 0.0)
    return float(0.5 ** (age / half_life.total_seconds()))


def turn_decay(salience: float, turns_ago: int, *, half_life_turns: float) -> float:
    """Working-memory salience after ``turns_ago`` further turns."""
    return float(salience * 0.5 ** (max(turns_ago, 0) / half_life_turns))
