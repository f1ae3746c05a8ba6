"""Injectable clocks: every place that reads the time reads it from one of these; :func:`utc`, the one way
a datetime from outside becomes the aware UTC time records keep."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from ._errors import InvalidArgumentError

__all__ = ["Clock", "SystemClock", "utc"]


def utc(value: datetime) -> datetime:
    """``value`` in UTC (a naive one taken as UTC); InvalidArgumentError, a ValueError, when its offset
    takes it past the range of datetimes (year 1 at +05:00)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise InvalidArgumentError(f"{value.isoformat()} is out of range in UTC") from exc


@runtime_checkable
class Clock(Protocol):
    """Anything with a ``now()`` returning an aware UTC datetime."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)
