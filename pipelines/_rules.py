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

from tiermem.memory._errors import InvalidSubjectError
from tiermem.memory._records import Edge, Fact
from tiermem.memory._stage import Stage
from tiermem.memory._subjects import USER, canonical_subject, is_canonical_subject
from tiermem.prompts import compact as compact_prompt
from tiermem.prompts import consolidate as consolidate_prompt
from tiermem.prompts import digest as digest_prompt
from tiermem.prompts import encode_episode as encode_prompt
from tiermem.prompts import observe as observe_prompt

from ._sentences import (
    APPOSITION,
    COUPLES,
    HEALTH,
    MY_REL_START,
    OWNER_REL,
    PLACES,
    RELATIONS,
    REVEALS,
    SECOND_PERSON,
    STARTERS,
    WORK,
    content_words,
    ensure_period,
    has_first_person,
    jaccard,
    kind_of,
    leading_name,
    normalise,
    rewrite_first_person,
    salience_of,
    split_sentences,
    strip_apposition,
    strip_greeting,
)

__all__ = ["RULES", "consolidate", "digest", "encode_episode", "observe"]

_SINGLE_VALUED = frozenset(
    {"works", "work", "lives", "live", "moved", "favourite", "favorite", "name", "age", "old", "job", "married"}
    | {"studies", "born", "birthday", "employed"}
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
    """A known subject, or an organisation-like run of capitalised words ("Acme Corp").

    A single unknown capitalised word is not enough: every sentence starts with one ("Painting ...").
    """
    full, first = _canon(name, aliases), _canon(name.split()[0], aliases)
    for candidate in (full, first):
        if candidate is not None and (candidate == USER or candidate in known):
            return candidate
    return full if len(name.split()) > 1 else None


def _attribute(sentence: str, speaker: str, owner: str, aliases: Mapping[str, str], known: set[str]) -> tuple[str, str]:
    """(subject, third-person text) of one sentence said by ``speaker`` (called ``owner`` in text)."""
    m = MY_REL_START.match(sentence)
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
        subject = _canon(lead[0].split()[0], aliases) if subject is None and lead[1] else subject
        if subject is not None:
            return subject, rewrite_first_person(sentence, owner)
    if has_first_person(sentence):
        return speaker, rewrite_first_person(sentence, owner)
    return speaker, f"{owner} said: {sentence}"


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
    raw: str, speaker: tuple[str, str], aliases: Mapping[str, str], known: set[str], names: set[str]
) -> observe_prompt.Observation | None:
    sentence = strip_greeting(raw)
    words = [w for w in content_words(sentence) if w not in names]  # "Agreed, Caroline!" is small talk
    if not words or (len(words) < 2 and not (HEALTH.search(sentence) or WORK.search(sentence))):
        return None
    subject, owner = speaker
    question = sentence.endswith("?")
    if question and not REVEALS.search(sentence):
        return None
    if SECOND_PERSON.search(sentence) and not has_first_person(sentence):
        return None  # about the listener ("You're so inspiring!"), not the speaker
    if question:
        text = f"{owner} asked: {rewrite_first_person(sentence, owner)}"
    else:
        subject, text = _attribute(sentence, subject, owner, aliases, known)
    kind = kind_of(sentence)
    salience = salience_of(sentence, kind, words)
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
    names = {n.lower() for m in inputs.messages if m.name for n in m.name.split()} | {n.split()[0] for n in aliases}
    found: list[observe_prompt.Observation] = []
    for message in inputs.messages:
        speaker = _speaker(message.name, aliases) if message.role == "user" else None
        if speaker is None:
            continue
        for raw in split_sentences(message.content):
            obs = _observe_sentence(raw, speaker, aliases, known, names)
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
            summary=" ".join(chosen), subjects=_subjects(e.subject for _, e in entries), salience=fmean(top)
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
    for pattern in (APPOSITION, OWNER_REL):
        m = pattern.match(sentence)
        if m and m["name"].split()[0] not in STARTERS and not sentence[m.end() :].startswith(" and "):
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


def _confidence(text: str, episode_salience: float) -> float:
    """Lasting facts (health, family, work) score higher; hearsay ("X said: ...") lower."""
    salience = salience_of(text, kind_of(text), content_words(text)) - (0.2 if " said: " in text else 0.0)
    return round(min(0.95, 0.35 + 0.4 * salience + 0.2 * episode_salience), 4)


