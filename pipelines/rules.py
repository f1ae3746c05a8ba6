"""The deterministic offline rules model: the four pipeline stages without an LLM.

Used when no model is configured (demo, tests, CI, benchmarks). Pure Python and ``re``: the same
input always gives the same output, with no network. Each function takes a prompt module's
``Input`` and returns that module's ``Output``, like a model answering the prompt would.

Edge convention: an edge reads as "<source> <relation> <target>".

- Couples go from the owner of the relation to the other person: "my wife Moni" ->
  ``(user, "married to", moni)``; partner/girlfriend/boyfriend -> "partner of"; fiancé(e) -> "engaged to".
- Other roles go from the person holding the role to its owner: "my brother Tom" ->
  ``(tom, "brother of", user)``; likewise "friend of", "boss of", "colleague of", "mother of" ...
- Places and organisations go from the sentence's subject: "works at", "lives in", "studies at",
  "member of" (``(user, "works at", acme-corp)``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from statistics import fmean
from typing import Any

from pydantic import BaseModel

from memory import USER, Edge, Fact, InvalidSubjectError, canonical_subject, is_canonical_subject
from prompts import consolidate as consolidate_prompt
from prompts import digest as digest_prompt
from prompts import encode_episode as encode_prompt
from prompts import observe as observe_prompt

from .sentences import (
    STARTERS,
    content_words,
    ensure_period,
    has_first_person,
    jaccard,
    leading_name,
    normalise,
    rewrite_first_person,
    split_sentences,
    strip_greeting,
)

__all__ = ["RULES", "consolidate", "digest", "encode_episode", "observe"]

_REL_SPEC = """wife husband spouse=married to; partner girlfriend boyfriend=partner of;
fiance fiancee fiancé fiancée=engaged to; brother=brother of; sister=sister of; mother mom mum=mother of;
father dad=father of; son=son of; daughter=daughter of; friend bestie=friend of; cousin=cousin of;
colleague coworker co-worker=colleague of; boss manager=boss of; aunt=aunt of; uncle=uncle of;
grandmother grandma=grandmother of; grandfather grandpa=grandfather of; niece=niece of; nephew=nephew of;
neighbor neighbour=neighbour of; roommate flatmate=roommate of; mentor=mentor of"""
RELATIONS: dict[str, str] = {
    word: rel.strip() for part in _REL_SPEC.split(";") for words, rel in [part.split("=")] for word in words.split()
}
_COUPLES = frozenset({"married to", "partner of", "engaged to"})
_REL = "|".join(sorted(map(re.escape, RELATIONS), key=len, reverse=True))
_MOD = r"(?:(?:best|old|older|younger|little|big|new|close|good|dear|eldest|oldest|youngest|twin|step)\s+)?"
_NAME = r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?"
_OWNER = r"(?P<owner>\b[Tt]he user's|\b[A-Z][a-z]+'s|\b[Mm]y|\b[Oo]ur)"
_MY_REL_START = re.compile(
    rf"^(?i:(?:(?:and|so|also|oh|well|btw|plus)\b,?\s+)*(?:my|our)\s+(?P<mod>{_MOD})(?P<rel>{_REL})),?\s+"
    rf"(?P<name>{_NAME})(?P<poss>'s)?\b,?\s*(?P<rest>.*)$"
)
_APPOS = re.compile(rf"\b(?P<name>{_NAME}),\s+{_OWNER}\s+(?i:(?P<mod>{_MOD})(?P<rel>{_REL}))\b")
_OWNER_REL = re.compile(rf"{_OWNER}\s+(?i:(?P<mod>{_MOD})(?P<rel>{_REL})),?\s+(?P<name>{_NAME})")
_PROPER = r"(?:the\s+)?(?P<org>[A-Z][\w&-]*(?:\s+(?:&\s+)?[A-Z][\w&-]*){0,3})"
_PLACES = [
    (re.compile(rf"\b(?:works?|worked|working)\s+(?:at|for)\s+{_PROPER}"), "works at"),
    (re.compile(rf"\b(?:lives?|lived|living|moved|relocated)\s+(?:in|to)\s+{_PROPER}"), "lives in"),
    (re.compile(rf"\b(?:stud(?:y|ies|ied|ying))\s+at\s+{_PROPER}"), "studies at"),
    (re.compile(rf"\bmembers?\s+of\s+{_PROPER}"), "member of"),
]
_REVEALS = re.compile(r"\b(?:my|our|I'm|I am|I've|I have|I was|we're|we have)\b", re.IGNORECASE)
_PREFERENCE = re.compile(
    r"\b(?:lov(?:e|es|ed|ing)|likes?|liked|enjoy(?:s|ed)?|hate[sd]?|prefer(?:s|red)?|favou?rites?|fan of|"
    r"can't stand|dislike[sd]?|passionate about)\b",
    re.IGNORECASE,
)
_PLAN = re.compile(
    r"\b(?:will|going to|gonna|plan(?:s|ning|ned)?|next (?:week|weekend|month|year|summer|spring|fall|autumn|"
    r"winter|time)|tomorrow|tonight|soon|upcoming|intend(?:s)?|hop(?:e|ing) to|about to|thinking of)\b|\w'll\b",
    re.IGNORECASE,
)
_EVENT = re.compile(
    r"\b(?:went|did|yesterday|last (?:week|weekend|month|year|night|summer|spring|fall|winter|time)|ago|"
    r"visited|attended|met|took|bought|finished|started|moved|saw|celebrated|graduated|joined|won|ran)\b"
    r"|\bI\s+(?:\w+ly\s+)?\w+ed\b",
    re.IGNORECASE,
)
_RELATIONSHIP = re.compile(rf"\b(?i:my|our)\s+(?i:{_MOD}(?:{_REL}))s?\b|\b(?i:{_REL}),?\s+[A-Z][a-z]+")
_HEALTH = re.compile(
    r"\b(?:allerg\w*|diabet\w*|asthma|cancer|sick|illness|doctor|hospital\w*|diagnos\w*|medic\w*|surger\w*|"
    r"injur\w*|pregnan\w*|vegan|vegetarian|gluten|lactose|therap\w*|depress\w*|anxiety|disease|health\w*)\b",
    re.IGNORECASE,
)
_WORK = re.compile(
    r"\b(?:work\w*|job|career|compan\w*|office|employ\w*|hired|promot\w*|salary|colleague|boss|engineer|"
    r"teacher|nurse|startup|business|profession\w*|intern\w*|retire\w*|student|universit\w*|college|degree)\b",
    re.IGNORECASE,
)
_SINGLE_VALUED = frozenset(
    ["works", "work", "lives", "live", "moved", "favourite", "favorite", "name", "age", "old", "job", "married", "studies", "born", "birthday", "employed"]
)
_MAX_OBSERVATIONS = 20


def _canon(raw: str, aliases: Mapping[str, str]) -> str | None:
    try:
        return canonical_subject(raw, aliases=aliases)
    except InvalidSubjectError:
        return None


def _aliases(user_names: Iterable[str]) -> dict[str, str]:
    names = {" ".join(n.lower().split()) for n in user_names if n.strip()}
    return {key: USER for n in names for key in (n, n.split()[0])}


def _display(subject: str) -> str:
    return " ".join(part.capitalize() for part in subject.split("-"))


def _lead_subject(name: str, aliases: Mapping[str, str], known: set[str]) -> str | None:
    full, first = _canon(name, aliases), _canon(name.split()[0], aliases)
    for candidate in (full, first):
        if candidate is not None and (candidate == USER or candidate in known):
            return candidate
    return first if len(name.split()) == 1 else full


def _attribute(sentence: str, speaker: str, owner: str, aliases: Mapping[str, str], known: set[str]) -> tuple[str, str]:
    """(subject, third-person text) of one sentence said by ``speaker`` (called ``owner`` in text)."""
    m = _MY_REL_START.match(sentence)
    if m and m["name"].split()[0] not in STARTERS and not re.match(r"(?i)and (?:I|me)\b", m["rest"]):
        person = _canon(m["name"].split()[0], aliases)
        if person is not None and person != speaker:
            rel = f"{m['mod'] or ''}{m['rel']}".lower()
            rest = rewrite_first_person(m["rest"], owner)
            if m["poss"]:
                return person, f"{owner}'s {rel} {m['name']}'s {rest}"
            if rest.strip(" .!?"):
                return person, f"{m['name']}, {owner}'s {rel}, {rest}"
            return person, f"{m['name']} is {owner}'s {rel}."
    lead = leading_name(sentence)
    if lead is not None and (lead[1] or not has_first_person(sentence)):
        subject = _lead_subject(lead[0], aliases, known)
        if subject is not None:
            return subject, rewrite_first_person(sentence, owner)
    if has_first_person(sentence):
        return speaker, rewrite_first_person(sentence, owner)
    return speaker, f"{owner} said: {sentence}"


def _kind(sentence: str) -> observe_prompt.Kind:
    for pattern, kind in ((_PREFERENCE, "preference"), (_PLAN, "plan"), (_EVENT, "event")):
        if pattern.search(sentence):
            return kind  # type: ignore[return-value]
    return "relationship" if _RELATIONSHIP.search(sentence) else "fact"


def _salience(sentence: str, kind: str, words: Sequence[str]) -> float:
    if _HEALTH.search(sentence):
        return 0.9
    if kind == "relationship" or _RELATIONSHIP.search(sentence):
        return 0.85
    if _WORK.search(sentence) or kind == "preference":
        return 0.8
    if len(words) < 3:
        return 0.3
    return 0.6 if kind in {"plan", "event"} else 0.5


def _speaker(name: str | None, aliases: Mapping[str, str]) -> tuple[str, str] | None:
    """(subject, how the text calls them) for the author of a user message."""
    if name is None or not name.strip():
        return USER, "the user"
    first = name.split()[0]
    if " ".join(name.lower().split()) in aliases or first.lower() in aliases:
        return USER, "the user"
    subject = _canon(first, aliases)
    return None if subject is None else (subject, first[:1].upper() + first[1:])


def _observe_sentence(
    raw: str, speaker: tuple[str, str], aliases: Mapping[str, str], known: set[str]
) -> observe_prompt.Observation | None:
    sentence = strip_greeting(raw)
    words = content_words(sentence)
    if not words or (len(words) < 2 and not (_HEALTH.search(sentence) or _WORK.search(sentence))):
        return None
    subject, owner = speaker
    question = sentence.endswith("?")
    if question and not _REVEALS.search(sentence):
        return None
    if question:
        text = f"{owner} asked: {rewrite_first_person(sentence, owner)}"
    else:
        subject, text = _attribute(sentence, subject, owner, aliases, known)
    kind = _kind(sentence)
    salience = _salience(sentence, kind, words)
    text = ensure_period(text)
    if len(text) > 1000:
        text = text[:999].rsplit(" ", 1)[0] + "…"
    return observe_prompt.Observation(
        subject=subject, kind=kind, text=text, salience=min(salience, 0.5) if question else salience
    )


def observe(inputs: observe_prompt.Input) -> observe_prompt.Output:
    """Observations from the user-role messages of one turn, attributed to their subjects."""
    aliases = _aliases(inputs.user_names)
    known = set(inputs.known_subjects)
    found: list[observe_prompt.Observation] = []
    for message in inputs.messages:
        speaker = _speaker(message.name, aliases) if message.role == "user" else None
        if speaker is None:
            continue
        for raw in split_sentences(message.content):
            obs = _observe_sentence(raw, speaker, aliases, known)
            if obs is not None and all(o.text != obs.text for o in found):
                found.append(obs)
    if len(found) > _MAX_OBSERVATIONS:
        keep = sorted(sorted(range(len(found)), key=lambda i: (-found[i].salience, i))[:_MAX_OBSERVATIONS])
        found = [found[i] for i in keep]
    return observe_prompt.Output(observations=found)


def _extract(items: Sequence[tuple[str, float]], limit: int = 6, budget: int = 1200) -> list[str]:
    """The most salient distinct texts (at most ``limit``, about ``budget`` chars), in their original order."""
    seen: set[str] = set()
    pool: list[tuple[int, str, float]] = []
    for i, (text, salience) in enumerate(items):
        key = " ".join(normalise(text))
        if key and key not in seen:
            seen.add(key)
            pool.append((i, ensure_period(text), salience))
    picked: list[tuple[int, str]] = []
    total = 0
    for i, text, _ in sorted(pool, key=lambda p: (-p[2], p[0])):
        if len(picked) < limit and (not picked or total + len(text) < budget):
            picked.append((i, text))
            total += len(text) + 1
    return [text for _, text in sorted(picked)]


def _subjects(subjects: Iterable[str]) -> list[str]:
    unique = sorted({s for s in subjects if is_canonical_subject(s)})
    return ([USER] if USER in unique else []) + [s for s in unique if s != USER] or [USER]


def encode_episode(inputs: encode_prompt.Input) -> encode_prompt.Output:
    """An extractive episode: the session's most salient observations, in order."""
    entries = sorted(enumerate(inputs.entries), key=lambda p: (p[1].seq, p[1].created_at, p[0]))
    if entries:
        chosen = _extract([(e.text, e.salience) for _, e in entries])
        top = sorted((e.salience for _, e in entries), reverse=True)[:3]
        return encode_prompt.Output(
            summary=" ".join(chosen), subjects=_subjects(e.subject for _, e in entries), salience=round(fmean(top), 4)
        )
    turns = sorted(inputs.turns, key=lambda t: (t.seq, t.created_at))
    observed = [
        o
        for t in turns
        for o in observe(
            observe_prompt.Input(messages=list(t.messages), user_names=inputs.user_names, now=t.created_at)
        ).observations
    ]
    chosen = _extract([(o.text, o.salience) for o in observed])
    if not chosen:
        firsts = [s for t in turns for m in t.messages if m.role == "user" for s in split_sentences(m.content)[:1]]
        chosen = firsts[:3]
    summary = " ".join(chosen)[:4000] or "The user had a brief conversation."
    return encode_prompt.Output(summary=summary, subjects=_subjects(o.subject for o in observed), salience=0.5)


