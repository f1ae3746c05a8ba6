"""Time in memories and in questions: the date a memory carries, and the window a question names.

A memory is dated by when it was said: a turn by its time, an episode by its first to its last turn,
a fact or relation by its first evidence (``valid_from``, else when it was recorded), a digest by its
last rewrite. ``recall(since=, until=)`` and ``list(since=, until=)`` keep what was said in the window.

A question's own words name a window too: "last week", "yesterday", "in May", "on March 3rd",
"two months ago", "in 2024", "since April". :func:`time_mention` finds the first such phrase and
resolves it against ``now`` (the question's time), calendar-wise: "last week" is the calendar week
before this one, "in May" the latest May that has begun. A month name counts only after a
preposition or beside a day or year ("in May", "May 3", "May 2024"), so "I may go" names no time.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from ._errors import InvalidArgumentError
from ._records import Digest, Edge, Episode, Fact, Turn, WorkingEntry

__all__ = ["TALK_WORDS", "TimeMention", "TimeWindow", "checked_instant", "checked_window", "dated_span", "time_mention"]

# Words a question about a period uses for "what happened" ("what did we talk about in May?"):
# with nothing else left once the time is taken out, the question asks for everything in the window.
_TALK = """say said talk talked discuss discussed mention mentioned tell told speak spoke chat chatted happen happened
conversation conversations do did done thing things anything something everything topic topics up new"""
TALK_WORDS = frozenset(_TALK.split())


@dataclass(frozen=True, kw_only=True)
class TimeWindow:
    """From ``since`` (inclusive) until ``until`` (exclusive); an open end where None."""

    since: datetime | None = None
    until: datetime | None = None

    def overlaps(self, start: datetime, end: datetime) -> bool:
        """Whether a memory said from ``start`` to ``end`` (the same instant for most) falls in the window."""
        return (self.since is None or end >= self.since) and (self.until is None or start < self.until)

    def label(self) -> str:
        """The window as dates, for people: ``2026-05-01..2026-06-01``."""
        first = self.since.date().isoformat() if self.since else ""
        last = self.until.date().isoformat() if self.until else ""
        return f"{first}..{last}"


def checked_instant(value: object, name: str) -> datetime | None:
    """``value`` checked to be None or a timezone-aware datetime."""
    if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
        raise InvalidArgumentError(f"{name} must be a timezone-aware datetime, not {value!r}")
    return value


def checked_window(since: object, until: object) -> TimeWindow | None:
    """``since``/``until`` checked (aware datetimes, ``since`` before ``until``); None when both are None."""
    first, last = checked_instant(since, "since"), checked_instant(until, "until")
    if first is None and last is None:
        return None
    if first is not None and last is not None and first >= last:
        raise InvalidArgumentError(f"since ({first.isoformat()}) must be before until ({last.isoformat()})")
    return TimeWindow(since=first, until=last)


def dated_span(record: Turn | Episode | Fact | Edge | Digest | WorkingEntry) -> tuple[datetime, datetime]:
    """When a memory was said: the first and last instant (the same for all but an episode)."""
    if isinstance(record, Episode):
        return record.started_at, record.ended_at
    if isinstance(record, Fact | Edge):
        at = record.valid_from or record.created_at
        return at, at
    if isinstance(record, Digest):
        return record.updated_at, record.updated_at
    return record.created_at, record.created_at


@dataclass(frozen=True, kw_only=True)
class TimeMention:
    """A phrase of a question that names a time, and the window it resolves to."""

    window: TimeWindow
    start: int  # the phrase's character offsets in the question
    end: int

    def without(self, text: str) -> str:
        """``text`` with the phrase taken out."""
        return " ".join((text[: self.start] + " " + text[self.end :]).split())


_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name} | {"sept": 9}
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
# Counts that are not numbers: "a couple of weeks ago" is one to three weeks back, "a few" two to five.
_VAGUE = {"couple": (1, 3), "a couple of": (1, 3), "few": (2, 5), "a few": (2, 5)}
_UNITS = {"day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month", "months": "month",
          "year": "year", "years": "year"}  # fmt: skip
_PREP = r"(?:in|during|on|of|from|since|before|after|until|till|by|around|throughout)"
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_COUNT = r"(?P<count>\d{1,3}|a couple of|a few|couple|few|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"  # noqa: E501
_UNIT = r"(?P<unit>days?|weeks?|months?|years?)"
_DATE_TAIL = _MONTH + r"(?:,?\s+" + _YEAR + r")?"
_WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")"

# Tried in order at each position; the first that matches wins (longer phrasings first).
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(r"\b" + pattern + r"\b", re.IGNORECASE))
    for kind, pattern in (
        ("ago", _COUNT + r"\s+" + _UNIT + r"\s+ago"),
        ("past", r"(?:in\s+|over\s+|during\s+)?(?:the\s+)?(?:past|last|previous)\s+" + _COUNT + r"\s+" + _UNIT),
        ("relative", r"(?P<which>last|this|previous|past)\s+(?P<unit>week|month|year|weekend)"),
        ("weekday", r"(?:(?P<which>last|this|on|past)\s+)" + _WEEKDAY),
        ("day_before", r"the\s+day\s+before\s+yesterday"),
        ("yesterday", r"yesterday|last\s+night"),
        ("today", r"today|tonight|this\s+(?:morning|afternoon|evening)"),
        ("date", r"(?:(?:on|since|before|after|until|by)\s+)?" + _MONTH + r"\s+" + _DAY + r"(?:,?\s+" + _YEAR + r")?"),
        ("date", r"(?:(?:on|since|before|after|until|by)\s+)?(?:the\s+)?" + _DAY + r"\s+(?:of\s+)?" + _DATE_TAIL),
        ("month", r"(?P<prep>" + _PREP + r")\s+(?:early\s+|late\s+|mid-?\s*)?" + _MONTH + r"(?:,?\s+" + _YEAR + r")?"),
        ("month", _MONTH + r",?\s+" + _YEAR),
        ("year", r"(?P<prep>" + _PREP + r")\s+(?:the\s+year\s+)?" + _YEAR),
    )
)
_CAPITAL_MAY = re.compile(r"\bMay\b")


def time_mention(text: str, now: datetime) -> TimeMention | None:
    """The first phrase of ``text`` that names a time, resolved against ``now``; None when there is none."""
    best: tuple[int, int, TimeWindow] | None = None
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            if best is not None and match.start() >= best[0]:
                break  # an earlier pattern found a phrase at or before this one
            window = _resolve(kind, match, now)
            if window is not None:
                best = (match.start(), match.end(), window)
                break
    if best is None:
        return None
    return TimeMention(window=best[2], start=best[0], end=best[1])


def _resolve(kind: str, match: re.Match[str], now: datetime) -> TimeWindow | None:
    groups = {k: (v.lower() if v else v) for k, v in match.groupdict().items()}
    month = groups.get("month")
    if month == "may" and not _CAPITAL_MAY.search(match.group(0)):
        return None  # "in may be" is a verb, not a month: the month is written with a capital
    today = _day(now)
    if kind in ("ago", "past"):
        unit, said = _UNITS[groups["unit"] or "day"], " ".join((groups["count"] or "").split())
        low, high = _VAGUE.get(said) or (_count(said),) * 2
        if kind == "past":  # "the past three weeks": from then until now
            return TimeWindow(since=_shift(today, unit, -high), until=None)
        return TimeWindow(
            since=_period(unit, _shift(today, unit, -high)).since, until=_period(unit, _shift(today, unit, -low)).until
        )
    if kind == "relative":
        unit, which = groups["unit"] or "week", groups["which"]
        if unit == "weekend":
            saturday = today - timedelta(days=(today.weekday() - 5) % 7)
            if which != "this" and today.weekday() >= 5:
                saturday -= timedelta(days=7)
            return TimeWindow(since=saturday, until=saturday + timedelta(days=2))
        start = _period(unit, today).since
        assert start is not None
        if which == "this":
            return TimeWindow(since=start, until=None)
        return _period(unit, _shift(start, unit, -1))
    if kind == "weekday":
        back = (today.weekday() - _WEEKDAYS[groups["weekday"] or "monday"]) % 7 or 7
        return _period("day", today - timedelta(days=back))
    if kind == "day_before":
        return _period("day", today - timedelta(days=2))
    if kind == "yesterday":
        return _period("day", today - timedelta(days=1))
    if kind == "today":
        return _period("day", today)
    if kind == "date":
        return _date(groups, today, match.group(0).split()[0].lower())
    if kind == "month":
        number = _MONTHS[month or ""]
        year = int(groups["year"]) if groups.get("year") else today.year - (number > today.month)
        return _open(_period("month", today.replace(year=year, month=number, day=1)), groups.get("prep"))
    if kind == "year":
        year = int(groups["year"] or today.year)
        return _open(_period("year", today.replace(year=year, month=1, day=1)), groups.get("prep"))
    return None


def _date(groups: dict[str, str | None], today: datetime, first: str) -> TimeWindow | None:
    number, day = _MONTHS[groups["month"] or ""], int(groups["day"] or 0)
    said_year = groups.get("year")
    year = int(said_year) if said_year else today.year
    if not 1 <= day <= calendar.monthrange(year, number)[1]:
        return None
    date = today.replace(year=year, month=number, day=day)
    if not said_year and date > today:
        date = date.replace(year=year - 1) if day <= calendar.monthrange(year - 1, number)[1] else date
    return _open(_period("day", date), first)


def _open(window: TimeWindow, prep: str | None) -> TimeWindow:
    """ "since May" and "after May" are open at the end; "before May" and "until May" at the start."""
    if prep == "since":
        return TimeWindow(since=window.since, until=None)
    if prep == "after":
        return TimeWindow(since=window.until, until=None)
    if prep == "before":
        return TimeWindow(since=None, until=window.since)
    if prep in ("until", "till", "by"):
        return TimeWindow(since=None, until=window.until)
    return window


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word]


def _day(now: datetime) -> datetime:
    """Midnight of ``now``'s day, in its own timezone (UTC when naive)."""
    aware = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    return datetime.combine(aware.date(), time(), tzinfo=aware.tzinfo)


def _shift(day: datetime, unit: str, count: int) -> datetime:
    """``day`` moved by ``count`` units; a month's day clamped to its length (Mar 31 - 1 month = Feb 28)."""
    if unit == "day":
        return day + timedelta(days=count)
    if unit == "week":
        return day + timedelta(weeks=count)
    months = day.year * 12 + day.month - 1 + (count if unit == "month" else 12 * count)
    year, month = divmod(months, 12)
    return day.replace(year=year, month=month + 1, day=min(day.day, calendar.monthrange(year, month + 1)[1]))


def _period(unit: str, day: datetime) -> TimeWindow:
    """The calendar day, week (Monday first), month or year holding ``day``."""
    if unit == "day":
        return TimeWindow(since=day, until=day + timedelta(days=1))
    if unit == "week":
        start = day - timedelta(days=day.weekday())
        return TimeWindow(since=start, until=start + timedelta(days=7))
    if unit == "month":
        start = day.replace(day=1)
        return TimeWindow(since=start, until=_shift(start, "month", 1))
    start = day.replace(month=1, day=1)
    return TimeWindow(since=start, until=start.replace(year=start.year + 1))
