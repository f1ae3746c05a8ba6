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
  "member of" (``(user, "works at", acme-corp)``); not from a past or ended one ("used to live in").

Updates ("I moved to Lisbon", "I quit my job", "we broke up", "I turned 35") are read by
:mod:`tiermem.pipelines._updates`, which lists the patterns covered and those not covered; the digest
and compaction are in :mod:`tiermem.pipelines._rules_digest`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from statistics import fmean
from typing import Any

from pydantic import BaseModel

from tiermem.memory._records import Fact
from tiermem.memory._stage import Stage
from tiermem.memory._subjects import USER, is_canonical_subject
from tiermem.prompts import compact as compact_prompt
from tiermem.prompts import consolidate as consolidate_prompt
from tiermem.prompts import digest as digest_prompt
from tiermem.prompts import encode_consolidate as combined_prompt
from tiermem.prompts import encode_episode as encode_prompt
from tiermem.prompts import observe as observe_prompt

from ._rules_digest import compact, digest
from ._sentences import (
    APPOSITION,
    COUPLES,
    HEALTH,
    MY_REL_START,
    NAMED_REL_START,
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
    subject_of,
    user_aliases,
)
from ._updates import claims_of, restated, supersession

__all__ = ["RULES", "compact", "consolidate", "digest", "encode_consolidate", "encode_episode", "observe"]

_SINGLE_VALUED = frozenset(
    {"works", "work", "lives", "live", "moved", "favourite", "favorite", "name", "age", "old", "job", "married"}
    | {"studies", "born", "birthday", "employed"}
)
_MAX_OBSERVATIONS = 20
_PLACE_EDGES = {"residence": "lives in", "employer": "works at"}


def _lead_subject(name: str, aliases: Mapping[str, str], known: set[str]) -> str | None:
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


def _relative(sentence: str, speaker: str, owner: str, aliases: Mapping[str, str]) -> tuple[str, str] | None:
    """A sentence about a named relative, about that person: "My brother Tom ...", "Moni's brother Tom ..."."""
    m = MY_REL_START.match(sentence) or NAMED_REL_START.match(sentence)
    if m is None or m["name"].split()[0] in STARTERS or re.match(r"(?i)and (?:I|me)\b", m["rest"]):
        return None
    person = subject_of(m["name"].split()[0], aliases)
    whose = _whose(m.groupdict().get("holder"), speaker, owner, aliases)
    if person is None or whose is None or person in {speaker, whose[0]}:
        return None
    rel = f"{m['mod'] or ''}{m['rel']}".lower()
    rest = rewrite_first_person(m["rest"], owner)
    if m["poss"]:
        return person, f"{whose[1]}'s {rel} {m['name']}'s {rest}"
    if rest.strip(" .!?"):
        return person, f"{m['name']}, {whose[1]}'s {rel}, {rest}"
    return person, f"{m['name']} is {whose[1]}'s {rel}."


def _attribute(sentence: str, speaker: str, owner: str, aliases: Mapping[str, str], known: set[str]) -> tuple[str, str]:
    """(subject, third-person text) of one sentence said by ``speaker`` (called ``owner`` in text)."""
    relative = _relative(sentence, speaker, owner, aliases)
    if relative is not None:
        return relative
    lead = leading_name(sentence)
    if lead is not None and (lead[1] or not has_first_person(sentence)):
        subject = _lead_subject(lead[0], aliases, known)
        subject = subject_of(lead[0].split()[0], aliases) if subject is None and lead[1] else subject
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
    subject = subject_of(first, aliases)
    return None if subject is None else (subject, first[:1].upper() + first[1:])


