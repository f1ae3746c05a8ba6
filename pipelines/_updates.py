"""Updates the offline rules model recognises: which single-valued attribute a sentence states, and how.

The consolidator's rules read each third-person episode sentence ("The user moved from Berlin to Lisbon
last month.") and each existing fact of the same subject as a :class:`Claim`: an attribute, a value, and
a role. A new claim that contradicts an existing fact of the same subject and attribute supersedes it (an
``update`` operation) with a plain statement of what holds now. It names the old value only as ended
("The user no longer works at Acme Corp."), so that an edge the old fact supported closes with it:
"The user lives in Lisbon (moved there last month)." supersedes "The user lives in Berlin.".

A sentence is read from its grammatical subject: "The user", "The user and Moni" (from "we") or a
name ("Ana" once "Ana, the user's sister," is set aside). "The user's friend moved to Rome" states
nothing about the user's residence, and "The user used to live in Paris" states nothing current.

==========  ==========================================================  ====================================
attribute   recognised (third person, after the observer's rewrite)     role
==========  ==========================================================  ====================================
residence   lives / is living / is based / has lived in Y; lives in Y   state
residence   moved / relocated / moved back (from X) to Y; has moved     change
residence   no longer lives in X; left / moved away from / moved out    end
            of X (only if X is the current home, and not "left X for
            a weekend")
employer    works / is working at|for Y; is employed at|by Y;           state
            is a <role> at|for Y
employer    started (a new job / working) at|with Y; joined Y (not a    change
            club, team, gym ...); got a job at Y; was hired by|at Y;
            switched (jobs) to Y
employer    quit (the user's job); resigned; retired; got / was         end
            fired, laid off, let go, sacked; lost the user's job; is
            unemployed; no longer works at X; left / quit / stopped
            working at X (only if X is the current employer)
partner     is dating / seeing P; is in a relationship (with P); has    state
            a girlfriend / boyfriend / partner (named P); is single
partner     got / is engaged (to P); got / is married (to P); married   change
            P; broke up / split up / separated (with|from P); got /
            is divorced (from P)
age         is N (years old) (now); turned N; is aged N                 state
count-of-X  has (got) N X (now); got / adopted / bought / had a second  state / change
            (third ...) X; got another X (one more than the fact)
==========  ==========================================================  ====================================

Verbs are matched in any case ("I LEFT ACME CORP"); contractions arrive expanded by the observer
("I'm" -> "is", "I've" -> "has", "we" -> "the user and Moni", "... and their family", "... and others");
a leading "Big news:" is skipped; a sentence of several clauses about its subject ("..., and the user
has two dogs") gives one claim per clause, and a fact that said several things keeps the clauses that
did not change.

Not recognised (an LLM consolidator would be needed): a change stated without its subject ("Moved to
Lisbon!"); places and employers written in lower case ("moved to the countryside"); a home or job
given as a description ("the user's flat is in Lisbon", "the user teaches at the local school");
relative phrases ("moved back home", "moved in with Tom"); counts inside lists ("two cats and a parrot")
or with extra detail ("a dog named Rex"); births ("had a baby") as a count of kids; a relation word
on facts about the other person ("Jake, the user's boyfriend, ...") after a break-up (a fact is never
rewritten across subjects); a named third person who is neither known nor introduced by a relation
("Tom moved to Denver" from a stranger is kept as the speaker's hearsay); a change and the fact it
changes said in two sessions of one batch are kept as two versions (the first as history) only when
each says one thing (said in one session, the last word holds); lowercase names ("i moved to lisbon").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from tiermem.memory._records import Fact

from ._companions import WE_COMPANY, for_one
from ._counts import NOT_COUNTED, ORDINALS, number, plural, singular
from ._sentences import STARTERS, strip_apposition

__all__ = ["PATTERNS", "Claim", "claims_of", "restated", "supersession"]

Role = Literal["state", "change", "end", "leave"]

_PROPER = r"(?:the\s+)?(?P<v>[A-Z][\w&'-]*(?:\s+(?:&\s+|of\s+|de\s+)?[A-Z][\w&'-]*){0,3})"
_PERSON = r"(?P<p>[A-Z][a-z]+)"
_NUM = r"(?P<n>\d{1,3}|(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[- ][a-z]+)?|[a-z]+teen|[a-z]{3,6})"
_OWN = r"(?:the user's|his|her|their|[A-Z][a-z]+'s)"
_CLAUSE = r"(?=$|\s*[,;]|\s+(?:last|yesterday|today|this|in|on|and|after|because|for good)\b|\s+\w+\s+\w+\s+ago\b)"
_END = r"\s*(?:now|today|these days|at the moment|this (?:week|month|year)|in total)?\s*[.!]?$"
_CLUBS = re.compile(
    r"(?i)\b(?:club|team|group|society|choir|band|gym|league|class|course|community|church|association|circle)$"
)

# attribute -> (role, predicate after the subject). Each is matched right after the subject and its
# adverbs, so "The user's friend moved ..." and "The user used to live ..." never match.
PATTERNS: dict[str, tuple[tuple[Role, str], ...]] = {
    "residence": (
        ("state", rf"(?:lives|is living|is based|has lived)\s+in\s+{_PROPER}(?!\s+(?:before|until|when)\b)"),
        ("change", rf"(?:has\s+)?(?:moved|relocated)(?:\s+back)?(?:\s+from\s+(?P<old>[A-Z][\w-]*(?:\s+[A-Z][\w-]*)*))?"
                   rf"\s+to\s+{_PROPER}"),
        ("end", rf"no longer (?:lives|is living) in {_PROPER}"),
        ("leave", rf"(?:has\s+)?(?:left|moved away from|moved out of)\s+{_PROPER}{_CLAUSE}"),
    ),
    "employer": (
        ("state", rf"(?:works|is working|is employed|is now employed)\s+(?:at|for|by)\s+{_PROPER}"),
        ("state", rf"is an?\s+(?!(?:student|regular|guest|member|customer|visitor|fan)\b)(?:[a-z-]+\s+){{1,3}}"
                  rf"(?:at|for)\s+{_PROPER}"),
        ("change", rf"(?:has\s+)?(?:started|began)\s+(?:(?:a\s+)?(?:new\s+)?(?:job|work|working|position|role)\s+)?"
                   rf"(?:at|with|for)\s+{_PROPER}"),
        ("change", rf"(?:has\s+)?joined\s+{_PROPER}"),
        ("change", rf"(?:got|has got|accepted|took)\s+an?\s+(?:new\s+)?(?:job|position|role|offer)\s+"
                   rf"(?:at|with)\s+{_PROPER}"),
        ("change", rf"(?:was|got|has been)\s+hired\s+(?:by|at)\s+{_PROPER}"),
        ("change", rf"(?:has\s+)?switched\s+(?:jobs\s+)?to\s+{_PROPER}"),
        ("end", rf"no longer works\s+(?:at|for)\s+{_PROPER}"),
        ("end", rf"(?:has\s+)?(?:quit|resigned|retired)(?:(?:\s+from)?\s+{_OWN}\s+(?:job|position|role)"
                rf"|\s+from\s+{_PROPER})?{_CLAUSE}"),
        ("end", rf"(?:got|was|has been|have been)\s+(?:fired|laid off|let go|sacked|made redundant)"
                rf"(?:\s+(?:from|by|at)\s+{_PROPER})?"),
        ("end", rf"(?:lost|has lost)\s+{_OWN}\s+job"),
        ("end", r"is (?:unemployed|out of work|between jobs)"),
        ("leave", rf"(?:has\s+)?(?:left|quit|stopped working at)\s+{_PROPER}{_CLAUSE}"),
    ),
    "partner": (
        ("state", rf"is (?:dating|seeing) {_PERSON}"),
        ("state", rf"is in a relationship(?: with {_PERSON})?"),
        ("state", rf"has an? (?:new )?(?:girlfriend|boyfriend|partner)(?:,? (?:named|called) {_PERSON})?"),
        ("state", r"is (?P<s>single)\b"),
        ("change", rf"(?:got|is|has got|just got|is now) (?P<s>engaged|married)(?: to {_PERSON})?"),
        ("change", rf"(?P<s>married) {_PERSON}"),
        ("change", rf"(?:(?P<s>broke up|split up|separated)|has (?:broken|split) up)(?: (?:with|from) {_PERSON})?"),
        ("change", rf"(?:got|is|has got) (?P<s>divorced)(?: from {_PERSON})?"),
    ),
    "age": (
        ("state", rf"(?:is|is aged|just turned|turned|has turned)\s+{_NUM}(?:\s+years?\s+old)?{_END}"),
    ),
    "count": (
        ("state", rf"(?:has|has got|owns)\s+(?P<n>\d{{1,2}}|[a-z]+|an?)\s+(?P<x>[a-z]+){_END}"),
        ("change", rf"(?:got|adopted|bought|had|has got|has adopted)\s+an?\s+(?P<o>second|third|fourth|fifth|sixth)"
                   rf"\s+(?P<x>[a-z]+){_END}"),
        ("change", rf"(?:got|adopted|bought|has got|has adopted)\s+(?P<o>another)\s+(?P<x>[a-z]+){_END}"),
    ),
}  # fmt: skip
_COMPILED = {
    attribute: tuple((role, re.compile(pattern)) for role, pattern in patterns)
    for attribute, patterns in PATTERNS.items()
}
# The words of the patterns, lowercased when shouted ("I LEFT ACME CORP" -> "left ACME CORP"); not
# those that also start names ("NEW YORK").
_KEYWORDS = frozenset(
    w
    for ps in PATTERNS.values()
    for _, p in ps
    for w in re.findall(r"[a-z]{2,}", re.sub(r"\\[a-zA-Z]|\?P<\w+>", " ", p))
) - {"new", "the", "de", "an"}
_ADVERB = r"(?:now|just|recently|finally|also|currently|officially|actually|already|still|then|eventually)"
# "The user and Moni moved to Porto" (from "we", see _companions) is the user's move as well.
_HEAD = re.compile(
    rf"^(?P<who>[Tt]he user|[A-Z][a-z]+(?: [A-Z][a-z]+)?)(?P<company>{WE_COMPANY})?\s+(?:{_ADVERB},?\s+)*"
)
# Where a sentence starts a new clause about its subject: "..., and the user has two dogs".
_CLAUSES = re.compile(r"(?:\s*[,;]?\s+(?:and|but|while|so)\s+|\s*[,;]\s+)(?=the user\b(?!'s))", re.IGNORECASE)
_APPOSITION = re.compile(r"^(?P<who>[A-Z][a-z]+(?: [A-Z][a-z]+)?, (?:[Tt]he user's|[A-Z][a-z]+'s) [^,]+,) ")
_MONTH = "(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_WHEN = re.compile(  # the rules' observer has resolved "last week" into a date ("in the week of 23 February 2026")
    r"\b(?:last (?:week|weekend|month|year|summer|spring|fall|autumn|winter)|yesterday|today|this (?:week|month|year)"
    r"|(?:a|one|two|three|four|five|six|\d+|a few|several) (?:days?|weeks?|months?|years?) ago"
    rf"|(?:in|on) the (?:week|weekend) of \d{{1,2}} {_MONTH} \d{{4}}|on \d{{1,2}} {_MONTH} \d{{4}}"
    rf"|in (?:{_MONTH}(?: \d{{4}})?|\d{{4}}))\b"
)


@dataclass(frozen=True, kw_only=True)
class Claim:
    """What one sentence says about one attribute of its subject."""

    attribute: str
    """"residence", "employer", "partner", "age" or "count:<thing>" ("count:dog")."""
    role: Role
    """state / change: a value holds now; end: the attribute ended; leave: it ended if the value is current."""
    value: str | None
    """The value as written ("Lisbon", "Acme Corp", "35", "2", "engaged"), None when the sentence gives none."""
    who: str
    """How the sentence names its subject ("The user", "Ana, the user's sister,")."""
    predicate: str
    """The sentence after its subject, without the final stop ("moved from Berlin to Lisbon last month")."""
    partner: str | None = None
    """For "partner": the other person's name, when given."""
    relative: bool = False
    """For counts: "another" (one more than the current count)."""


