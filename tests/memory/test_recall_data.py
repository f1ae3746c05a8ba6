"""The paraphrase set (tests/data/paraphrases.json) is what it claims: cues share no content word with their memory."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import Stemmer

DATA = Path(__file__).resolve().parents[1] / "data"

# Deliberately independent of the product's own normalisation (memory/_text.py) and stricter than
# it: a word counts as shared when any of its raw form, light suffix strip or Snowball stem match.
_STOP = frozenset(
    str.split(
        """a about above after again against all am an and any are aren as at be because been before being below
    between both but by can cannot could couldn did didn do does doesn doing don down during each few for from
    further had hadn has hasn have haven having he her here hers herself him himself his how i if in into is
    isn it its itself just ll me more most mustn my myself no nor not now of off on once only or other ought
    our ours ourselves out over own re s same shan she should shouldn so some such t than that the their
    theirs them themselves then there these they this those through to too under until up us very was wasn we
    were weren what when where which while who whom why will with won would wouldn you your yours yourself
    yourselves ve d m"""
    )
)
_STEM = Stemmer.Stemmer("english")


def _light(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "ly", "er", "ion"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)].rstrip("e")
    return word.rstrip("e") if len(word) > 3 else word


def content_keys(text: str) -> set[str]:
    """Every key a content word of ``text`` can match under: raw, light-stripped, Snowball-stemmed."""
    keys: set[str] = set()
    for word in re.findall(r"[a-z0-9]+", text.lower().replace("'s ", " ")):
        if word in _STOP:
            continue
        keys |= {word, _light(word), _STEM.stemWord(word)}
    return keys


def shared_words(a: str, b: str) -> set[str]:
    return content_keys(a) & content_keys(b)


def _load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "paraphrases.json").read_text())
    return data


_DATA = _load()


def test_paraphrase_set_is_large_and_varied() -> None:
    pairs = _DATA["pairs"]
    assert len(pairs) >= 90
    assert len({p["id"] for p in pairs}) == len(pairs)
    assert len({p["topic"] for p in pairs}) >= 12
    assert len(_DATA["unrelated"]) >= 30


@pytest.mark.parametrize("pair", _DATA["pairs"], ids=[p["id"] for p in _DATA["pairs"]])
def test_cue_shares_no_content_word_with_its_memory(pair: dict[str, str]) -> None:
    assert not shared_words(pair["memory"], pair["cue"]), (pair, shared_words(pair["memory"], pair["cue"]))


def test_unrelated_cues_share_no_content_word_with_any_memory() -> None:
    memories = [p["memory"] for p in _DATA["pairs"]]
    filler = json.loads((DATA / "filler.json").read_text())["memories"]
    vocabulary = set().union(*(content_keys(m) for m in memories + filler))
    for cue in _DATA["unrelated"]:
        assert not content_keys(cue) & vocabulary, (cue, content_keys(cue) & vocabulary)


def test_filler_is_what_its_generator_makes() -> None:
    """tests/data/filler.json is bench/_filler.py's output (deterministic): regenerate, don't edit."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_filler", DATA.parents[1] / "bench" / "_filler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert json.loads((DATA / "filler.json").read_text())["memories"] == module.filler()
