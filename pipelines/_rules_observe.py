"""The rules model's observer stages: one turn, or a window of turns, -> observations with subjects.

Part of the offline rules model (:mod:`tiermem.pipelines._rules`): pure Python, deterministic, no network.
The window stage applies the one-turn rules to each turn of the window, so an import observes the same
entries whatever its window.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tiermem.memory._subjects import USER
from tiermem.prompts import observe as observe_prompt
from tiermem.prompts import observe_window as window_prompt

from ._clauses import coordinated
from ._companions import we_company
from ._relative_time import resolve_relative_time
from ._rules_policy import screened
from ._sentences import (
    HEALTH,
    MY_REL_START,
    NAMED_REL_START,
    REVEALS,
    SECOND_PERSON,
    STARTERS,
    WORK,
    content_words,
    ensure_period,
    has_first_person,
    kind_of,
    leading_name,
    rewrite_first_person,
    salience_of,
    split_sentences,
    strip_greeting,
    subject_of,
    user_aliases,
)
from ._updates import claims_of

__all__ = ["lead_subject", "observe", "observe_window"]

_MAX_OBSERVATIONS = 20


def lead_subject(name: str, aliases: Mapping[str, str], known: set[str]) -> str | None:
    """A known subject, or an organisation-like run of capitalised words ("Acme Corp").

    A single unknown capitalised word is not enough: every sentence starts with one ("Painting ...").
    """
    full, first = subject_of(name, aliases), subject_of(name.split()[0], aliases)
    for candidate in (full, first):
        if candidate is not None and (candidate == USER or candidate in known):
            return candidate
    return full if len(name.split()) > 1 else None


def _whose(holder: str | None, speaker: str, owner: str, aliases: Mapping[str, str]) -> tuple[str, str] | None:
    """(subject, how the text calls them) of the person a relative belongs to: "my" or "Moni's"."""
    if holder is None:
        return speaker, owner
    subject = None if holder in STARTERS else subject_of(holder, aliases)
    if subject is None:
        return None
    return subject, owner if subject == speaker else "the user" if subject == USER else holder


def _relative(sentence: str, speaker: str, owner: str, aliases: Mapping[str, str], we: str) -> tuple[str, str] | None:
    """A sentence about a named relative, about that person: "My brother Tom ...", "Moni's brother Tom ..."."""
    m = MY_REL_START.match(sentence) or NAMED_REL_START.match(sentence)
    if m is None or m["name"].split()[0] in STARTERS or re.match(r"(?i)and (?:I|me)\b", m["rest"]):
        return None
    person = subject_of(m["name"].split()[0], aliases)
    whose = _whose(m.groupdict().get("holder"), speaker, owner, aliases)
    if person is None or whose is None or person in {speaker, whose[0]}:
        return None
    rel = f"{m['mod'] or ''}{m['rel']}".lower()
    rest = rewrite_first_person(m["rest"], owner, we)
    if m["poss"]:
        return person, f"{whose[1]}'s {rel} {m['name']}'s {rest}"
    if rest.strip(" .!?"):
        return person, f"{m['name']}, {whose[1]}'s {rel}, {rest}"
    return person, f"{m['name']} is {whose[1]}'s {rel}."


def _attribute(
    sentence: str, speaker: str, owner: str, aliases: Mapping[str, str], known: set[str], we: str
) -> tuple[str, str]:
    """(subject, third-person text) of one sentence said by ``speaker`` (called ``owner`` in text), whose
    "we" is ``owner`` and ``we``."""
    relative = _relative(sentence, speaker, owner, aliases, we)
    if relative is not None:
        return relative
    lead = leading_name(sentence)
    if lead is not None and (lead[1] or not has_first_person(sentence)):
        subject = lead_subject(lead[0], aliases, known)
        subject = subject_of(lead[0].split()[0], aliases) if subject is None and lead[1] else subject
        if subject is not None:
            return subject, rewrite_first_person(sentence, owner, we)
    if has_first_person(sentence):
        return speaker, rewrite_first_person(sentence, owner, we)
    return speaker, f"{owner} said: {sentence}"


def _speaker(name: str | None, aliases: Mapping[str, str]) -> tuple[str, str] | None:
    """(subject, how the text calls them) for the author of a user message."""
    if name is None or not name.strip():
        return USER, "the user"
    first = name.split()[0]
    if " ".join(name.lower().split()) in aliases or first.lower() in aliases:
        return USER, "the user"
    subject = subject_of(first, aliases)
    return None if subject is None else (subject, first[:1].upper() + first[1:])


def _observe_sentence(
    raw: str, speaker: tuple[str, str], aliases: Mapping[str, str], known: set[str], names: set[str], we: str
) -> observe_prompt.Observation | None:
    sentence = strip_greeting(raw)
    words = [w for w in content_words(sentence) if w not in names]  # "Agreed, Caroline!" is small talk
    short = len(words) < 2 and not (HEALTH.search(sentence) or WORK.search(sentence))
    if not words or (short and not claims_of(rewrite_first_person(sentence))):  # "I'm 34 now." is an update
        return None
    subject, owner = speaker
    question = sentence.endswith("?")
    if question and not REVEALS.search(sentence):
        return None
    if SECOND_PERSON.search(sentence) and not has_first_person(sentence):
        return None  # about the listener ("You're so inspiring!"), not the speaker
    if question:
        text = f"{owner} asked: {rewrite_first_person(sentence, owner, we)}"
    else:
        subject, text = _attribute(sentence, subject, owner, aliases, known, we)
    kind = kind_of(sentence)
    salience = salience_of(sentence, kind, words)
    text = ensure_period(text)
    if len(text) > 1000:
        text = text[:999].rsplit(" ", 1)[0] + "…"
    return observe_prompt.Observation(
        subject=subject, kind=kind, text=text, salience=min(salience, 0.5) if question else salience
    )


def observe(inputs: observe_prompt.Input) -> observe_prompt.Output:
    """Observations from the user-role messages of one turn, attributed to their subjects; a sentence saying
    several things about its subject gives one observation per thing."""
    aliases = user_aliases(inputs.user_names)
    known = set(inputs.known_subjects)
    names = {n.lower() for m in inputs.messages if m.name for n in m.name.split()} | {n.split()[0] for n in aliases}
    found: list[observe_prompt.Observation] = []
    said_by = [
        # relative time words dated as said ("last week" -> "in the week of 2 March 2026")
        (speaker, split_sentences(resolve_relative_time(m.content, inputs.now)))
        for m in inputs.messages
        if (speaker := _speaker(m.name, aliases) if m.role == "user" else None) is not None
    ]
    turn: dict[tuple[str, str], list[str]] = {}  # each speaker's sentences: "we" may be named in another one
    for speaker, said in said_by:
        turn.setdefault(speaker, []).extend(said)
    for speaker, said in said_by:
        own = set(aliases) if speaker[0] == USER else {speaker[1].lower()}
        for raw in said:
            we = we_company(raw, turn[speaker], own)
            # One observation per thing said: "I live in Porto and work at Farfetch" is two (see _clauses).
            for part in coordinated(strip_greeting(raw)):
                obs = _observe_sentence(part, speaker, aliases, known, names, we)
                # The policy's labels it can recognise: what it excludes is not written down at all.
                labels = None if obs is None else screened(inputs.policy, obs.subject, part, obs.kind)
                if obs is not None and labels is not None and all(o.text != obs.text for o in found):
                    found.append(obs.model_copy(update={"categories": list(labels)}))
    if len(found) > _MAX_OBSERVATIONS:
        keep = sorted(sorted(range(len(found)), key=lambda i: (-found[i].salience, i))[:_MAX_OBSERVATIONS])
        found = [found[i] for i in keep]
    return observe_prompt.Output(observations=found)


def observe_window(inputs: window_prompt.Input) -> window_prompt.Output:
    """Each turn of the window observed as :func:`observe` observes it alone, numbered by its turn."""
    found = []
    for number, turn in enumerate(inputs.turns, start=1):
        alone = observe_prompt.Input(
            messages=turn.messages, user_names=inputs.user_names, known_subjects=inputs.known_subjects, now=turn.now,
            policy=inputs.policy,
        )  # fmt: skip
        found += [window_prompt.Observation(**obs.model_dump(), turn=number) for obs in observe(alone).observations]
    return window_prompt.Output(observations=found)