def _value(attribute: str, m: re.Match[str]) -> tuple[str, str | None, bool] | None:
    """(attribute key, value, relative) from one pattern match, or None when the match is not a claim."""
    found = m.groupdict()
    if attribute in {"residence", "employer"}:
        value = found.get("v")
        if attribute == "employer" and value and _CLUBS.search(value) and "joined" in m.group(0):
            return None  # "joined the Chess Club" is a hobby, not a job
        return attribute, value, False
    if attribute == "partner":
        status = found.get("s") or ("dating" if "single" not in m.group(0) else "single")
        status = {"broke up": "single", "split up": "single", "separated": "single"}.get(status, status)
        return attribute, status, False
    if attribute == "age":
        n = number(found["n"])
        return None if n is None or not 0 < n < 130 else (attribute, str(n), False)
    thing = singular(found["x"])
    if thing in NOT_COUNTED:
        return None
    if found.get("o") == "another":
        return f"count:{thing}", None, True
    n = ORDINALS[found["o"]] if found.get("o") else number(found["n"])
    return None if n is None or n > 50 else (f"count:{thing}", str(n), False)


def claims_of(text: str) -> list[Claim]:
    """The attribute claims of a third-person sentence: at most one per attribute, in table order.

    "The user left Acme Corp" is a claim on both the residence and the employer (whichever it names).
    """
    return list(_claims(text))