def _same_attribute(new: str, old: str) -> bool:
    """Same attribute, other value: "The user works at Acme" vs "The user works at Globex"."""
    a, b = normalise(strip_apposition(new)), normalise(strip_apposition(old))
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    single = any(t.split("'")[0] in _SINGLE_VALUED for t in a[:prefix])
    return prefix >= 3 and single and len(a) - prefix <= 8 and len(b) - prefix <= 8 and a != b


def _operation(
    subject: str, text: str, existing: Sequence[Fact], episode_id: str, confidence: float
) -> consolidate_prompt.Operation:
    same = [f for f in existing if f.subject == subject]  # never compare across subjects
    best = max(same, key=lambda f: jaccard(strip_apposition(text), strip_apposition(f.text)), default=None)
    if best is not None and jaccard(strip_apposition(text), strip_apposition(best.text)) >= 0.8:
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
    for pattern in (APPOSITION, OWNER_REL, MY_REL_START):
        for m in pattern.finditer(sentence):
            raw_owner = (m.groupdict().get("owner") or "my").removesuffix("'s")
            owner = USER if raw_owner.lower() in {"my", "our"} else _canon(raw_owner, aliases)
            person = _canon(m["name"].split()[0], aliases) if m["name"].split()[0] not in STARTERS else None
            relation = RELATIONS[m["rel"].lower()]
            if owner and person and owner != person:
                found.append((owner, relation, person) if relation in COUPLES else (person, relation, owner))
    for pattern, relation in PLACES:
        for m in pattern.finditer(sentence):
            target = _canon(m["org"], aliases)
            if target is not None and target != subject:
                found.append((subject, relation, target))
    return found


def consolidate(inputs: consolidate_prompt.Input) -> consolidate_prompt.Output:
    """Fact operations (add / reinforce / update) per episode sentence, and edges when relations are on."""
    aliases = _aliases(inputs.user_names)
    rel = inputs.relations
    on = rel is not None and rel.enabled
    vocabulary = None if rel is None or rel.vocabulary is None else set(rel.vocabulary)
    ops: list[consolidate_prompt.Operation] = []
    edges: dict[tuple[str, str, str], None] = {}  # ordered set
    # The observer already decided each observation's subject: keep it rather than guess again.
    observed = {(o.session_id, " ".join(normalise(o.text))): o.subject for o in inputs.observations}
    for episode in inputs.episodes:
        known = set(episode.subjects) | {f.subject for f in inputs.existing}
        for sentence in split_sentences(episode.summary):
            if sentence.endswith("?") or re.match(r"^\S+(?: \S+)? asked:", sentence):
                continue
            subject = observed.get((episode.session_id, " ".join(normalise(sentence)))) or _fact_subject(
                sentence, aliases, known
            )
            found = _edges(sentence, subject, aliases) if on else []
            edges.update((t, None) for t in found if vocabulary is None or t[1] in vocabulary)
            if len(content_words(sentence)) >= 2 and len(ops) < 100:
                text = ensure_period(sentence)[:1000]
                _merge(ops, _operation(subject, text, inputs.existing, episode.id, _confidence(text, episode.salience)))
    out = [consolidate_prompt.EdgeOut(source=s, relation=r, target=t) for s, r, t in list(edges)[:100]]
    return consolidate_prompt.Output(operations=ops, edges=out)


def compact(inputs: compact_prompt.Input) -> compact_prompt.Output:
    """Merge near-duplicate facts of the one subject: the fullest wording stands for its group."""
    groups: list[list[Fact]] = []
    for fact in sorted(inputs.facts, key=lambda f: (f.created_at, f.id)):
        text = strip_apposition(fact.text)
        group = next((g for g in groups if jaccard(text, strip_apposition(g[0].text)) >= 0.6), None)
        if group is None:
            groups.append([fact])
        else:
            group.append(fact)
    merges = [
        compact_prompt.Merge(source_ids=[f.id for f in g], text=max(g, key=lambda f: (len(f.text), f.id)).text)
        for g in groups
        if len(g) >= 2
    ]
    return compact_prompt.Output(merges=merges[:100])


def _about_user(text: str, name: str) -> str:
    """A fact's text with "the user" replaced by the display name."""
    text = re.sub(r"\b[Tt]he user's\b", f"{name}'s", text)
    return ensure_period(re.sub(r"\b[Tt]he user\b", name, text))