def _fact_subject(sentence: str, aliases: Mapping[str, str], known: set[str]) -> str:
    """Who a third-person sentence of an episode is about."""
    for pattern in (_APPOS, _OWNER_REL):
        m = pattern.match(sentence)
        if m and m["name"].split()[0] not in STARTERS:
            subject = _canon(m["name"].split()[0], aliases)
            if subject is not None:
                return subject
    if re.match(r"(?i)the user\b", sentence):
        return USER
    lead = leading_name(sentence)
    if lead is not None:
        subject = _lead_subject(lead[0], aliases, known)
        if subject is not None and (subject == USER or subject in known):
            return subject
    return USER


def _same_attribute(new: str, old: str) -> bool:
    """Same attribute, other value: "The user works at Acme" vs "The user works at Globex"."""
    a, b = normalise(new), normalise(old)
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    single = any(t.split("'")[0] in _SINGLE_VALUED for t in a[:prefix])
    return prefix >= 4 and single and len(a) - prefix <= 4 and len(b) - prefix <= 4 and a != b


def _operation(
    subject: str, text: str, existing: Sequence[Fact], episode_id: str, confidence: float
) -> consolidate_prompt.Operation:
    same = [f for f in existing if f.subject == subject]  # never compare across subjects
    best = max(same, key=lambda f: jaccard(text, f.text), default=None)
    if best is not None and jaccard(text, best.text) >= 0.8:
        return consolidate_prompt.Operation(
            op="reinforce", subject=subject, text=best.text, target_id=best.id,
            confidence=min(1.0, round(best.confidence + 0.1, 4)), source_episode_ids=[episode_id],
        )  # fmt: skip
    changed = next((f for f in same if _same_attribute(text, f.text)), None)
    return consolidate_prompt.Operation(
        op="add" if changed is None else "update", subject=subject, text=text,
        target_id=None if changed is None else changed.id, confidence=confidence, source_episode_ids=[episode_id],
    )  # fmt: skip


