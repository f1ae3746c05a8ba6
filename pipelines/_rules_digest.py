"""The rules model's writing stages: the digest (a templated narrative) and compaction.

Part of the offline rules model (:mod:`tiermem.pipelines._rules`): pure Python, deterministic, no network.
Both honour a memory policy where they can: besides the facts' stored labels and subjects (which the
pipelines already filter on), a fact whose words the rules model recognises under an excluded label
(:func:`~._rules_policy.recognised`) is neither merged nor narrated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tiermem.memory._records import Edge, Fact
from tiermem.memory._subjects import USER
from tiermem.prompts import compact as compact_prompt
from tiermem.prompts import digest as digest_prompt

from ._restated import kept_edges, kept_facts
from ._rules_policy import recognised
from ._sentences import (
    APPOSITION,
    COUPLES,
    OWNER_REL,
    display_name,
    ensure_period,
    jaccard,
    strip_apposition,
    subject_of,
    user_aliases,
)

__all__ = ["compact", "digest"]


def compact(inputs: compact_prompt.Input) -> compact_prompt.Output:
    """Merge near-duplicate facts of the one subject: the fullest wording stands for its group."""
    groups: list[list[Fact]] = []
    for fact in sorted(kept_facts(inputs.policy, inputs.facts, recognised), key=lambda f: (f.created_at, f.id)):
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
                if subject_of(m["name"].split()[0], aliases) == subject and owner in {"the user", "my", "our"}:
                    return f"{m['mod'] or ''}{m['rel']}".lower()
    for edge in edges:
        if edge.source == subject and edge.target == USER and edge.relation.endswith(" of"):
            return edge.relation.removesuffix(" of")
        if edge.source == USER and edge.target == subject and edge.relation in COUPLES:
            return {"married to": "spouse", "partner of": "partner"}.get(edge.relation, "fiancé")
    return ""


def _relation_via(
    subject: str, facts: Sequence[Fact], edges: Sequence[Edge], aliases: Mapping[str, str]
) -> tuple[str, str] | None:
    """(relation, other subject) when ``subject`` is related to someone else ("Tom, Moni's brother")."""
    for fact in facts:
        for pattern in (APPOSITION, OWNER_REL):
            for m in pattern.finditer(fact.text):
                owner = (m["owner"] or "").removesuffix("'s")
                other = subject_of(owner, aliases) if owner.lower() not in {"the user", "my", "our"} else None
                if other not in {None, USER, subject} and subject_of(m["name"].split()[0], aliases) == subject:
                    return f"{m['mod'] or ''}{m['rel']}".lower(), str(other)
    for edge in edges:
        if edge.source == subject and edge.target not in {USER, subject} and edge.relation.endswith(" of"):
            return edge.relation.removesuffix(" of"), edge.target
    return None


def _through(subject: str, via: tuple[str, str], name: str, to_user: Mapping[str, str]) -> str:
    """``subject`` named through the person it is related to, that person through the user when known:
    "Tom, the brother of Sam's wife Moni,"."""
    rel, other = via
    if to_user.get(other):
        return f"{display_name(subject)}, the {rel} of {name}'s {to_user[other]} {display_name(other)},"
    return f"{display_name(subject)}, {display_name(other)}'s {rel},"


def _person_lines(
    subject: str,
    facts: Sequence[Fact],
    edges: Sequence[Edge],
    name: str,
    aliases: Mapping[str, str],
    to_user: Mapping[str, str],
) -> list[str]:
    """Sentences about another subject, each anchored to the primary user (directly, or through the person
    it is related to: ``to_user`` has each subject's relation to the user) or to the subject's name."""
    display, rel = display_name(subject), to_user.get(subject, "")
    link = next((e.relation for e in edges if e.source == USER and e.target == subject), None)
    via = None if rel or link else _relation_via(subject, facts, edges, aliases)
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
        elif via is not None and starts:
            lines.append(f"{_through(subject, via, name, to_user)} {text[len(display) :].lstrip()}")
        elif via is not None:
            lines.append(f"About {_through(subject, via, name, to_user).rstrip(',')}: {text}")
        elif link is not None:
            lines.append(f"{name} {link} {display}: {text}")
        else:
            lines.append(f"{name} {'is connected to' if '-' in subject else 'knows'} {display}: {text}")
    return lines


def _edge_sentence(edge: Edge, other: str, name: str) -> str:
    if edge.target == USER and edge.relation.endswith(" of"):
        return f"{display_name(other)} is {name}'s {edge.relation.removesuffix(' of')}."
    if edge.target == USER:
        return f"{display_name(other)} {edge.relation} {name}."
    verb = edge.relation if edge.relation.split()[0].endswith("s") else f"is {edge.relation}"
    return f"{name} {verb} {display_name(other)}."


def _short(line: str, limit: int = 480) -> str:
    """``line`` cut at a word to ``limit`` characters: a fact of 8,000 characters takes a sentence, not the digest."""
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."


def digest(inputs: digest_prompt.Input) -> digest_prompt.Output:
    """A templated narrative: the user's facts first, then other people in relation to the user.

    Narrates only what it is given that holds now: active facts and current edges. The previous
    digest is never carried over (it may state what has since been superseded). Under a policy, what it
    recognises as kept out is not narrated.
    """
    active = [f for f in inputs.facts if f.status == "active"]
    kept = kept_facts(inputs.policy, active, recognised)
    edges = kept_edges(inputs.policy, [e for e in inputs.edges if e.current], active, kept)
    inputs = inputs.model_copy(update={"facts": kept, "edges": edges})
    aliases = user_aliases(inputs.user_names)
    first = inputs.user_names[0].strip() if inputs.user_names and inputs.user_names[0].strip() else ""
    name = first[:1].upper() + first[1:] if first else "The user"
    facts = sorted(inputs.facts, key=lambda f: -f.confidence)
    user_lines = [_about_user(f.text, name) for f in facts if f.subject == USER]
    user_lines.sort(key=lambda line: (not line.startswith(name), " said: " in line))  # stable: confidence order
    others: dict[str, list[Fact]] = {}
    for fact in facts:
        if fact.subject != USER:
            others.setdefault(fact.subject, []).append(fact)
    to_user = {s: _relation_word(s, fs, inputs.edges, aliases) for s, fs in others.items()}
    other_lines = [
        line for s, fs in others.items() for line in _person_lines(s, fs, inputs.edges, name, aliases, to_user)
    ]
    lines = user_lines[: 12 - min(4, len(other_lines))] + other_lines
    for edge in inputs.edges:  # relations to people and places the facts did not mention
        other = edge.target if edge.source == USER else edge.source if edge.target == USER else None
        if other is not None and all(display_name(other).lower() not in line.lower() for line in lines):
            lines.append(_edge_sentence(edge, other, name))
    if not lines:
        return digest_prompt.Output(text=f"{name} has no recorded facts yet.")
    if not lines[0].startswith(name):
        lines.insert(0, f"{name} is the primary user of this memory.")
    out: list[str] = []
    for line in map(_short, lines):
        if line not in out and len(out) < 12 and sum(len(x) + 1 for x in out) + len(line) < 5900:
            out.append(line)
    return digest_prompt.Output(text=" ".join(out))
