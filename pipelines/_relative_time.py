"""Relative time words said as the dates they name, against the time a turn was said: "last week"
said on 2 March 2026 is "in the week of 23 February 2026".

Part of the offline rules model: a memory outlives the turn, and "last week" read a year later names
the wrong week. Which words name a time, and which period, is :mod:`tiermem.memory._when`'s to say;
here each phrase counted from when it was said ("yesterday", "tomorrow", "last/this/next" + week,
weekend, month, year or weekday, "two days ago") becomes the day, week, weekend, month or year it
names, said the way the session log dates turns ("1 March 2026"). A preposition before it ("since
last week") is kept in place of the one the date brings. Left as written: phrases already on the
calendar ("on March 3rd", "in May"), vague ones ("a few days ago", "the past week": a span, not a
date) and possessives ("next month's trip").
"""

from __future__ import annotations

from datetime import datetime

from tiermem.memory._when import TimeMention, time_mentions

__all__ = ["resolve_relative_time"]


def resolve_relative_time(text: str, now: datetime) -> str:
    """``text`` with each relative time phrase replaced by the date it names, said at ``now``."""
    out, last = [], 0
    for mention in time_mentions(text, now):
        words = _words(mention)
        if words is None:
            continue
        preposition, phrase = words
        before = text[last : mention.start]
        if mention.preposition is None:
            head = text[: mention.start].rstrip()
            starts_sentence = not head or head[-1] in ".!?"
            before += f"{preposition.capitalize() if starts_sentence else preposition} "
        out += [before, phrase]
        last = mention.end
    return "".join(out) + text[last:]


def _words(mention: TimeMention) -> tuple[str, str] | None:
    """(preposition, phrase) saying the period a relative mention names; None to leave it as written."""
    period = mention.period
    if not mention.relative or mention.possessive or period is None or period.since is None:
        return None
    first = period.since
    day = f"{first.day} {first:%B %Y}"
    if mention.unit == "day":
        return "on", day
    if mention.unit == "week":
        return "in", f"the week of {day}"
    if mention.unit == "weekend":
        return "on", f"the weekend of {day}"
    if mention.unit == "month":
        return "in", f"{first:%B %Y}"
    return "in", str(first.year)
