"""Time in memories and in words: the date a memory carries, and the period a phrase names.

A memory is dated by when it was said: a turn by its time, an episode by its first to its last turn,
a fact or relation by its first evidence (``valid_from``, else when it was recorded), a digest by its
last rewrite. ``recall(since=, until=)`` and ``list(since=, until=)`` keep what was said in the window.

Words name periods too, counted from when they were said ("yesterday", "last week", "two months ago",
"tomorrow", "next Friday") or named on the calendar ("in May", "on March 3rd", "in 2024", "on Monday").
:func:`time_mentions` finds each such phrase and resolves it against ``now``, calendar-wise: "last
week" is the calendar week before this one, "in May" the latest May that has begun, "on Monday" the
latest Monday before today. A question's window (:func:`time_mention`, the first phrase) is opened
by "since", "after", "before" or "until". A month name counts only after a preposition or beside a
day or year ("in May", "May 3", "May 2024"), so "I may go" names no time. This is the one home of
these words: recall reads a question's window from them, the rules observer dates a turn's text.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Literal

from ._errors import InvalidArgumentError
from ._records import Chunk, Digest, Edge, Episode, Fact, Turn, WorkingEntry

Unit = Literal["day", "week", "weekend", "month", "year"]

__all__ = [
    "TALK_WORDS",
    "TimeMention",
    "TimeWindow",
    "Unit",
    "checked_instant",
    "checked_window",
    "dated_span",
    "time_mention",
    "time_mentions",
]

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


def dated_span(record: Turn | Episode | Fact | Edge | Digest | WorkingEntry | Chunk) -> tuple[datetime, datetime]:
    """When a memory was said: the first and last instant (the same for all but an episode); a document's
    passage, when it was ingested."""
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
    """A phrase that names a time: where it stands, the period it names, the window a question means."""

    start: int  # the phrase's character offsets in the text
    end: int
    unit: Unit  # the size of what it names: "yesterday" a day, "in May" a month, "a few weeks ago" weeks
    period: TimeWindow | None  # the one calendar period the words name; None for a span ("the past 3 weeks")
    window: TimeWindow  # what a question asks about: the period, opened by "since" or "this" (so far)
    relative: bool  # counted from now ("last week", "tomorrow"), not a name on the calendar ("in May", "on Monday")
    preposition: str | None  # the word just before the phrase when it is one ("since" last week), lowercased
    possessive: bool  # "next month's trip": the phrase qualifies a noun

    def without(self, text: str) -> str:
        """``text`` with the phrase, and the preposition before it, taken out."""
        head = text[: self.start].rstrip()
        head = head[: len(head) - len(self.preposition)] if self.preposition else head
        return " ".join((head + " " + text[self.end :]).split())


_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name} | {"sept": 9}
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
# Counts as said; "a couple" is two, taken literally.
_NUMBERS = {
    "": 1, "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "a couple of": 2,
}  # fmt: skip
# A question's window is wider for loose counts: "a couple of weeks ago" is one to three weeks back,
# "a few" (no one number) two to five.
_VAGUE = {"couple": (1, 3), "a couple of": (1, 3), "few": (2, 5), "a few": (2, 5)}
_UNITS: dict[str, Unit] = {"day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month",
                           "months": "month", "year": "year", "years": "year", "weekend": "weekend"}  # fmt: skip
_SHIFTS = {"last": -1, "previous": -1, "past": -1, "this": 0, "next": 1}
# Days named from today; a part of the day ("yesterday evening") names the same day.
_DAYS = {"the day before yesterday": -2, "yesterday": -1, "last": -1, "today": 0, "tonight": 0, "this": 0,
         "tomorrow": 1, "the day after tomorrow": 2}  # fmt: skip
_PART_OF_DAY = re.compile(r" (?:morning|afternoon|evening|night)$")
_PREP = r"(?:in|during|on|of|from|since|before|after|until|till|by|around|throughout)"
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_COUNT = r"(?P<count>\d{1,3}|a couple of|a few|couple|few|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"  # noqa: E501
_UNIT = r"(?P<unit>days?|weeks?|months?|years?)"
_DATE_TAIL = _MONTH + r"(?:,?\s+" + _YEAR + r")?"
_WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")"
_DAY_WORDS = (
    r"(?P<words>(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|tomorrow)"
    r"(?:\s+(?:morning|afternoon|evening|night))?|last\s+night|tonight|this\s+(?:morning|afternoon|evening))"
)
_THIS_PAST = r"(?:this\s+(?=past|last))?"  # "this past weekend" is the last one
_DATE_PREP = r"(?:(?P<prep>on|since|before|after|until|by)\s+)?"

# Tried in order at each position; the first that matches wins (longer phrasings first).
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(r"\b" + pattern + r"\b(?P<possessive>['\u2019]s\b)?", re.IGNORECASE))
    for kind, pattern in (
        ("ago", _COUNT + r"\s+" + _UNIT + r"\s+ago"),
        # "the past week" is the seven days to now; "last week" (no "the", no count) the calendar week
        ("past", r"(?:(?:in|over|during)\s+)?(?P<the>the\s+)?(?:past|last|previous)\s+(?:" + _COUNT + r"\s+)?" + _UNIT),
        ("relative", _THIS_PAST + r"(?P<which>last|this|next|previous|past)\s+(?P<unit>week|month|year|weekend)"),
        ("weekday", _THIS_PAST + r"(?P<which>last|this|next|on|past)\s+" + _WEEKDAY),
        ("day", _DAY_WORDS),
        ("date", _DATE_PREP + _MONTH + r"\s+" + _DAY + r"(?:,?\s+" + _YEAR + r")?"),
        ("date", _DATE_PREP + r"(?:the\s+)?" + _DAY + r"\s+(?:of\s+)?" + _DATE_TAIL),
        ("month", r"(?P<prep>" + _PREP + r")\s+(?:early\s+|late\s+|mid-?\s*)?" + _MONTH + r"(?:,?\s+" + _YEAR + r")?"),
        ("month", _MONTH + r",?\s+" + _YEAR),
        ("year", r"(?P<prep>" + _PREP + r")\s+(?:the\s+year\s+)?" + _YEAR),
    )
)
_PREP_BEFORE = re.compile(r"\b(?P<prep>" + _PREP + r")\s+$", re.IGNORECASE)
_CAPITAL_MAY = re.compile(r"\bMay\b")


def time_mention(text: str, now: datetime) -> TimeMention | None:
    """The first phrase of ``text`` that names a time, resolved against ``now``; None when there is none."""
    return next(time_mentions(text, now), None)


def time_mentions(text: str, now: datetime) -> Iterator[TimeMention]:
    """Each phrase of ``text`` that names a time, left to right, resolved against ``now``."""
    at = 0
    while (found := _next_mention(text, now, at)) is not None:
        yield found
        at = found.end


def _next_mention(text: str, now: datetime, at: int) -> TimeMention | None:
    best: TimeMention | None = None
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text, at):
            if best is not None and match.start() >= best.start:
                break  # an earlier pattern found a phrase at or before this one
            found = _mention(kind, match, text, now)
            if found is not None:
                best = found
                break
    return best


def _mention(kind: str, match: re.Match[str], text: str, now: datetime) -> TimeMention | None:
    groups = {k: v.lower() for k, v in match.groupdict().items() if v}
    if groups.get("month") == "may" and not _CAPITAL_MAY.search(match.group(0)):
        return None  # "in may be" is a verb, not a month: the month is written with a capital
    named = _named(kind, groups, _day(now))
    if named is None:
        return None
    unit, period, window, relative = named
    before = _PREP_BEFORE.search(text, 0, match.start())
    possessive = "possessive" in groups  # "of last week's talk": the preposition governs the noun
    preposition = before["prep"].lower() if before and not possessive else None
    closed = period or window
    if closed.since is not None and closed.until is not None:  # "since May", "since last week": open
        window = _open(closed, groups.get("prep") or preposition, window)
    return TimeMention(
        start=match.start(),
        end=match.end(),
        unit=unit,
        period=period,
        window=window,
        relative=relative,
        preposition=preposition,
        possessive=possessive,
    )


_Named = tuple[Unit, TimeWindow | None, TimeWindow, bool]  # unit, period, window, relative


def _named(kind: str, groups: dict[str, str], today: datetime) -> _Named | None:
    """What a phrase of ``kind`` names, said on ``today``; None where the words are no time after all."""
    if kind in ("ago", "past"):
        unit, said = _UNITS[groups["unit"]], " ".join(groups.get("count", "").split())
        exact = int(said) if said.isdigit() else _NUMBERS.get(said)
        low, high = _VAGUE.get(said) or (exact or 0, exact or 0)
        if kind == "past":  # "the past three weeks": from then until now
            if not said and "the" not in groups:
                return None  # "last week" is the calendar week (kind "relative")
            return unit, None, TimeWindow(since=_shift(today, unit, -high), until=None), True
        period = _period(unit, _shift(today, unit, -exact)) if exact is not None else None
        since, until = _period(unit, _shift(today, unit, -high)).since, _period(unit, _shift(today, unit, -low)).until
        return unit, period, TimeWindow(since=since, until=until), True
    if kind == "relative":
        unit, shift = _UNITS[groups["unit"]], _SHIFTS[groups["which"]]
        period = _period(unit, _shift(today, "week" if unit == "weekend" else unit, shift))
        this = shift == 0 and unit != "weekend"  # this week so far
        return unit, period, TimeWindow(since=period.since, until=None) if this else period, True
    if kind == "weekday":
        which, weekday = groups["which"], _WEEKDAYS[groups["weekday"]]
        offset = (weekday - today.weekday()) % 7 or 7  # next Friday: the coming one
        if which == "this":  # the one of this week
            offset = weekday - today.weekday()
        elif which != "next":  # last Friday, on Friday: the latest before today
            offset = -((today.weekday() - weekday) % 7 or 7)
        period = _period("day", today + timedelta(days=offset))
        return "day", period, period, which != "on"
    if kind == "day":
        words = _PART_OF_DAY.sub("", " ".join(groups["words"].split()))
        period = _period("day", today + timedelta(days=_DAYS[words]))
        return "day", period, period, True
    if kind == "date":
        found = _date(groups, today)
        return None if found is None else ("day", found, found, False)
    if kind == "month":
        number = _MONTHS[groups["month"]]
        year = int(groups["year"]) if "year" in groups else today.year - (number > today.month)
        period = _period("month", today.replace(year=year, month=number, day=1))
        return "month", period, period, False
    period = _period("year", today.replace(year=int(groups["year"]), month=1, day=1))
    return "year", period, period, False


def _date(groups: dict[str, str], today: datetime) -> TimeWindow | None:
    number, day = _MONTHS[groups["month"]], int(groups["day"])
    year = int(groups["year"]) if "year" in groups else today.year
    if not 1 <= day <= calendar.monthrange(year, number)[1]:
        return None
    date = today.replace(year=year, month=number, day=day)
    if "year" not in groups and date > today:
        date = date.replace(year=year - 1) if day <= calendar.monthrange(year - 1, number)[1] else date
    return _period("day", date)


def _open(period: TimeWindow, prep: str | None, window: TimeWindow) -> TimeWindow:
    """ "since May" and "after May" are open at the end; "before May" and "until May" at the start."""
    if prep == "since":
        return TimeWindow(since=period.since, until=None)
    if prep == "after":
        return TimeWindow(since=period.until, until=None)
    if prep == "before":
        return TimeWindow(since=None, until=period.since)
    if prep in ("until", "till", "by"):
        return TimeWindow(since=None, until=period.until)
    return window


def _day(now: datetime) -> datetime:
    """Midnight of ``now``'s day, in its own timezone (UTC when naive)."""
    aware = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    return datetime.combine(aware.date(), time(), tzinfo=aware.tzinfo)


def _shift(day: datetime, unit: str, count: int) -> datetime:
    """``day`` moved by ``count`` units; a month's day clamped to its length (Mar 31 - 1 month = Feb 28)."""
    if unit == "day":
        return day + timedelta(days=count)
    if unit in ("week", "weekend"):
        return day + timedelta(weeks=count)
    months = day.year * 12 + day.month - 1 + (count if unit == "month" else 12 * count)
    year, month = divmod(months, 12)
    return day.replace(year=year, month=month + 1, day=min(day.day, calendar.monthrange(year, month + 1)[1]))


def _period(unit: Unit, day: datetime) -> TimeWindow:
    """The calendar day, week (Monday first), weekend (of that week), month or year holding ``day``."""
    if unit == "day":
        return TimeWindow(since=day, until=day + timedelta(days=1))
    if unit in ("week", "weekend"):
        start = day - timedelta(days=day.weekday()) + timedelta(days=5 if unit == "weekend" else 0)
        return TimeWindow(since=start, until=start + timedelta(days=2 if unit == "weekend" else 7))
    start = day.replace(day=1) if unit == "month" else day.replace(month=1, day=1)
    return TimeWindow(since=start, until=_shift(start, unit, 1))
