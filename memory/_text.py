"""Text normalisation, in one place: word tokens, English stop words, a light stemmer, content terms,
:func:`encodable`, the check that a text from outside can be stored at all, and :func:`loggable`, the one
way a value from outside (a client, a file, a model) reaches a log.

Everything that compares words reads it from here: the ranking (a cue's informative words and how
many of them a memory covers, pseudo-relevance feedback), the offline rules model (which words of
a sentence carry content), the benchmarks' lexical baselines and the store's full-text index
(:data:`FTS_CONFIG`: the engine stems and drops stop words itself, with the same language).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TypedDict

from ._errors import InvalidArgumentError

__all__ = [
    "CHAT_WORDS",
    "FTS_CONFIG",
    "STOP_WORDS",
    "content_terms",
    "encodable",
    "encodable_values",
    "fold",
    "loggable",
    "split_sentences",
    "stem",
    "terms",
    "tokens",
    "words",
]

# Lowercase words; an apostrophe suffix stays attached ("user's", "don't") so contractions are one token.
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_PROTECTED = re.compile(r"\b(Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|e\.g|i\.e|approx)\.", re.IGNORECASE)
_MARK = "\u2063"  # an invisible separator stands in for a protected full stop while splitting
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\s*\n+\s*")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The standard English core (NLTK / scikit-learn) with its contractions, plus a few words that
# carry no topic in questions and chat ("also", "really", "get").
STOP_WORDS = _wordset(
    """a about above after again against all am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
    few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
    herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more
    most mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same
    shan't she she'd she'll she's should shouldn't so some such than that that's the their theirs them
    themselves then there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which
    while who who's whom why why's will with won't would wouldn't you you'd you'll you're you've your yours
    yourself yourselves s t d ll m o re ve y don now just also us ever really much many get got like"""
)

# Words of conversation that are not stop words but say nothing about a topic ("great", "sounds",
# "thanks"): what the rules model ignores when it judges whether a sentence carries content.
CHAT_WORDS = _wordset(
    """i'm i've i'd i'll mine onto shall may might must done go going gone lot lots thing things stuff kind
    sort yes yeah ok okay sure oh hi hello hey thanks thank please well still even today anyway actually maybe
    great good nice cool awesome amazing wonderful lovely glad sounds sound wow haha lol totally definitely
    absolutely interesting user user's said asked one quite"""
)


# The full-text index: the engine's English stemmer and stop words (LanceDB / tantivy).
class FtsConfig(TypedDict):
    """The full-text index's options, typed as the engine's ``FTS(**config)`` takes them."""

    language: str
    stem: bool
    remove_stop_words: bool
    ascii_folding: bool


FTS_CONFIG: FtsConfig = {"language": "English", "stem": True, "remove_stop_words": True, "ascii_folding": True}

_SUFFIXES = ("ing", "ed", "es", "s", "ly")


def encodable(text: str, what: str = "text") -> str:
    """``text`` if it is valid Unicode the store can write (UTF-8: no lone surrogate, as a JSON ``\\ud800``
    escape can make), else InvalidArgumentError (a ValueError, so a pydantic validator reports it)."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(f"{what} has a lone surrogate at {exc.start}: not valid Unicode") from exc
    return text


def encodable_values(value: object, what: str) -> None:
    """InvalidArgumentError if a string anywhere in ``value`` (a mapping's keys too, through nested mappings and
    sequences, as caller metadata holds them) is not :func:`encodable`."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            encodable(item, what)
        elif isinstance(item, Mapping):
            todo += [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple | set | frozenset):
            todo += list(item)


LOG_LIMIT = 200
"""Characters of one outside value a log line shows (before escaping)."""


def loggable(value: object, limit: int = LOG_LIMIT) -> str:
    """``value`` as it may enter a log line: cut to ``limit`` characters with a marker saying how many
    more there were, then control, format and separator characters (newlines, bidi overrides, lone
    surrogates) and backslashes escaped repr-style, so no value forges, splits or floods a line."""
    text = value if isinstance(value, str) else str(value)
    cut, more = text[:limit], len(text) - limit
    shown = "".join(repr(c)[1:-1] if _unsafe(c) else c for c in cut)
    return f"{shown}...[{more} more characters]" if more > 0 else shown


def _unsafe(char: str) -> bool:
    """A backslash, or a control, format, private, unassigned or surrogate character, or any separator but a space."""
    return char == "\\" or (char != " " and unicodedata.category(char)[0] in "CZ")


def fold(text: str) -> str:
    """Lowercase, with typographic apostrophes made plain."""
    lowered = text.lower()
    return lowered if lowered.isascii() else lowered.translate(_QUOTES)  # the quotes are not ASCII


def split_sentences(text: str) -> list[str]:
    """Split text into stripped sentences, keeping their end punctuation ("Dr. Ho" is not a boundary)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    protected = _PROTECTED.sub(lambda m: m.group(0)[:-1] + _MARK, text)
    parts = (p.replace(_MARK, ".").strip() for p in _BOUNDARY.split(protected))
    return [" ".join(p.split()) for p in parts if p and p.strip(" .!?,;:-")]


def tokens(text: str) -> list[str]:
    """Lowercase word tokens; an apostrophe suffix stays attached ("user's", "don't")."""
    return _TOKEN.findall(fold(text))


def words(text: str) -> list[str]:
    """Tokens for retrieval: a possessive "'s" dropped ("caroline's" is "caroline")."""
    return [t[:-2] if t.endswith("'s") else t for t in tokens(text)]


def stem(word: str) -> str:
    """A light suffix strip: "hiking", "hikes" and "hiked" all become "hik"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word.rstrip("e") if len(word) > 3 else word


def content_terms(text: str, *, ignore: Iterable[str] = ()) -> list[str]:
    """Stemmed content words in order, with repeats: no stop words, no single letters, none of ``ignore``."""
    skip = set(ignore)
    if skip:
        return [term for w in words(text) if w not in skip and (term := _content_term(w)) is not None]
    return [term for token in tokens(text) if (term := _token_term(token)) is not None]


@lru_cache(maxsize=1 << 16)
def _token_term(token: str) -> str | None:
    """:func:`_content_term` of a raw token, its possessive dropped as :func:`words` drops it. Cached too."""
    return _content_term(token[:-2] if token.endswith("'s") else token)


@lru_cache(maxsize=1 << 16)
def _content_term(word: str) -> str | None:
    """A word's stem, or None for a stop word or a single letter. Cached: words repeat far more than texts."""
    return stem(word) if len(word) > 1 and word not in STOP_WORDS else None


@lru_cache(maxsize=1 << 16)
def terms(text: str) -> frozenset[str]:
    """Informative words, lightly stemmed ("hiking" meets "hike"): for how much of a cue a memory covers.

    Cached: recall asks it of the same memories' texts query after query.
    """
    return frozenset(content_terms(text))
