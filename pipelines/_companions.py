"""Who "we" is: the one companion a sentence, or else its turn, names beside the speaker.

The rules model rewrites "we" and "us" as "<speaker> and <who>". "My wife Moni is allergic to shellfish,
so we never order paella." gives "the user and Moni never order paella"; "Tom and I went hiking; we loved
it." gives "the user and Tom loved it"; "My family loves the beach, so we go every summer." gives "the user
and their family go every summer". With no companion, or more than one, the words stay faithful to what
was said: "the user and others".

A companion is someone the speaker puts beside themselves:

- coordinated with "I" / "me": "Tom and I", "me and my friends", "Ann, Bob and I" (two);
- introduced as the speaker's relative or friend: "my wife Moni", "Moni, my wife,", "my brother", "my kids";
- in company, said of the speaker alone: "I went hiking with my brother Tom".

Only what is said before the sentence's first "we" / "us" counts ("We visited my brother Tom" is about
whom "we" visited, not who "we" is), and only sentences of the turn without "we" / "us" / "our" are read
when the sentence itself names no companion. "our son Leo" is one of "us", never beside "us". A bare
name ("Moni is allergic ..., so we ...", "I work with Python. We ...") is not enough: a name alone may
be an organisation, a place or a tool.

:func:`for_one` reads such a sentence back for the speaker alone ("the user and Moni live in Porto":
the user lives in Porto), as the update rules of :mod:`._updates` do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ._sentences import REL_MOD, RELATIONS, STARTERS, third_person

__all__ = ["WE_COMPANY", "for_one", "we_company"]

OTHERS = "others"
# The words "we" becomes after "the user and " (see _updates and _clauses, which read the subject back).
WE_COMPANY = r" and (?:others|their [a-z-]+|[A-Z][a-z]+(?: [A-Z][a-z]+)?)"

_GROUPS = ("family", "friends", "kids", "children", "parents", "folks")
_KIN = "|".join(sorted([*map(re.escape, RELATIONS), *_GROUPS], key=len, reverse=True))
_NAME = r"(?:[A-Z][a-z]+(?: [A-Z][a-z]+)?)"
_MOD = REL_MOD
# One companion: "my wife Moni", "my brother", "my friends", or a name ("Tom").
_ONE = rf"(?:[Mm]y\s+{_MOD}(?:{_KIN})s?\b(?:,?\s+{_NAME}\b)?|{_NAME}\b)"
_ONE_RE = re.compile(rf"[Mm]y\s+{_MOD}(?P<kin>{_KIN})(?P<s>s?)\b(?:,?\s+(?P<named>{_NAME})\b)?|(?P<name>{_NAME})\b")
# A list of up to six: bounded, so a long run of names costs linear time (a longer one is "others" anyway).
_LIST = rf"{_ONE}(?:\s*,\s*{_ONE}){{0,4}}(?:,?\s+and\s+{_ONE})?"
_MENTIONS = re.compile(
    rf"(?P<before>{_LIST}),?\s+and\s+(?:I|[Mm]e)\b"  # "Tom and I", "Ann, Bob and I"
    rf"|\b(?:I|[Mm]e)\s+and\s+(?P<after>{_LIST})"  # "me and my friends"
    rf"|\bwith\s+(?P<with>[Mm]y\s+{_MOD}(?:{_KIN})s?\b(?:,?\s+{_NAME}\b)?)"  # "I went with my brother Tom"
    rf"|(?P<appos>{_NAME}),\s+[Mm]y\s+{_MOD}(?:{_KIN})s?,"  # "Moni, my wife,"
    rf"|(?P<mine>[Mm]y\s+{_MOD}(?:{_KIN})s?\b(?:,?\s+{_NAME}\b)?)"  # "my wife Moni", "my family"
)
_WE = re.compile(r"\b(?:[Ww]e|[Ww]e're|[Ww]e've|[Ww]e'll|[Ww]e'd|us)\b")
_OUR = re.compile(r"\b(?:[Oo]ur|ours)\b")
_PLURAL_BE = {"are": "is", "were": "was", "aren't": "isn't", "weren't": "wasn't"}


def _people(phrase: str, speaker_names: set[str]) -> list[str]:
    """Each companion of a phrase of mentions, as written after "the user and ": "Moni", "their family"."""
    found = []
    for m in _ONE_RE.finditer(phrase):
        if m["name"] is not None:
            words = m["name"].split()
            while words and words[0] in STARTERS:  # "So Tom and I"
                words = words[1:]
            if words and words[0].lower() not in speaker_names:
                found.append(" ".join(words))
        else:
            found.append(m["named"] or f"their {m['kin'].lower()}{m['s']}")
    return found


def _companions(text: str, speaker_names: set[str]) -> set[str]:
    found: set[str] = set()
    for m in _MENTIONS.finditer(text):
        phrase = next(g for g in m.groups() if g is not None)
        found.update(_people(phrase, speaker_names))
    return found


def we_company(sentence: str, turn: Sequence[str], speaker_names: Iterable[str] = ()) -> str:
    """Who "we" is beside the speaker in ``sentence`` (one of the sentences of ``turn``): the one companion
    named before its "we", else the one named in the turn's sentences without "we", else "others".

    ``speaker_names`` are the speaker's own names (lowercase words), never their companion.
    """
    first = _WE.search(sentence)
    if first is None:
        return OTHERS
    names = {n.lower() for n in speaker_names}
    here = _companions(sentence[: first.start()], names)
    if not here:
        aside = (s for s in turn if s != sentence and not _WE.search(s) and not _OUR.search(s))
        here = set().union(*(_companions(s, names) for s in aside))
    return next(iter(here)) if len(here) == 1 else OTHERS


def for_one(predicate: str) -> str:
    """The predicate of "<speaker> and <who>" said of the speaker alone: "live in Porto" -> "lives in Porto"."""
    verb, _, tail = predicate.partition(" ")
    return f"{_PLURAL_BE.get(verb) or third_person(verb)} {tail}".rstrip()
