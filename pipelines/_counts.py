"""Counts in the rules' sentences: number words read and written, a counted noun's singular and plural."""

from __future__ import annotations

__all__ = ["NOT_COUNTED", "ORDINALS", "number", "plural", "singular"]

_NUM_WORDS = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
]  # fmt: skip
_TENS = {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
ORDINALS = {"second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6}

# Plural -> the singular a count is kept under; kids and children, dogs and puppies are counted together.
_IRREGULAR = {"children": "kid", "child": "kid", "kids": "kid", "puppies": "dog", "puppy": "dog", "kittens": "cat"}
_IRREGULAR |= {"kitten": "cat", "people": "person", "wives": "wife", "fish": "fish", "sheep": "sheep"}
NOT_COUNTED = frozenset({"lot", "bit", "few", "couple", "ton", "chance", "point", "idea", "feeling", "time", "way"})


def number(raw: str) -> int | None:
    """A count written in digits or words ("35", "a", "twenty-two"), None when it is none."""
    raw = raw.lower()
    if raw.isdigit():
        return int(raw)
    if raw in {"a", "an"}:
        return 1
    if raw in _NUM_WORDS:
        return _NUM_WORDS.index(raw)
    head, _, tail = raw.replace(" ", "-").partition("-")
    if head in _TENS and (not tail or tail in _NUM_WORDS[1:10]):
        return _TENS[head] + (_NUM_WORDS.index(tail) if tail else 0)
    return None


def singular(noun: str) -> str:
    """The name a count of ``noun`` is kept under ("puppies" -> "dog")."""
    if noun in _IRREGULAR:
        return _IRREGULAR[noun]
    if noun.endswith("ies") and len(noun) > 4:
        return noun[:-3] + "y"
    if noun.endswith(("ses", "xes", "ches", "shes")):
        return noun[:-2]
    return noun[:-1] if noun.endswith("s") and not noun.endswith("ss") and len(noun) > 3 else noun


def plural(thing: str, n: int) -> str:
    """``n`` of ``thing`` in words ("a dog", "two kids")."""
    if n == 1:
        return f"a {thing}" if thing[0] not in "aeiou" else f"an {thing}"
    words = {"kid": "kids", "person": "people", "fish": "fish", "sheep": "sheep"}
    plural = words.get(thing) or (thing[:-1] + "ies" if thing.endswith("y") and thing[-2] not in "aeiou" else None)
    plural = plural or (thing + "es" if thing.endswith(("s", "x", "ch", "sh")) else thing + "s")
    return f"{_NUM_WORDS[n] if n <= 10 else n} {plural}"