def _observe_sentence(
    raw: str, speaker: tuple[str, str], aliases: Mapping[str, str], known: set[str], names: set[str]
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
    aliases = user_aliases(inputs.user_names)
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
            subject = subject_of(m["name"].split()[0], aliases)
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


def _operations(
    subject: str, text: str, existing: Sequence[Fact], episode_id: str, confidence: float
) -> list[consolidate_prompt.Operation]:
    """The operations one sentence asks for: updates of the facts it changes, else add / reinforce / update."""
    same = [f for f in existing if f.subject == subject]  # never compare across subjects
    # Before reinforcing: a long sentence may differ from an old one only in its value.
    changes, more = supersession(text, same)
    ops = [
        consolidate_prompt.Operation(
            op="update", subject=subject, text=now, target_id=fact.id, confidence=confidence,
            source_episode_ids=[episode_id],
        )
        for fact, now in changes
    ]  # fmt: skip
    if ops and not more:
        return ops  # the sentence said nothing but the changes
    changed = {op.target_id for op in ops}
    return [*ops, _operation(subject, text, [f for f in same if f.id not in changed], episode_id, confidence)]


def _operation(
    subject: str, text: str, same: Sequence[Fact], episode_id: str, confidence: float
) -> consolidate_prompt.Operation:
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


def _restated(new: str, old: str) -> str | None:
    """What holds now when ``new`` changes ``old``, both said in this batch and each saying one thing."""
    return restated(new, old) if len(claims_of(new)) == len(claims_of(old)) == 1 else None


def _merge(ops: list[consolidate_prompt.Operation], new: consolidate_prompt.Operation) -> None:
    """Append ``new`` to this call's operations, folding it into an earlier one that says the same."""
    for i, old in enumerate(ops):
        same_target = new.target_id is not None and old.target_id == new.target_id and old.op == new.op
        same_new = new.op == "add" and old.op in {"add", "update"} and old.subject == new.subject
        if same_target or (same_new and jaccard(new.text, old.text) >= 0.8):
            text = new.text if new.op == "update" else old.text
        elif same_new and old.op == "add" and (now := _restated(new.text, old.text)) is not None:
            text = now  # a later episode changed a fact first seen in this batch ("moved from Berlin to Lisbon")
        elif same_new and old.op == "add" and _same_attribute(new.text, old.text):
            text = new.text
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
            owner = USER if raw_owner.lower() in {"my", "our"} else subject_of(raw_owner, aliases)
            person = subject_of(m["name"].split()[0], aliases) if m["name"].split()[0] not in STARTERS else None
            relation = RELATIONS[m["rel"].lower()]
            if owner and person and owner != person:
                found.append((owner, relation, person) if relation in COUPLES else (person, relation, owner))
    places = [
        (subject_of(m["org"], aliases), relation) for pattern, relation in PLACES for m in pattern.finditer(sentence)
    ]
    for claim in claims_of(sentence):  # a home or employer the subject has now: not "used to", not a friend's
        if claim.attribute in _PLACE_EDGES and claim.role in {"state", "change"} and claim.value:
            places.append((subject_of(claim.value, aliases), _PLACE_EDGES[claim.attribute]))
    found += [(subject, relation, target) for target, relation in places if target is not None and target != subject]
    return found


def _places(ops: Sequence[consolidate_prompt.Operation], aliases: Mapping[str, str]) -> set[tuple[str, str, str]]:
    """(subject, "lives in" / "works at", place) that the operations' texts state as current."""
    return {
        (op.subject, _PLACE_EDGES[c.attribute], target)
        for op in ops
        for c in claims_of(op.text)
        if c.attribute in _PLACE_EDGES and c.role in {"state", "change"} and c.value
        if (target := subject_of(c.value, aliases)) is not None
    }


def consolidate(inputs: consolidate_prompt.Input) -> consolidate_prompt.Output:
    """Fact operations (add / reinforce / update) per episode sentence, and edges when relations are on."""
    aliases = user_aliases(inputs.user_names)
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
            if (len(content_words(sentence)) >= 2 or claims_of(sentence)) and len(ops) < 100:
                text = ensure_period(sentence)[:1000]
                for op in _operations(subject, text, inputs.existing, episode.id, _confidence(text, episode.salience)):
                    _merge(ops, op)
    stated = _places(ops, aliases)  # a home or job a later sentence of this batch changed is not an edge
    kept = [t for t in edges if t[1] not in _PLACE_EDGES.values() or t in stated]
    out = [consolidate_prompt.EdgeOut(source=s, relation=r, target=t) for s, r, t in kept[:100]]
    return consolidate_prompt.Output(operations=ops, edges=out)


def encode_consolidate(inputs: combined_prompt.Input) -> combined_prompt.Output:
    """The two rules composed: each provisional episode encoded as :func:`encode_episode` would (from its
    observations and turns), then the batch consolidated as :func:`consolidate` would, from those summaries."""
    episodes, written = [], []
    for episode in inputs.episodes:
        if episode.id in inputs.encode:
            encoded = encode_episode(
                encode_prompt.Input(
                    entries=[o for o in inputs.observations if o.session_id == episode.session_id],
                    turns=[t for t in inputs.turns if t.session_id == episode.session_id],
                    user_names=inputs.user_names, started_at=episode.started_at, ended_at=episode.ended_at,
                )
            )  # fmt: skip
            subjects = tuple(dict.fromkeys([*encoded.subjects, *episode.subjects]))
            update = {"summary": encoded.summary, "subjects": subjects, "salience": encoded.salience}
            episode = episode.model_copy(update=update)
            written.append(combined_prompt.EpisodeOut(id=episode.id, **encoded.model_dump()))
        episodes.append(episode)
    fields = {name: getattr(inputs, name) for name in consolidate_prompt.Input.model_fields}
    out = consolidate(consolidate_prompt.Input(**{**fields, "episodes": episodes}))
    return combined_prompt.Output(operations=out.operations, edges=out.edges, episodes=written)


RULES: Mapping[Stage[Any, Any], Callable[[Any], BaseModel]] = {
    observe_prompt.STAGE: observe,
    encode_prompt.STAGE: encode_episode,
    consolidate_prompt.STAGE: consolidate,
    combined_prompt.STAGE: encode_consolidate,
    digest_prompt.STAGE: digest,
    compact_prompt.STAGE: compact,
}
"""Each stage's rule, keyed on the prompt module's stage object."""
