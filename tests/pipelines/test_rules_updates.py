"""The offline rules model recognises updates (issue 12 item 4), through the real pipeline.

Each case captures one session, ends and consolidates it, then a later session likewise, with the
rules model, a real LanceDB in a temporary folder and a frozen clock; the facts then tell what is
active and what was superseded. The patterns themselves are listed in :mod:`tiermem.pipelines._updates`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tiermem import Fact, MemoryContext, MemorySystem, system
from tiermem.memory.testing import FrozenClock, HashingEmbedder
from tiermem.pipelines._sentences import normalise
from tiermem.pipelines._updates import claims_of

BASE = MemoryContext(namespace="updates", user_id="sam")
START = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)


def _system(tmp_path: Path, clock: FrozenClock) -> MemorySystem:
    return system(
        model="rules",
        store=str(tmp_path / "store"),
        embedder=HashingEmbedder(256),
        clock=clock,
        semantic={"relations": {"create_implicit_entities": True}},
    )


async def _sessions(tmp_path: Path, *sessions: str) -> tuple[MemorySystem, list[Fact]]:
    """One session per text, each a week after the last, consolidated after each; all facts after."""
    clock = FrozenClock(START)
    mem = _system(tmp_path, clock)
    for i, text in enumerate(sessions):
        clock.set(START + timedelta(days=7 * i))
        ctx = BASE.model_copy(update={"session_id": f"s-{i}"})
        await mem.capture(ctx, [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
        await mem.end_session(ctx)
        await mem.consolidate(BASE)
    return mem, await mem.facts(BASE, include_inactive=True)


def _active(facts: list[Fact], subject: str = "user") -> list[str]:
    return [f.text for f in facts if f.status == "active" and f.subject == subject]


def _superseded(facts: list[Fact], subject: str = "user") -> list[str]:
    return [f.text for f in facts if f.status == "superseded" and f.subject == subject]


async def test_moving_from_berlin_to_lisbon_supersedes_the_berlin_home(tmp_path: Path) -> None:
    """The acceptance case: one active residence (Lisbon), Berlin kept as superseded history."""
    mem, facts = await _sessions(tmp_path, "I live in Berlin.", "I moved from Berlin to Lisbon last month.")
    (lisbon,) = [f for f in facts if f.status == "active"]
    (berlin,) = [f for f in facts if f.status == "superseded"]
    assert lisbon.text == "The user lives in Lisbon (moved there in February 2026)."
    assert berlin.text == "The user lives in Berlin."
    assert berlin.superseded_by == lisbon.id and berlin.valid_to is not None
    homes = {e.target: e.current for e in await mem.connections(BASE, "user", include_history=True)}
    assert homes == {"berlin": False, "lisbon": True}
    recalled = await mem.recall(BASE, "Where does the user live?", tiers=["semantic"])
    assert "Lisbon" in recalled[0].text


# (first session, later session, the active fact afterwards, the fact it superseded)
UPDATES = [
    # residence
    pytest.param("I live in Berlin.", "I moved to Lisbon.", "The user lives in Lisbon.", "The user lives in Berlin.",
                 id="residence-moved-to"),
    pytest.param("I live in Berlin.", "I live in Lisbon now.", "The user lives in Lisbon now.",
                 "The user lives in Berlin.", id="residence-live-now"),
    pytest.param("I live in Berlin.", "Big news: we relocated to Porto last week!",
                 "The user lives in Porto (moved there in the week of 2 March 2026).", "The user lives in Berlin.",
                 id="residence-we"),
    pytest.param("I've lived in Berlin for years.", "I've moved to Lisbon.", "The user lives in Lisbon.",
                 "The user has lived in Berlin for years.", id="residence-contractions"),
    # employment
    pytest.param("I work at Acme Corp.", "I work at Globex now.", "The user works at Globex now.",
                 "The user works at Acme Corp.", id="employer-now"),
    pytest.param("I work at Acme Corp.", "I'm a designer at Globex these days.",
                 "The user is a designer at Globex these days.", "The user works at Acme Corp.", id="employer-role"),
    pytest.param("I work at Acme Corp.", "I started at Globex last week.",
                 "The user works at Globex (started there in the week of 2 March 2026).",
                 "The user works at Acme Corp.", id="employer-started"),
    pytest.param("I work at Acme Corp.", "I joined Initech.", "The user works at Initech.",
                 "The user works at Acme Corp.", id="employer-joined"),
    pytest.param("I work at Acme Corp.", "I left Acme Corp. I work at Globex now.", "The user works at Globex now.",
                 "The user works at Acme Corp.", id="employer-left-then-new"),
    pytest.param("I work at Acme Corp.", "I quit my job last week.",
                 "The user no longer works at Acme Corp (quit the user's job in the week of 2 March 2026).",
                 "The user works at Acme Corp.", id="employer-quit"),
    pytest.param("I work at Acme Corp.", "I got laid off.", "The user no longer works at Acme Corp (got laid off).",
                 "The user works at Acme Corp.", id="employer-laid-off"),
    pytest.param("I work at Acme Corp.", "I LEFT ACME CORP!", "The user no longer works at Acme Corp.",
                 "The user works at Acme Corp.", id="employer-left-shouted"),
    pytest.param("I work at Acme Corp.", "I left Acme Corp.", "The user no longer works at Acme Corp.",
                 "The user works at Acme Corp.", id="employer-left"),
    # relationships
    pytest.param("I'm dating Jake.", "We broke up.", "The user is no longer with Jake.", "The user is dating Jake.",
                 id="partner-broke-up"),
    pytest.param("I have a boyfriend named Jake.", "I split up with Jake in May.",
                 "The user is no longer with Jake (in May).", "The user has a boyfriend named Jake.",
                 id="partner-split-up"),
    pytest.param("I have a boyfriend named Jake.", "We got engaged!", "The user is engaged to Jake.",
                 "The user has a boyfriend named Jake.", id="partner-engaged"),
    pytest.param("I'm engaged to Jake.", "I got married to Jake last summer.",
                 "The user is married to Jake (got married last summer).", "The user is engaged to Jake.",
                 id="partner-married"),
    pytest.param("I'm married to Moni.", "I'm divorced.", "The user is divorced from Moni (no longer married).",
                 "The user is married to Moni.", id="partner-divorced"),
    # numbers that change
    pytest.param("I'm 34 years old.", "I turned 35.", "The user is 35 years old.", "The user is 34 years old.",
                 id="age-turned"),
    pytest.param("I'm 34.", "I'm 35 now.", "The user is 35 years old.", "The user is 34.", id="age-now"),
    pytest.param("I have two kids.", "I have three kids now.", "The user has three kids.", "The user has two kids.",
                 id="count-kids"),
    pytest.param("I have a dog.", "We got a second dog.", "The user has two dogs.", "The user has a dog.",
                 id="count-second"),
    pytest.param("I have two cats.", "We adopted another cat.", "The user has three cats.", "The user has two cats.",
                 id="count-another"),
]  # fmt: skip


@pytest.mark.parametrize(("first", "later", "active", "superseded"), UPDATES)
async def test_updates_supersede_the_fact_they_change(
    tmp_path: Path, first: str, later: str, active: str, superseded: str
) -> None:
    _, facts = await _sessions(tmp_path, first, later)
    assert _superseded(facts) == [superseded]
    assert active in _active(facts)
    old = next(f for f in facts if f.status == "superseded")
    assert old.superseded_by == next(f.id for f in facts if f.text == active)


NOT_UPDATES = [
    pytest.param("I live in Berlin.", "My friend moved to Rome.", id="friend-moved"),
    pytest.param("I live in Berlin.", "My parents relocated to Spain.", id="parents-relocated"),
    pytest.param("I live in Berlin.", "I used to live in Paris.", id="used-to-live"),
    pytest.param("I live in Berlin.", "I lived in Paris before.", id="past-tense"),
    pytest.param("I live in Berlin.", "I left Berlin for a weekend in Prague.", id="left-for-a-trip"),
    pytest.param("I work at Acme Corp.", "I work at Acme Corp.", id="same-job-again"),
    pytest.param("I work at Acme Corp.", "I joined the Chess Club.", id="joined-a-club"),
    pytest.param("I work at Acme Corp.", "I quit smoking.", id="quit-smoking"),
    pytest.param("I work at Acme Corp.", "I left Tom's party early.", id="left-a-party"),
    pytest.param("I'm married to Moni.", "My brother Tom got divorced.", id="brother-divorced"),
    pytest.param("I'm 34.", "My daughter is 5.", id="someone-elses-age"),
    pytest.param("I have two kids.", "I have two cats.", id="other-count"),
]


@pytest.mark.parametrize(("first", "later"), NOT_UPDATES)
async def test_what_is_not_an_update_supersedes_nothing(tmp_path: Path, first: str, later: str) -> None:
    _, facts = await _sessions(tmp_path, first, later)
    assert _superseded(facts) == [], [f.text for f in facts]
    assert len(_active(facts)) >= 1


async def test_the_same_job_said_again_reinforces(tmp_path: Path) -> None:
    _, facts = await _sessions(tmp_path, "I work at Acme Corp.", "I work at Acme Corp.")
    (fact,) = facts
    assert fact.status == "active" and fact.reinforcements >= 1


async def test_a_relative_moving_supersedes_their_home_not_the_users(tmp_path: Path) -> None:
    _, facts = await _sessions(
        tmp_path, "I live in Berlin. My sister Ana lives in Porto.", "My sister Ana moved to Lisbon."
    )
    assert _superseded(facts, "ana") == ["Ana, the user's sister, lives in Porto."]
    assert _active(facts, "ana") == ["Ana, the user's sister, lives in Lisbon."]  # the relation is kept
    assert _active(facts, "user") == ["The user lives in Berlin."]


async def test_a_fact_that_said_several_things_keeps_what_did_not_change(tmp_path: Path) -> None:
    mem, facts = await _sessions(
        tmp_path,
        "I live in Berlin and I work at Acme Corp. I'm 34 and I have a dog.",
        "Quick update: I moved to Lisbon, I'm 35 now, and we got a second dog.",
    )
    assert sorted(_active(facts)) == [
        "The user is 35 years old; the user has two dogs.",
        "The user lives in Lisbon; the user works at Acme Corp.",
    ]
    assert len(_superseded(facts)) == 2
    edges = {e.target: e.current for e in await mem.connections(BASE, "user", include_history=True)}
    assert edges == {"berlin": False, "lisbon": True, "acme-corp": True}


async def test_leaving_a_job_closes_its_edge(tmp_path: Path) -> None:
    mem, _ = await _sessions(tmp_path, "I work at Acme Corp.", "I quit my job.")
    edges = await mem.connections(BASE, "user", include_history=True)
    assert [(e.target, e.current) for e in edges if e.relation == "works at"] == [("acme-corp", False)]


# -- attribution: a named third person is the subject --------------------------------------------


@pytest.mark.parametrize(
    ("text", "subject", "fact", "edge"),
    [
        ("Moni's brother Tom plays the cello.", "tom", "Tom, Moni's brother, plays the cello.",
         ("tom", "brother of", "moni")),
        ("My sister Ana lives in Porto.", "ana", "Ana, the user's sister, lives in Porto.",
         ("ana", "sister of", "user")),
        ("Tom's wife Ana is a nurse.", "ana", "Ana, Tom's wife, is a nurse.", ("tom", "married to", "ana")),
        ("Sam's brother Tom plays chess.", "tom", "Tom, the user's brother, plays chess.",
         ("tom", "brother of", "user")),
    ],
    ids=["named-owner", "my-sister", "named-couple", "owner-is-the-user-by-name"],
)  # fmt: skip
async def test_a_named_third_person_is_the_subject_with_the_relation_kept(
    tmp_path: Path, text: str, subject: str, fact: str, edge: tuple[str, str, str]
) -> None:
    clock = FrozenClock(START)
    mem = _system(tmp_path, clock)
    await mem.add_alias(BASE, "Sam")
    ctx = BASE.model_copy(update={"session_id": "s-0"})
    await mem.capture(ctx, [{"role": "user", "content": text}])
    await mem.end_session(ctx)
    await mem.consolidate(BASE)
    facts = await mem.facts(BASE)
    assert [(f.subject, f.text) for f in facts] == [(subject, fact)]
    edges = await mem.connections(BASE, subject)
    assert edge in {(e.source, e.relation, e.target) for e in edges}


# -- the pattern table itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "attribute", "role", "value"),
    [
        ("The user moved from Berlin to Lisbon last month.", "residence", "change", "Lisbon"),
        ("The user and others relocated to New York City.", "residence", "change", "New York City"),
        ("Ana, the user's sister, lives in Porto.", "residence", "state", "Porto"),
        ("The user now works for Bank of America.", "employer", "state", "Bank of America"),
        ("The user was hired by Globex.", "employer", "change", "Globex"),
        ("The user got fired.", "employer", "end", None),
        ("The user no longer works at Acme Corp.", "employer", "end", "Acme Corp"),
        ("The user and others got married.", "partner", "change", "married"),
        ("The user is thirty-four years old.", "age", "state", "34"),
        ("The user has 3 children now.", "count:kid", "state", "3"),
        ("The user got a third puppy.", "count:dog", "change", "3"),
    ],
    ids=["moved-from-to", "we-multiword-place", "apposition", "org-with-of", "hired", "fired", "no-longer",
         "we-married", "age-in-words", "children", "ordinal-synonym"],
)  # fmt: skip
def test_claims(sentence: str, attribute: str, role: str, value: str | None) -> None:
    (claim, *_) = claims_of(sentence)
    assert (claim.attribute, claim.role, claim.value) == (attribute, role, value)


@pytest.mark.parametrize(
    "sentence",
    [
        "The user's friend moved to Rome.",
        "The user used to live in Paris.",
        "The user lived in Paris.",
        "The user joined the Chess Club.",
        "The user quit smoking.",
        "The user has two cats and a parrot.",
        "The user has been busy.",
        "The user moved to the countryside.",
        "Painting is fun.",
    ],
    ids=["friend", "used-to", "past", "club", "quit-smoking", "list-count", "has-been", "lowercase-place",
         "no-subject"],
)  # fmt: skip
def test_no_claim(sentence: str) -> None:
    assert claims_of(sentence) == []


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        pytest.param(claims_of, "The user moved to Lisbon and the user works at Globex.", id="claims"),
        pytest.param(normalise, "The user still lives in Porto now.", id="tokens"),
    ],
)
def test_a_memoised_parse_hands_each_caller_its_own_list(parse: Callable[[str], list[Any]], text: str) -> None:
    first = parse(text)
    expected = list(first)
    first.clear()  # a caller changing its answer must not change the next caller's (the parse is memoised)
    assert parse(text) == expected and expected
