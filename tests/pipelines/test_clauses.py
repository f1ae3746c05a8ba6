"""The rules model splits a sentence that says several things about its subject, and only such a sentence."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tiermem import Message
from tiermem.pipelines._clauses import coordinated
from tiermem.pipelines._rules_observe import observe
from tiermem.prompts import observe as observe_prompt

SPLIT = [
    ("I live in Porto and work at Farfetch as a designer.", ["I live in Porto.", "I work at Farfetch as a designer."]),
    ("I live in Porto, work at Farfetch and play the cello.",
     ["I live in Porto.", "I work at Farfetch.", "I play the cello."]),
    ("I'm a designer and live in Porto.", ["I'm a designer.", "I live in Porto."]),
    ("I'm 34 and have two dogs.", ["I'm 34.", "I have two dogs."]),
    ("I moved to Lisbon and started at Globex last month.", ["I moved to Lisbon.", "I started at Globex last month."]),
    ("We live in Porto and have two dogs.", ["We live in Porto.", "We have two dogs."]),
    ("I live in Porto but work in Lisbon.", ["I live in Porto.", "I work in Lisbon."]),
    ("I live in Lisbon and don't drive.", ["I live in Lisbon.", "I don't drive."]),
    ("I read books and watch movies.", ["I read books.", "I watch movies."]),
    ("Moni plays the cello and sings in a choir.", ["Moni plays the cello.", "Moni sings in a choir."]),
    ("The user lives in Porto and works at Farfetch.", ["The user lives in Porto.", "The user works at Farfetch."]),
]  # fmt: skip
WHOLE = [
    "I like salt and pepper.",
    "I like salt and pepper on my eggs.",
    "I have a dog and a cat.",
    "I love my wife and my kids.",
    "I love hiking and swimming.",
    "I work and study in Berlin.",
    "I bought salt and roasted peppers.",
    "I live in Porto, Portugal.",
    "I work at Acme, a startup in Berlin.",
    "Tom and I went hiking.",
    "My sister Ana plays the cello and lives in Porto.",
]


@pytest.mark.parametrize(("sentence", "parts"), SPLIT, ids=[s for s, _ in SPLIT])
def test_coordinated_predicates_of_one_subject_are_split(sentence: str, parts: list[str]) -> None:
    assert list(coordinated(sentence)) == parts


@pytest.mark.parametrize("sentence", WHOLE, ids=WHOLE)
def test_lists_of_things_and_shared_complements_stay_whole(sentence: str) -> None:
    assert coordinated(sentence) == (sentence,)


def _observed(text: str) -> list[tuple[str, str]]:
    inputs = observe_prompt.Input(
        messages=[Message(role="user", content=text)], user_names=[], now=datetime(2026, 3, 1, tzinfo=UTC)
    )
    return [(o.subject, o.text) for o in observe(inputs).observations]


@pytest.mark.parametrize(
    ("said", "observed"),
    [
        ("Hi! I live in Porto and work at Farfetch as a designer.",
         [("user", "The user lives in Porto."), ("user", "The user works at Farfetch as a designer.")]),
        ("I like salt and pepper.", [("user", "The user likes salt and pepper.")]),
    ],
    ids=["compound", "list"],
)  # fmt: skip
def test_the_rules_observer_gives_one_observation_per_thing_said(said: str, observed: list[tuple[str, str]]) -> None:
    assert _observed(said) == observed
