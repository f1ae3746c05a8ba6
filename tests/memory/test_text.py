"""The project's light analysis of text (recall's coverage and subject terms, the rules model's words)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiermem.memory._text import STOP_WORDS, content_terms, fold, loggable, stem, terms, words


@pytest.mark.parametrize(
    ("text", "ignore", "expected"),
    [
        pytest.param("She went hiking; he hikes.", (), ["went", "hik", "hik"], id="stems-with-repeats"),
        pytest.param("I have a cat and a dog", (), ["cat", "dog"], id="stop-words-and-letters-out"),
        pytest.param("Caroline\u2019s dog isn\u2019t here", (), ["carolin", "dog"], id="typographic-apostrophes"),
        pytest.param("Moni plays tennis with Moni", ("moni",), ["play", "tenni"], id="ignored-words"),
        pytest.param("Lisbon — trams ☕", (), ["lisbon", "tram"], id="not-ascii"),
        pytest.param("", (), [], id="empty"),
    ],
)
def test_content_terms(text: str, ignore: tuple[str, ...], expected: list[str]) -> None:
    assert content_terms(text, ignore=ignore) == expected
    assert content_terms(text, ignore=ignore) == expected  # the per-word memo answers the same the second time
    assert terms(text) == frozenset(content_terms(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Don\u2019t", "don't", id="right-quote"),
        pytest.param("\u2018Hi\u2019", "'hi'", id="left-and-right"),
        pytest.param("It\u02bcs", "it's", id="modifier-letter"),
        pytest.param("PLAIN ascii", "plain ascii", id="ascii"),
    ],
)
def test_fold(text: str, expected: str) -> None:
    assert fold(text) == expected


def _reference_content_terms(text: str, ignore: tuple[str, ...]) -> list[str]:
    """The definition, word by word: stems of the words that are not stop words, single letters or ignored."""
    return [stem(w) for w in words(text) if len(w) > 1 and w not in STOP_WORDS and w not in ignore]


@settings(max_examples=400, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(
            [
                "user's",
                "Caroline\u2019s",
                "it's",
                "don't",
                "o'sullivan",
                "james's",
                "90's",
                "'s",
                "s",
                "a",
                "hiking",
                "hikes",
                "the",
                "Moni",
                "rock'n'roll",
                "users'",
                "x",
                "Lisbon",
                "'",
                "-",
                " ",
                ".",
                "\u2014",
                "caf\u00e9",
                "sa",
                "'sa",
            ]
        ),
        max_size=12,
    ).map("".join),
    ignore=st.lists(st.sampled_from(["moni", "user", "lisbon", "s"]), max_size=2).map(tuple),
)
def test_content_terms_are_the_definition(text: str, ignore: tuple[str, ...]) -> None:
    assert content_terms(text, ignore=ignore) == _reference_content_terms(text, ignore)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("recall", "recall", id="plain"),
        pytest.param("a\nINFO forged line", "a\\nINFO forged line", id="newline"),
        pytest.param("a\r\x00\x1b[31m", "a\\r\\x00\\x1b[31m", id="controls"),
        pytest.param("a\u2028b\u202ec", "a\\u2028b\\u202ec", id="separators-and-bidi"),
        pytest.param("\ud800", "\\ud800", id="lone-surrogate"),
        pytest.param("a\\nb", "a\\\\nb", id="backslash-stays-distinct-from-an-escape"),
        pytest.param("café tea", "café tea", id="printable-unicode-kept"),
        pytest.param(ValueError("bad\nvalue"), "bad\\nvalue", id="an-exception"),
    ],
)
def test_loggable_escapes_what_could_split_or_forge_a_line(value: object, expected: str) -> None:
    assert loggable(value) == expected


def test_loggable_truncates_with_a_marker() -> None:
    shown = loggable("x\n" * 500_000, limit=10)
    assert shown == "x\\nx\\nx\\nx\\nx\\n...[999990 more characters]"