def _merge(ops: list[consolidate_prompt.Operation], new: consolidate_prompt.Operation) -> None:
    """Append ``new`` to this call's operations, folding it into an earlier one that says the same."""
    for i, old in enumerate(ops):
        same_target = new.target_id is not None and old.target_id == new.target_id and old.op == new.op
        same_new = new.op == "add" and old.op in {"add", "update"} and old.subject == new.subject
        if same_target or (same_new and jaccard(new.text, old.text) >= 0.8):
            text = new.text if new.op == "update" else old.text
        elif same_new and old.op == "add" and _same_attribute(new.text, old.text):
            text = new.text  # a later episode changed a fact first seen in this batch
        else:
            continue
        sources = old.source_episode_ids + [s for s in new.source_episode_ids if s not in old.source_episode_ids]
        ops[i] = old.model_copy(update={"text": text, "source_episode_ids": sources})
        return
    ops.append(new)


def _edges(sentence: str, subject: str, aliases: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(source, relation, target) triples stated by one sentence, following the module's convention."""
    found: list[tuple[str, str, str]] = []
    for pattern in (_APPOS, _OWNER_REL, _MY_REL_START):
        for m in pattern.finditer(sentence):
            raw_owner = (m.groupdict().get("owner") or "my").removesuffix("'s")
            owner = USER if raw_owner.lower() in {"my", "our"} else _canon(raw_owner, aliases)
            person = _canon(m["name"].split()[0], aliases) if m["name"].split()[0] not in STARTERS else None
            relation = RELATIONS[m["rel"].lower()]
            if owner and person and owner != person:
                found.append((owner, relation, person) if relation in _COUPLES else (person, relation, owner))
    for pattern, relation in _PLACES:
        for m in pattern.finditer(sentence):
            target = _canon(m["org"], aliases)
            if target is not None and target != subject:
                found.append((subject, relation, target))
    return found


def consolidate(inputs: consolidate_prompt.Input) -> consolidate_prompt.Output:
    """Fact operations (add / reinforce / update) per episode sentence, and edges when relations are on."""
    aliases = _aliases(inputs.user_names)
    rel = inputs.relations
    vocabulary = None if rel is None or rel.vocabulary is None else set(rel.vocabulary)
    ops: list[consolidate_prompt.Operation] = []
    edges: dict[tuple[str, str, str], consolidate_prompt.EdgeOut] = {}
    for episode in inputs.episodes:
        known = set(episode.subjects) | {f.subject for f in inputs.existing}
        confidence = round(0.55 + 0.4 * episode.salience, 4)
        for sentence in split_sentences(episode.summary):
            if sentence.endswith("?") or re.match(r"^\S+(?: \S+)? asked:", sentence):
                continue
            subject = _fact_subject(sentence, aliases, known)
            if rel is not None and rel.enabled:
                for triple in _edges(sentence, subject, aliases):
                    if (vocabulary is None or triple[1] in vocabulary) and len(edges) < 100:
                        edges.setdefault(triple, consolidate_prompt.EdgeOut(source=triple[0], relation=triple[1],
                                                                             target=triple[2]))
            if len(content_words(sentence)) >= 2 and len(ops) < 100:
                text = ensure_period(sentence)[:1000]
                _merge(ops, _operation(subject, text, inputs.existing, episode.id, confidence))
    return consolidate_prompt.Output(operations=ops, edges=list(edges.values()))


def _about_user(text: str, name: str) -> str:
    """A fact's text with "the user" replaced by the display name."""
    text = re.sub(r"\b[Tt]he user's\b", f"{name}'s", text)
    return ensure_period(re.sub(r"\b[Tt]he user\b", name, text))


def _relation_word(subject: str, facts: Sequence[Fact], edges: Sequence[Edge], aliases: Mapping[str, str]) -> str:
    for fact in facts:
        for pattern in (_APPOS, _OWNER_REL):
            for m in pattern.finditer(fact.text):
                owner = (m["owner"] or "").removesuffix("'s").lower()
                if _canon(m["name"].split()[0], aliases) == subject and owner in {"the user", "my", "our"}:
                    return f"{m['mod'] or ''}{m['rel']}".lower()
    for edge in edges:
        if edge.source == subject and edge.target == USER and edge.relation.endswith(" of"):
            return edge.relation.removesuffix(" of")
        if edge.source == USER and edge.target == subject and edge.relation in _COUPLES:
            return {"married to": "spouse", "partner of": "partner"}.get(edge.relation, "fiancé")
    return ""


def _person_lines(
    subject: str, facts: Sequence[Fact], edges: Sequence[Edge], name: str, aliases: Mapping[str, str]
) -> list[str]:
    """Sentences about another subject, each anchored to the primary user or to the subject's name."""
    display, rel = _display(subject), _relation_word(subject, facts, edges, aliases)
    link = next((e.relation for e in edges if e.source == USER and e.target == subject), None)
    lines: list[str] = []
    for fact in facts:
        bare = re.sub(rf"^({_NAME}),\s+(?:[Tt]he user's|my|our)\s+[^,]+,\s+", r"\1 ", fact.text)
        text = _about_user(bare, name)
        starts = text.lower().startswith(display.lower())
        if lines:
            lines.append(text if display.lower() in text.lower() else f"About {display}: {text}")
        elif _OWNER_REL.match(bare) or (not starts and display.lower() in text.lower() and name in text):
            lines.append(text)
        elif rel and starts:
            lines.append(f"{name}'s {rel} {text}")
        elif link is not None:
            lines.append(f"{name} {link} {display}: {text}")
        else:
            lines.append(f"{name} knows {display}: {text}")
    return lines


def digest(inputs: digest_prompt.Input) -> digest_prompt.Output:
    """A templated narrative: the user's facts first, then other people in relation to the user."""
    aliases = _aliases(inputs.user_names)
    first = inputs.user_names[0].strip() if inputs.user_names and inputs.user_names[0].strip() else ""
    name = first[:1].upper() + first[1:] if first else "The user"
    facts = sorted(inputs.facts, key=lambda f: -f.confidence)
    user_lines = [_about_user(f.text, name) for f in facts if f.subject == USER]
    user_lines.sort(key=lambda line: not line.startswith(name))  # stable: the opening names the user
    others: dict[str, list[Fact]] = {}
    for fact in facts:
        if fact.subject != USER:
            others.setdefault(fact.subject, []).append(fact)
    other_lines = [line for s, fs in others.items() for line in _person_lines(s, fs, inputs.edges, name, aliases)]
    lines = user_lines[: 12 - min(4, len(other_lines))] + other_lines
    for edge in inputs.edges:
        other = edge.target if edge.source == USER else edge.source if edge.target == USER else None
        if other is not None and all(_display(other).lower() not in line.lower() for line in lines):
            rel = edge.relation.removesuffix(" of")
            is_role = edge.target == USER and edge.relation.endswith(" of")
            lines.append(f"{_display(other)} is {name}'s {rel}." if is_role else f"{name} {rel} {_display(other)}.")
    if not lines:
        return digest_prompt.Output(text=inputs.previous or f"{name} has no recorded facts yet.")
    if not lines[0].startswith(name):
        lines.insert(0, f"{name} is the primary user of this memory.")
    out: list[str] = []
    for line in lines:
        if line not in out and len(out) < 12 and sum(len(x) + 1 for x in out) + len(line) < 5900:
            out.append(line)
    return digest_prompt.Output(text=" ".join(out))


RULES: dict[str, Callable[[Any], BaseModel]] = {
    "observe": observe,
    "encode_episode": encode_episode,
    "consolidate": consolidate,
    "digest": digest,
}
