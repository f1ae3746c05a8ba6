"""Coordinated clauses: a sentence that says several things about one subject, as one sentence per thing.

"I live in Porto and work at Farfetch as a designer." says where the user lives and where the user
works; kept as one observation, one fact, a later move would replace both. Split, each is a fact of
its own: "I live in Porto." and "I work at Farfetch as a designer.".

A sentence is split at "and" / "but" when what follows is a predicate of the same subject: a verb
(a common one, an auxiliary, or a past form after a past one) followed by what a predicate starts with
(a preposition, an article or possessive, a number, a pronoun, a name, an -ing form). Each part keeps
the subject. Lists of things stay whole: "I like salt and pepper", "I have a dog and a cat",
"I work and study in Berlin" (the place is shared: no part of its own before "and").
"""

from __future__ import annotations

import re
from functools import lru_cache

from ._companions import WE_COMPANY
from ._sentences import ADVERBS, STARTERS, words

__all__ = ["coordinated"]

# Common verbs of what people say about themselves, in the base form.
_VERBS = words(
    """live work study teach play have own love like enjoy hate prefer speak run cook bake write read drive ride
    volunteer coach train practise practice collect grow keep raise visit go walk swim sing paint draw dance lead
    manage need want plan hope use watch attend belong know care help make build design learn eat drink wear
    take give get spend sell buy rent share support follow listen travel fly stay sleep wake commute earn save
    meet date marry adopt foster mentor"""
)
_IRREGULAR_PAST = words(
    """went left bought met made took got began became found gave kept lost sold spent grew taught wrote drove
    rode flew ran won quit"""
)
_AUXILIARIES = words("""am was have had do don't did didn't can can't cannot could will won't would should must""")
# Third person -> base: "has" -> "have", "is" -> "am" (the auxiliary above).
_THIRD = {"has": "have", "is": "am", "does": "do", "doesn't": "don't", "isn't": "am", "hasn't": "have"}
_PREDICATE_START = words(
    """at in to for with from on as by about into near a an the my our his her their its some two three four
    five six seven eight nine ten it them him her me us every each no"""
)
_SUBJECT = re.compile(
    rf"^(?P<subject>(?P<first>I|We)(?:'m|'ve|'re| am| have| are)?|[Tt]he user(?:{WE_COMPANY})?"
    r"|[A-Z][a-z]+(?= [a-z]))\s+"
)
_JOINT = re.compile(r",?\s+(?:and|but)\s+|,\s+")


def _base(word: str, first_person: bool) -> str:
    """The base form of a verb as the subject conjugates it ("works" -> "work" for "The user")."""
    if first_person:
        return word
    if word in _THIRD:
        return _THIRD[word]
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("es") and word[:-2] in _VERBS:
        return word[:-2]
    return word[:-1] if word.endswith("s") else word


def _past(word: str) -> bool:
    return word in _IRREGULAR_PAST or (word.endswith("ed") and not word.endswith("eed"))


def _predicate(words: list[str], first_person: bool, left: str) -> bool:
    """Whether ``words`` (what follows "and") start a predicate: a verb, then what a predicate starts with
    (any word when the clause before "and" starts with a verb as well: "cook pasta and bake bread")."""
    while words and words[0].lower() in ADVERBS:
        words = words[1:]
    if len(words) < 2:
        return False
    verb, after = words[0], words[1]
    base = _base(verb, first_person)
    if base in _AUXILIARIES:
        return True
    parallel = _base(left, first_person) in _VERBS
    is_verb = base in _VERBS or (_past(left) and _past(verb))
    complement = after.lower().strip(",") in _PREDICATE_START or after[:1].isupper() or after.endswith("ing")
    return is_verb and (complement or parallel)


def _verb(words: list[str]) -> str:
    """The first word that is not an adverb ("just moved ..." -> "moved")."""
    return next((w.lower() for w in words if w.lower() not in ADVERBS), "")


@lru_cache(maxsize=1 << 12)
def coordinated(sentence: str) -> tuple[str, ...]:
    """``sentence`` as one sentence per coordinated predicate of its subject (itself when it has one)."""
    head = _SUBJECT.match(sentence)
    if head is None or (head["first"] is None and head["subject"] in STARTERS):
        return (sentence,)
    subject = head["subject"]
    body = sentence[head.end() :].rstrip(" .!")
    least = 1 if subject != head["first"] and head["first"] else 2  # "I'm 34": the verb is in the subject
    parts: list[str] = []
    start = 0
    for joint in _JOINT.finditer(body):
        left = body[start : joint.start()].split()
        if len(left) >= least and _predicate(body[joint.end() :].split(), head["first"] is not None, _verb(left)):
            parts.append(" ".join(left))
            start = joint.end()
    if not parts:
        return (sentence,)
    parts.append(body[start:])
    end = "!" if sentence.endswith("!") else "."
    # A contraction's verb belongs to the first part: "I'm 34 and have two dogs" -> "I have two dogs".
    rest = head["first"] or subject
    return tuple(f"{subject if i == 0 else rest} {p}{end}" for i, p in enumerate(parts))
