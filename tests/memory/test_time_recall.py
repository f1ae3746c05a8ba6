"""Time-aware recall (issue 34, item 3): time words in a cue, ``since``/``until`` on recall and list.

The phrases are resolved against a fixed Friday, 2026-12-04 10:00 UTC. The store tests capture three
sessions on three dates (May, last week, yesterday) through a real LanceDB with the rules model,
each consolidated when it happened, then ask about each period in several wordings.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import InvalidArgumentError, MemoryContext, MemoryItem, MemorySystem, system
from tiermem.memory._cli._main import cli
from tiermem.memory._when import TimeWindow, Unit, time_mention, time_mentions
from tiermem.memory.testing import FrozenClock, HashingEmbedder

NOW = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)  # a Friday


def _d(month: int, day: int, year: int = 2026) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "since", "until", "left"),
    [
        ("what did I say last week?", _d(11, 23), _d(11, 30), "what did I say ?"),
        ("what did we talk about in May?", _d(5, 1), _d(6, 1), "what did we talk about ?"),
        ("what happened yesterday", _d(12, 3), _d(12, 4), "what happened"),
        ("what did I mention the day before yesterday", _d(12, 2), _d(12, 3), "what did I mention"),
        ("two days ago I said", _d(12, 2), _d(12, 3), "I said"),
        ("3 weeks ago", _d(11, 9), _d(11, 16), ""),
        ("a few weeks ago", _d(10, 26), _d(11, 23), ""),
        ("a couple of days ago", _d(12, 1), _d(12, 4), ""),
        ("in the past 3 weeks", _d(11, 13), None, ""),
        ("over the last two months", _d(10, 4), None, ""),
        ("what did I tell you on March 3rd?", _d(3, 3), _d(3, 4), "what did I tell you ?"),
        ("on the 5th of May 2025", _d(5, 5, 2025), _d(5, 6, 2025), ""),
        ("on December 25", _d(12, 25, 2025), _d(12, 26, 2025), ""),
        ("since April", _d(4, 1), None, ""),
        ("before June 2024", None, _d(6, 1, 2024), ""),
        ("after March", _d(4, 1), None, ""),
        ("what did we do last weekend", _d(11, 28), _d(11, 30), "what did we do"),
        ("what did I say on Monday", _d(11, 30), _d(12, 1), "what did I say"),
        ("last Friday", _d(11, 27), _d(11, 28), ""),
        ("trips in 2024", _d(1, 1, 2024), _d(1, 1, 2025), "trips"),
        ("in December", _d(12, 1), _d(1, 1, 2027), ""),
        ("the May 2025 trip", _d(5, 1, 2025), _d(6, 1, 2025), "the trip"),
        ("last month", _d(11, 1), _d(12, 1), ""),
        ("this week", _d(11, 30), None, ""),
        ("this year", _d(1, 1), None, ""),
        ("last year", _d(1, 1, 2025), _d(1, 1, 2026), ""),
        ("this morning", _d(12, 4), _d(12, 5), ""),
        ("what did I say since last week", _d(11, 23), None, "what did I say"),  # opened by its preposition
        ("anything before yesterday evening?", None, _d(12, 3), "anything ?"),
        ("in the past week", _d(11, 27), None, ""),  # seven days to now, not the calendar week
        ("what did we do this past weekend", _d(11, 28), _d(11, 30), "what did we do"),
        ("notes from last week's meeting", _d(11, 23), _d(11, 30), "notes from meeting"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_time_phrases_resolve_against_now(text: str, since: datetime | None, until: datetime | None, left: str) -> None:
    found = time_mention(text, NOW)
    assert found is not None
    assert found.window == TimeWindow(since=since, until=until)
    assert found.without(text) == left


@pytest.mark.parametrize(
    "text",
    [
        "when did I start at Globex?",
        "I may go to the market",
        "in may be the case",  # the modal verb, not the month
        "the 2024 budget",  # a year without a preposition is a name, not a time
        "we will march on",
        "what is my sister's name?",
        "February 30",  # no such day
        "",
    ],
    ids=["no-time", "may-verb", "may-lowercase", "bare-year", "march-verb", "plain", "no-such-day", "empty"],
)
def test_no_time_is_read_into_other_words(text: str) -> None:
    assert time_mention(text, NOW) is None


@pytest.mark.parametrize(
    ("text", "unit", "since", "until"),
    [
        ("tomorrow", "day", _d(12, 5), _d(12, 6)),
        ("the day after tomorrow", "day", _d(12, 6), _d(12, 7)),
        ("next week", "week", _d(12, 7), _d(12, 14)),
        ("next weekend", "weekend", _d(12, 12), _d(12, 14)),
        ("this weekend", "weekend", _d(12, 5), _d(12, 7)),  # the weekend of this calendar week
        ("next month", "month", _d(1, 1, 2027), _d(2, 1, 2027)),
        ("next year", "year", _d(1, 1, 2027), _d(1, 1, 2028)),
        ("next Friday", "day", _d(12, 11), _d(12, 12)),  # said on a Friday: the coming one
        ("this Monday", "day", _d(11, 30), _d(12, 1)),
        ("this Sunday", "day", _d(12, 6), _d(12, 7)),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_future_words_name_their_period(text: str, unit: Unit, since: datetime, until: datetime) -> None:
    found = time_mention(text, NOW)
    assert found is not None and found.relative
    assert (found.unit, found.period) == (unit, TimeWindow(since=since, until=until))


def test_every_mention_is_found_with_what_it_names() -> None:
    text = "Since last week, tomorrow, a few days ago, in May, on Monday, next month's trip, the past 3 weeks"
    found = [
        (text[m.start : m.end], m.unit, m.relative, m.period, m.preposition, m.possessive)
        for m in time_mentions(text, NOW)
    ]
    assert found == [
        ("last week", "week", True, TimeWindow(since=_d(11, 23), until=_d(11, 30)), "since", False),
        ("tomorrow", "day", True, TimeWindow(since=_d(12, 5), until=_d(12, 6)), None, False),
        ("a few days ago", "day", True, None, None, False),  # a span of days, no one date
        ("in May", "month", False, TimeWindow(since=_d(5, 1), until=_d(6, 1)), None, False),
        ("on Monday", "day", False, TimeWindow(since=_d(11, 30), until=_d(12, 1)), None, False),
        ("next month's", "month", True, TimeWindow(since=_d(1, 1, 2027), until=_d(2, 1, 2027)), None, True),
        ("the past 3 weeks", "week", True, None, None, False),
    ]


# -- through the store ---------------------------------------------------------------------

CTX = MemoryContext(namespace="time", user_id="ana")
SESSIONS = [
    (datetime(2026, 5, 12, 18, 0, tzinfo=UTC), "s-may", "I adopted a grey cat named Pixel from the shelter."),
    (datetime(2026, 11, 25, 19, 0, tzinfo=UTC), "s-lastweek", "I started a pottery class on Wednesday evenings."),
    (datetime(2026, 12, 3, 8, 0, tzinfo=UTC), "s-yesterday", "I booked a flight to Oslo for the conference."),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("time") / "store"
    clock = FrozenClock(SESSIONS[0][0])

    async def write() -> None:
        mem = system(model="rules", store=str(folder), embedder=HashingEmbedder(256), clock=clock)
        for at, sid, text in SESSIONS:
            clock.set(at)
            session = CTX.model_copy(update={"session_id": sid})
            await mem.capture(session, [{"role": "user", "content": text}])
            clock.advance(timedelta(minutes=5))
            await mem.end_session(session)
            await mem.consolidate(CTX)
        await mem.digest(CTX)

    asyncio.run(write())
    return folder


@pytest.fixture
def mem(built: Path, tmp_path: Path) -> MemorySystem:
    shutil.copytree(built, tmp_path / "store")
    return system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256), clock=FrozenClock(NOW))


def _said(item: MemoryItem) -> tuple[datetime, datetime]:
    """When a listed memory was said, from what it shows (the test's own statement of the rule)."""
    meta = item.metadata
    if meta.get("started_at"):
        return datetime.fromisoformat(meta["started_at"]), datetime.fromisoformat(meta["ended_at"])
    at = datetime.fromisoformat(meta["valid_from"]) if meta.get("valid_from") else item.created_at
    return at, at


def _words(items: Sequence[MemoryItem], n: int) -> str:
    return " ".join(i.text for i in items[:n]).lower()


@pytest.mark.parametrize(
    ("cue", "expected", "others"),
    [
        ("what did I say last week?", "pottery", ("pixel", "oslo")),
        ("What did we talk about last week", "pottery", ("pixel", "oslo")),
        ("what did we talk about in May?", "pixel", ("pottery", "oslo")),
        ("anything new since May 20?", "oslo", ("pixel",)),  # the newest first
        ("what did I tell you yesterday?", "oslo", ("pixel", "pottery")),
        ("which class did I mention two weeks ago?", "pottery", ()),
    ],
    ids=["last-week", "last-week-talk", "in-may", "since-date", "yesterday", "topic-and-time"],
)
def test_a_time_in_the_cue_ranks_what_was_said_then_first(
    mem: MemorySystem, cue: str, expected: str, others: tuple[str, ...]
) -> None:
    found = asyncio.run(mem.recall(CTX, cue, limit=5))
    assert found, cue
    first = found[0].text.lower()
    assert expected in first, [i.text for i in found]
    assert not any(word in first for word in others)


def test_a_topic_outside_the_named_time_is_still_found(mem: MemorySystem) -> None:
    """A time named wrongly ("in 2019": nothing then) loses nothing: the whole cue over all time follows."""
    found = asyncio.run(mem.recall(CTX, "what did I say about my cat in 2019?", limit=5))
    assert "pixel" in _words(found, 3)


def test_as_of_resolves_relative_words_against_the_question_time(mem: MemorySystem) -> None:
    asked = datetime(2026, 5, 20, 12, tzinfo=UTC)  # the week after the cat: "last week" is May 11-17
    found = asyncio.run(mem.recall(CTX, "what did I say last week?", as_of=asked, limit=3))
    assert "pixel" in found[0].text.lower()


@pytest.mark.parametrize(
    ("since", "until", "present", "absent"),
    [
        (_d(11, 1), _d(12, 1), "pottery", ("pixel", "oslo")),
        (_d(12, 1), None, "oslo", ("pixel", "pottery")),
        (None, _d(6, 1), "pixel", ("pottery", "oslo")),
    ],
    ids=["november", "since-december", "until-june"],
)
def test_since_and_until_filter_recall_and_list(
    mem: MemorySystem, since: datetime | None, until: datetime | None, present: str, absent: tuple[str, ...]
) -> None:
    window = TimeWindow(since=since, until=until)
    for cue in (None, "cat pottery flight Oslo class Pixel"):
        found = asyncio.run(mem.recall(CTX, cue, since=since, until=until, limit=20))
        assert found and present in _words(found, 20), cue
        assert not any(word in _words(found, 20) for word in absent), cue
        assert all(window.overlaps(*_said(i)) for i in found)
        assert not any(i.tier == "digest" for i in found)
    listed = asyncio.run(mem.list(CTX, since=since, until=until)).items
    assert listed and all(window.overlaps(*_said(i)) for i in listed)
    everything = asyncio.run(mem.list(CTX)).items
    assert {i.id for i in listed} == {i.id for i in everything if i.tier != "digest" and window.overlaps(*_said(i))}


def test_the_blocking_facade_takes_the_window(mem: MemorySystem) -> None:
    found = mem.blocking().recall(CTX, "pottery", since=_d(11, 1), until=_d(12, 1))
    assert found and all(_d(11, 1) <= _said(i)[0] < _d(12, 1) for i in found)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"since": datetime(2026, 1, 1)},  # naive: which timezone?
        {"until": "2026-01-01"},
        {"since": _d(6, 1), "until": _d(5, 1)},
        {"since": _d(6, 1), "until": _d(6, 1)},
        {"as_of": datetime(2026, 1, 1)},
    ],
    ids=["naive-since", "string-until", "reversed", "empty", "naive-as-of"],
)
def test_a_bad_window_is_refused(mem: MemorySystem, kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidArgumentError):
        asyncio.run(mem.recall(CTX, "cat", **kwargs))  # type: ignore[arg-type]
    if "as_of" not in kwargs:
        with pytest.raises(InvalidArgumentError):
            asyncio.run(mem.list(CTX, **kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("command", "window", "present", "absent"),
    [
        (["show", "ana"], ["--since", "2026-11-01", "--until", "2026-12-01"], "pottery", "pixel"),
        (["search", "ana", "cat pottery flight"], ["--until", "2026-06-01"], "pixel", "pottery"),
    ],
    ids=["show-window", "search-until"],
)
def test_the_cli_takes_the_window(
    mem: MemorySystem, tmp_path: Path, command: list[str], window: list[str], present: str, absent: str
) -> None:
    folder = tmp_path / "store"  # the copy ``mem`` opened
    result = CliRunner().invoke(
        cli, [*command, "--namespace", "time", "--store", str(folder), *window, "--json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    texts = [i["text"].lower() for i in json.loads(result.stdout)]
    assert texts and present in texts[0]
    assert not any(absent in t for t in texts)


def test_the_recall_tool_takes_dates_and_shows_each_memorys_date(mem: MemorySystem) -> None:
    tool = mem.tools(CTX).get("memory_recall")
    assert tool is not None
    envelope = asyncio.run(tool.call({"query": "cat pottery flight", "since": "2026-11-01", "until": "2026-12-01"}))
    assert envelope["ok"], envelope
    assert envelope["results"] and all("2026-11-01" <= r["date"] < "2026-12-01" for r in envelope["results"])
    assert any("pottery" in r["text"].lower() for r in envelope["results"])
    refused = asyncio.run(tool.call({"query": "cat", "since": "2026-12-01", "until": "2026-11-01"}))
    assert not refused["ok"] and "since" in refused["error"]