def _relation_word(subject: str, facts: Sequence[Fact], edges: Sequence[Edge], aliases: Mapping[str, str]) -> str:
    for fact in facts:
        for pattern in (APPOSITION, OWNER_REL):
            for m in pattern.finditer(fact.text):
                owner = (m["owner"] or "").removesuffix("'s").lower()
                if _canon(m["name"].split()[0], aliases) == subject and owner in {"the user", "my", "our"}:
                    return f"{m['mod'] or ''}{m['rel']}".lower()
    for edge in edges:
        if edge.source == subject and edge.target == USER and edge.relation.endswith(" of"):
            return edge.relation.removesuffix(" of")
        if edge.source == USER and edge.target == subject and edge.relation in COUPLES:
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
        bare = strip_apposition(fact.text)
        text = _about_user(bare, name)
        starts = text.lower().startswith(display.lower())
        if lines:
            lines.append(text if display.lower() in text.lower() else f"About {display}: {text}")
        elif OWNER_REL.match(bare) or (not starts and display.lower() in text.lower() and name in text):
            lines.append(text)
        elif rel and starts:
            lines.append(f"{name}'s {rel} {text}")
        elif link is not None:
            lines.append(f"{name} {link} {display}: {text}")
        else:
            lines.append(f"{name} {'is connected to' if '-' in subject else 'knows'} {display}: {text}")
    return lines


def _edge_sentence(edge: Edge, other: str, name: str) -> str:
    if edge.target == USER and edge.relation.endswith(" of"):
        return f"{_display(other)} is {name}'s {edge.relation.removesuffix(' of')}."
    if edge.target == USER:
        return f"{_display(other)} {edge.relation} {name}."
    verb = edge.relation if edge.relation.split()[0].endswith("s") else f"is {edge.relation}"
    return f"{name} {verb} {_display(other)}."


def digest(inputs: digest_prompt.Input) -> digest_prompt.Output:
    """A templated narrative: the user's facts first, then other people in relation to the user.

    Narrates only what it is given that holds now: active facts and current edges. The previous
    digest is never carried over (it may state what has since been superseded).
    """
    inputs = inputs.model_copy(
        update={
            "facts": [f for f in inputs.facts if f.status == "active"],
            "edges": [e for e in inputs.edges if e.current],
        }
    )
    aliases = _aliases(inputs.user_names)
    first = inputs.user_names[0].strip() if inputs.user_names and inputs.user_names[0].strip() else ""
    name = first[:1].upper() + first[1:] if first else "The user"
    facts = sorted(inputs.facts, key=lambda f: -f.confidence)
    user_lines = [_about_user(f.text, name) for f in facts if f.subject == USER]
    user_lines.sort(key=lambda line: (not line.startswith(name), " said: " in line))  # stable: confidence order
    others: dict[str, list[Fact]] = {}
    for fact in facts:
        if fact.subject != USER:
            others.setdefault(fact.subject, []).append(fact)
    other_lines = [line for s, fs in others.items() for line in _person_lines(s, fs, inputs.edges, name, aliases)]
    lines = user_lines[: 12 - min(4, len(other_lines))] + other_lines
    for edge in inputs.edges:  # relations to people and places the facts did not mention
        other = edge.target if edge.source == USER else edge.source if edge.target == USER else None
        if other is not None and all(_display(other).lower() not in line.lower() for line in lines):
            lines.append(_edge_sentence(edge, other, name))
    if not lines:
        return digest_prompt.Output(text=f"{name} has no recorded facts yet.")
    if not lines[0].startswith(name):
        lines.insert(0, f"{name} is the primary user of this memory.")
    out: list[str] = []
    for line in lines:
        if line not in out and len(out) < 12 and sum(len(x) + 1 for x in out) + len(line) < 5900:
            out.append(line)
    return digest_prompt.Output(text=" ".join(out))


RULES: Mapping[Stage[Any, Any], Callable[[Any], BaseModel]] = {
    observe_prompt.STAGE: observe,
    encode_prompt.STAGE: encode_episode,
    consolidate_prompt.STAGE: consolidate,
    digest_prompt.STAGE: digest,
    compact_prompt.STAGE: compact,
}
"""Each stage's rule, keyed on the prompt module's stage object."""