# Memoised (claims are frozen): supersession reads the claims of every clause of each of the user's facts
# for every new claim, so the same fact texts are parsed over and over in a batch.
@lru_cache(maxsize=1 << 14)
def _claims(text: str) -> tuple[Claim, ...]:
    text = re.sub(r"^[^:]{1,30}:\s+", "", text)  # "Big news: we moved ..."
    found: list[Claim] = []
    for i, clause in enumerate(_CLAUSES.split(text)):  # "The user is 35 and the user has two dogs."
        clause = clause if i == 0 else clause[:1].upper() + clause[1:]
        found += [c for c in _clause_claims(clause) if all(c.attribute != f.attribute for f in found)]
    return tuple(found)


def _clause_claims(text: str) -> list[Claim]:
    who = _APPOSITION.match(text)
    bare = strip_apposition(text)
    head = _HEAD.match(bare)
    if head is None or (head["who"] != "The user" and head["who"].split()[0] in STARTERS):
        return []
    rest = re.sub(r"[A-Z]{2,}", lambda w: w[0].lower() if w[0].lower() in _KEYWORDS else w[0], bare[head.end() :])
    rest = rest.rstrip(" .!?")
    rest = for_one(rest) if head["company"] else rest  # "the user and Moni live in Porto": the user lives there
    found: list[Claim] = []
    for attribute, patterns in _COMPILED.items():
        for role, pattern in patterns:
            m = pattern.match(rest)
            got = None if m is None else _value(attribute, m)
            if m is None or got is None:
                continue
            key, value, relative = got
            subject = who["who"] if who else head["who"][:1].upper() + head["who"][1:]
            found.append(Claim(
                attribute=key, role=role, value=value, who=subject, predicate=rest,
                partner=m.groupdict().get("p"), relative=relative,
            ))  # fmt: skip
            break
    return found


