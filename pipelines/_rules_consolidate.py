"""The rules model's consolidate stage: an episode's sentences as fact operations (add, reinforce, update)
and, when relations are on, edges.

Part of the offline rules model (:mod:`tiermem.pipelines._rules`): pure Python, deterministic, no network.

Edge convention: an edge reads as "<source> <relation> <target>".

- Couples go from the owner of the relation to the other person: "my wife Moni" ->
  ``(user, "married to", moni)``; partner/girlfriend/boyfriend -> "partner of"; fiancé(e) -> "engaged to".
- Other roles go from the person holding the role to its owner: "my brother Tom" ->
  ``(tom, "brother of", user)``; likewise "friend of", "boss of", "colleague of", "mother of" ...
- Places and organisations go from the sentence's subject: "works at", "lives in", "studies at",
  "member of" (``(user, "works at", acme-corp)``); not from a past or ended one ("used to live in").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tiermem.memory._records import Fact
from tiermem.memory._subjects import USER
from tiermem.prompts import consolidate as consolidate_prompt

from ._rules_observe import lead_subject
from ._rules_policy import screened
from ._sentences import (
    APPOSITION,
    COUPLES,
    MY_REL_START,
    OWNER_REL,
    PLACES,
    RELATIONS,
    STARTERS,
    content_words,
    ensure_period,
    jaccard,
    kind_of,
    leading_name,
    normalise,
    salience_of,
    split_sentences,
    strip_apposition,
    subject_of,
    user_aliases,
)
from ._updates import claims_of, restated, supersession

__all__ = ["consolidate"]


_SINGLE_VALUED = frozenset(
    {"works", "work", "lives", "live", "moved", "favourite", "favorite", "name", "age", "old", "job", "married"}
    | {"studies", "born", "birthday", "employed"}
)


_PLACE_EDGES = {"residence": "lives in", "employer": "works at"}


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
        subject = lead_subject(lead[0], aliases, known)
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
    """Append ``new`` to this call's operations: folded into an earlier one that says the same, or as an update
    of the earlier one it changes ("#N": a move sessions after the old home, in one batch, keeps it as history;
    a change in the session that said it is folded in: there the last word holds).
    """
    for i in reversed(range(len(ops))):  # the latest saying the same
        old = ops[i]
        same_target = new.target_id is not None and old.target_id == new.target_id and old.op == new.op
        restated = same_target and (new.op == "reinforce" or jaccard(new.text, old.text) >= 0.8)
        said_again = new.op == "add" and old.op in {"add", "update"} and old.subject == new.subject
        if restated or (said_again and jaccard(new.text, old.text) >= 0.8):
            sources = old.source_episode_ids + [s for s in new.source_episode_ids if s not in old.source_episode_ids]
            ops[i] = old.model_copy(update={"source_episode_ids": sources})
            return
    for i in reversed(range(len(ops))):  # the latest version of what it changes
        old = ops[i]
        if old.op not in {"add", "update"} or old.subject != new.subject:
            continue
        if new.op == "update" and new.target_id == old.target_id:
            text = new.text  # the fact an earlier sentence of this batch changed, changed again
        elif new.op == "add" and (now := _restated(new.text, old.text)) is not None:
            text = now  # "moved from Berlin to Lisbon" after "lives in Berlin": what holds now
        elif new.op == "add" and _same_attribute(new.text, old.text):
            text = new.text
        else:
            continue
        if set(new.source_episode_ids) <= set(old.source_episode_ids):  # in one session the last word holds
            ops[i] = old.model_copy(update={"text": text})
        else:
            ops.append(new.model_copy(update={"op": "update", "target_id": f"#{i + 1}", "text": text}))
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
            labels = screened(inputs.policy, subject, sentence)
            if labels is None:  # the policy keeps it out: no fact, no edge
                continue
            found = _edges(sentence, subject, aliases) if on else []
            edges.update((t, None) for t in found if vocabulary is None or t[1] in vocabulary)
            if (len(content_words(sentence)) >= 2 or claims_of(sentence)) and len(ops) < 100:
                text = ensure_period(sentence)[:1000]
                for op in _operations(subject, text, inputs.existing, episode.id, _confidence(text, episode.salience)):
                    _merge(ops, op.model_copy(update={"categories": list(labels)}) if labels else op)
    stated = _places(ops, aliases)  # a home or job a later sentence of this batch changed is not an edge
    kept = [t for t in edges if t[1] not in _PLACE_EDGES.values() or t in stated]
    out = [consolidate_prompt.EdgeOut(source=s, relation=r, target=t) for s, r, t in kept[:100]]
    return consolidate_prompt.Output(operations=ops, edges=out)
