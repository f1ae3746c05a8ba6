"""Relative time words resolved against the time a turn was said: "last week" said on 2 March 2026 is
"in the week of 23 February 2026".

Part of the offline rules model: a memory outlives the turn, and "last week" read a year later names
the wrong week. Each phrase becomes the date, week, weekend, month or year it names, said the way the
session log dates turns ("1 March 2026"); a preposition before it ("since last week") is kept in place
of the one the resolution brings. Covered: "yesterday", "today", "tonight", "tomorrow", "last night",
"this morning/afternoon/evening"; "last/this/next" + week, weekend, month, year or a weekday; "N
days/weeks/months/years ago" (N a digit or a number word to twelve, "a", "an", "a couple of").
Vague words ("recently", "a few days ago", "the other day") name no date and stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, timedelta

__all__ = ["resolve_relative_time"]

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "a couple of": 2, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_COUNT = "|".join(sorted(map(re.escape, _NUMBERS), key=len, reverse=True))
_NOT_POSSESSIVE = r"\b(?!['\u2019]s\b)"
_AGO = re.compile(rf"\b(?P<n>\d{{1,3}}|{_COUNT})\s+(?P<unit>day|week|month|year)s?\s+ago{_NOT_POSSESSIVE}", re.I)
_NAMED = re.compile(
    rf"\b(?P<which>last|this|next)\s+(?P<unit>week|weekend|month|year|{'|'.join(_WEEKDAYS)}){_NOT_POSSESSIVE}", re.I
)
_DAYS = {"yesterday": -1, "last night": -1, "today": 0, "tonight": 0, "tomorrow": 1}
_DAY = re.compile(
    rf"\b(?P<day>yesterday|last night|today|tonight|tomorrow|this (?:morning|afternoon|evening)){_NOT_POSSESSIVE}",
    re.I,
)
_PREPOSITION = re.compile(r"\b(?:since|until|till|from|by|before|after|during|on|in|of)\s+$", re.I)


def _day(d: date) -> str:
    return f"{d.day} {d:%B %Y}"


def _month(year: int, month: int, shift: int) -> str:
    index = year * 12 + month - 1 + shift
    return f"{date(index // 12, index % 12 + 1, 1):%B %Y}"


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _named(which: str, unit: str, today: date) -> tuple[str, str]:
    """(preposition, phrase) of "last/this/next <unit>"."""
    shift = {"last": -1, "this": 0, "next": 1}[which]
    if unit == "week":
        return "in", f"the week of {_day(_monday(today) + timedelta(weeks=shift))}"
    if unit == "weekend":
        saturday = _monday(today) + timedelta(days=5)  # this week's; on a Sunday, the one of yesterday
        return "on", f"the weekend of {_day(saturday + timedelta(weeks=shift))}"
    if unit == "month":
        return "in", _month(today.year, today.month, shift)
    if unit == "year":
        return "in", str(today.year + shift)
    weekday = _WEEKDAYS.index(unit)
    ahead = (weekday - today.weekday()) % 7
    if which == "last":
        ahead = ahead - 7 if ahead else -7
    elif which == "next":
        ahead = ahead or 7
    else:  # this Friday: the one of this week
        ahead = weekday - today.weekday()
    return "on", _day(today + timedelta(days=ahead))


def _ago(count: int, unit: str, today: date) -> tuple[str, str]:
    if unit == "day":
        return "on", _day(today - timedelta(days=count))
    if unit == "week":
        return "in", f"the week of {_day(_monday(today) - timedelta(weeks=count))}"
    if unit == "month":
        return "in", _month(today.year, today.month, -count)
    return "in", str(today.year - count)


def resolve_relative_time(text: str, now: datetime) -> str:
    """``text`` with each relative time phrase replaced by the date it names, said at ``now``."""
    today = now.date()
    text = _substitute(text, _AGO, lambda m: _ago(_count(m["n"]), m["unit"].lower(), today))
    text = _substitute(text, _NAMED, lambda m: _named(m["which"].lower(), m["unit"].lower(), today))
    return _substitute(text, _DAY, lambda m: ("on", _day(today + timedelta(days=_DAYS.get(m["day"].lower(), 0)))))


def _substitute(text: str, pattern: re.Pattern[str], resolve: Callable[[re.Match[str]], tuple[str, str]]) -> str:
    """Each match of ``pattern`` replaced by its phrase, after its preposition unless one precedes it."""
    out, last = [], 0
    for m in pattern.finditer(text):
        preposition, phrase = resolve(m)
        before = text[last : m.start()]
        if not (text[: m.start()].strip() and text[: m.start()].rstrip()[-1] not in ".!?"):
            preposition = preposition.capitalize()  # it starts a sentence
        out += [before if _PREPOSITION.search(before) else f"{before}{preposition} ", phrase]
        last = m.end()
    return "".join(out) + text[last:]


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[" ".join(word.lower().split())]