def _same_value(a: str | None, b: str | None) -> bool:
    """Whether two values are one: "Acme" and "Acme Corp" are; case and a leading "the" do not matter."""
    if a is None or b is None:
        return a is b
    wa, wb = a.lower().removeprefix("the ").split(), b.lower().removeprefix("the ").split()
    return wa[: len(wb)] == wb or wb[: len(wa)] == wa


def _contradicts(new: Claim, old: Claim) -> bool:
    """Whether ``new`` makes ``old`` (same attribute) no longer true."""
    if old.role == "leave":
        return False  # "left Berlin" stays true whatever comes next
    if old.role == "end":
        return new.role in {"state", "change"}  # a new home or job ends "no longer ..." as well
    if new.role == "end":
        return new.value is None or _same_value(new.value, old.value)
    if new.role == "leave":
        return _same_value(new.value, old.value)
    if new.relative:
        return old.value is not None
    if new.attribute == "partner":
        other = new.partner is not None and old.partner is not None and new.partner != old.partner
        return new.value != old.value or other
    return not _same_value(new.value, old.value)


def _current(new: Claim, old: Claim) -> str:
    """The sentence stating what holds now, without naming a value that ended."""
    who = new.who
    when = _WHEN.search(new.predicate)
    since = f" {when.group(0)}" if when else ""
    attribute = new.attribute
    named = old.value is not None and old.value.lower() in new.predicate.lower()
    if attribute in {"residence", "employer"} and new.role == "state" and not named:
        return f"{who} {new.predicate}."  # "The user is a designer at Globex now." says it best
    if attribute in {"residence", "employer"}:
        verb, began = ("lives in", "moved") if attribute == "residence" else ("works at", "started")
        if new.role in {"state", "change"}:
            return f"{who} {verb} {new.value}" + (f" ({began} there{since})" if since else "") + "."
        past = old.value or "the same place"
        told = "" if named else f" ({new.predicate})"
        return f"{who} no longer {verb} {past}{told or since}."
    if attribute == "partner":
        partner = new.partner or old.partner
        base = "The user" if who.startswith("The user") else who
        status = new.value or "dating"
        when_ = f" ({since.strip()})" if since else ""
        if status == "single":
            return f"{base} is no longer with {partner}{when_}." if partner else f"{base} is single{when_}."
        if status == "divorced":
            return (
                f"{base} is divorced from {partner} (no longer married){when_}." if partner else f"{base} is divorced."
            )
        if status == "dating":
            return f"{base} is dating {partner}." if partner else f"{base} is in a relationship."
        got = f" (got {status}{since})" if since else ""
        return f"{base} is {status} to {partner}{got}." if partner else f"{base} is {status}{got}."
    if attribute == "age":
        return f"{who} is {new.value} years old."
    thing = attribute.split(":", 1)[1]
    n = int(old.value or "0") + 1 if new.relative else int(new.value or "0")
    return f"{who} has {plural(thing, n)}."


