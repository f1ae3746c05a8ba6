"""Relative time words are resolved against the time the turn was said, by the rules model."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tiermem import Message
from tiermem.pipelines import _rules as rules
from tiermem.pipelines._relative_time import resolve_relative_time
from tiermem.prompts import observe as observe_prompt

MONDAY = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)  # Monday 2 March 2026
SUNDAY = datetime(2026, 3, 8, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("said", "at", "resolved"),
    [
        ("I met Ana yesterday.", MONDAY, "I met Ana on 1 March 2026."),
        ("I quit two days ago.", MONDAY, "I quit on 28 February 2026."),
        ("A couple of days ago I fell.", MONDAY, "On 28 February 2026 I fell."),
        ("I started at Globex 3 weeks ago.", MONDAY, "I started at Globex in the week of 9 February 2026."),
        ("We relocated to Porto last week!", MONDAY, "We relocated to Porto in the week of 23 February 2026!"),
        ("We fly to Rome next month.", MONDAY, "We fly to Rome in April 2026."),
        ("We fly to Rome next month.", datetime(2026, 12, 5, tzinfo=UTC), "We fly to Rome in January 2027."),
        ("I have lived here since last year.", MONDAY, "I have lived here since 2025."),
        ("I ran a marathon last weekend.", MONDAY, "I ran a marathon on the weekend of 28 February 2026."),
        ("I ran a marathon last weekend.", SUNDAY, "I ran a marathon on the weekend of 28 February 2026."),
        ("The party is next Friday.", MONDAY, "The party is on 6 March 2026."),
        ("I saw him last Monday.", MONDAY, "I saw him on 23 February 2026."),
        ("Today I turned 35.", MONDAY, "On 2 March 2026 I turned 35."),
        ("I start tomorrow, and I was sick last night.", MONDAY,
         "I start on 3 March 2026, and I was sick on 1 March 2026."),
        ("Next month's trip is booked.", MONDAY, "Next month's trip is booked."),
        ("I was sick a few days ago.", MONDAY, "I was sick a few days ago."),
        ("I moved here recently.", MONDAY, "I moved here recently."),
        ("I met Ana on March 3rd and moved in May, on Monday.", MONDAY,
         "I met Ana on March 3rd and moved in May, on Monday."),
        ("I've been tired the past week.", MONDAY, "I've been tired the past week."),
        ("I arrived the day before yesterday and leave the day after tomorrow.", MONDAY,
         "I arrived on 28 February 2026 and leave on 4 March 2026."),
        ("We hiked this past weekend.", MONDAY, "We hiked on the weekend of 28 February 2026."),
        ("I called her yesterday evening.", MONDAY, "I called her on 1 March 2026."),
        ("Throughout next year I study.", MONDAY, "Throughout 2027 I study."),
    ],
    ids=["yesterday", "days-ago", "couple-of-days-starting", "weeks-ago-digits", "last-week", "next-month",
         "next-month-new-year", "since-last-year", "last-weekend", "last-weekend-on-sunday", "next-weekday",
         "last-weekday-same-day", "today-starting", "two-in-one", "possessive-kept", "vague-kept", "recently-kept",
         "calendar-kept", "past-week-kept", "day-before-and-after", "this-past-weekend", "part-of-day",
         "other-preposition"],
)  # fmt: skip
def test_relative_time_is_resolved_against_the_turn(said: str, at: datetime, resolved: str) -> None:
    assert resolve_relative_time(said, at) == resolved


def test_the_observer_dates_what_it_observes_by_the_turn() -> None:
    turn = [Message(role="user", content="My sister Ana visited us last week. I start at Globex next month.")]

    out = rules.observe(observe_prompt.Input(messages=turn, now=MONDAY))

    texts = " ".join(o.text for o in out.observations)
    assert "in the week of 23 February 2026" in texts and "in April 2026" in texts
    assert "last week" not in texts and "next month" not in texts