def restated(text: str, old_text: str) -> str | None:
    """What holds now, when ``text`` makes ``old_text`` (a sentence about the same subject) untrue; else None."""
    olds = claims_of(old_text)
    for new in claims_of(text):
        old = next((c for c in olds if c.attribute == new.attribute and _contradicts(new, c)), None)
        if old is not None:
            return _current(new, old)
    return None


def _clauses(text: str) -> list[str]:
    text = re.sub(r"^[^:]{1,30}:\s+", "", text)
    return [c.strip(" .!?") for c in _CLAUSES.split(text) if c.strip(" .!?")]


def _sentence(clauses: Sequence[str]) -> str:
    parts = [c.strip(" .") for c in clauses]
    return "; ".join(c[:1].upper() + c[1:] if i == 0 else c[:1].lower() + c[1:] for i, c in enumerate(parts)) + "."


def supersession(text: str, facts: Sequence[Fact]) -> tuple[list[tuple[Fact, str]], bool]:
    """The facts ``text`` supersedes among ``facts`` (one subject's), each with what now holds.

    Each claim of ``text`` supersedes at most one fact: the most recently changed one it makes untrue.
    The new text of a fact that said several things keeps what did not change ("The user lives in
    Lisbon; the user works at Acme Corp."). The flag tells whether some claim of ``text`` superseded
    nothing (then ``text`` says something new as well).
    """
    changed: dict[str, tuple[Fact, list[str]]] = {}
    unmatched = False
    for new in claims_of(text):
        found = []
        for fact in facts:
            clauses = changed[fact.id][1] if fact.id in changed else _clauses(fact.text)
            for i, clause in enumerate(clauses):
                old = next(
                    (c for c in claims_of(clause[:1].upper() + clause[1:]) if c.attribute == new.attribute), None
                )
                if old is not None and _contradicts(new, old):
                    found.append((fact, clauses, i, old))
        if not found:
            unmatched = True
            continue
        fact, clauses, i, old = max(found, key=lambda p: (p[0].updated_at, p[0].id))
        clauses = [*clauses[:i], _current(new, old), *clauses[i + 1 :]]
        changed[fact.id] = (fact, clauses)
    return [(fact, _sentence(clauses)) for fact, clauses in changed.values()], unmatched
