"""Consolidator: episodes + existing facts -> fact operations and edges, through a guard in code.

The guard refuses, and counts, any operation that would write a non-canonical subject, touch a
fact it was not shown, or rewrite or merge a fact across subjects. An update supersedes: the
old fact keeps its text, gets ``valid_to`` and ``superseded_by`` and stays inspectable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tiermem.memory._decay import reinforce
from tiermem.memory._errors import InvalidSubjectError
from tiermem.memory._identity import edge_id, fact_id
from tiermem.memory._options import RelationsOptions
from tiermem.memory._records import Edge, Episode, Fact, MemoryContext, WorkingEntry, mentions, retrieval_keys
from tiermem.memory._subjects import canonical_subject
from tiermem.prompts import consolidate

from ._batches import run_consolidation
from ._model import StageModel

__all__ = ["ConsolidationPlan", "Refusal", "consolidate_episodes"]


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """An operation the guard refused, and why."""

    op: str
    subject: str
    reason: str


@dataclass(kw_only=True)
class ConsolidationPlan:
    """What to write: new or reinforced facts, superseded facts, edges; plus what was refused."""

    facts: dict[str, Fact] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1


def _subject(raw: str, aliases: Mapping[str, str]) -> str | None:
    try:
        return canonical_subject(raw, aliases=aliases)
    except InvalidSubjectError:
        return None


async def consolidate_episodes(
    model: StageModel,
    *,
    ctx: MemoryContext,
    episodes: Sequence[Episode],
    observations: Sequence[WorkingEntry] = (),
    existing: Sequence[Fact],
    user_names: Sequence[str],
    aliases: Mapping[str, str],
    relations: RelationsOptions | None,
    now: datetime,
    known_subjects: Sequence[str] = (),
    answer: consolidate.FactsOutput | None = None,
) -> ConsolidationPlan:
    """One model call for a batch of episodes; the plan is applied by the caller.

    ``answer``: the operations already asked for (the encode-and-consolidate stage's), checked the same way.
    """
    rel = relations if relations is not None and relations.enabled else None
    inputs = consolidate.Input(
        episodes=list(episodes),
        observations=list(observations),
        existing=list(existing),
        user_names=list(user_names),
        relations=rel,
        now=now,
    )
    # Fitted to the model's budget; with edges when relations are on.
    output = answer if answer is not None else await run_consolidation(model, inputs)
    plan = ConsolidationPlan()
    known = {f.id: f for f in existing}
    sources = _Sources(episodes, observations)
    for op in output.operations:
        _apply(op, plan=plan, ctx=ctx, known=known, aliases=aliases, now=now, sources=sources)
    if rel is not None and isinstance(output, consolidate.Output):
        subjects = {"user", *known_subjects} | {f.subject for f in existing} | {f.subject for f in plan.facts.values()}
        subjects |= {s for e in episodes for s in e.subjects}
        turns = tuple(dict.fromkeys(t for e in episodes for t in e.provenance))
        plan.edges = _edges(
            output.edges, plan=plan, ctx=ctx, aliases=aliases, rel=rel, known=subjects, now=now, turns=turns
        )
        live = {f.id: f for f in existing if f.status == "active"}
        live.update({f.id: f for f in plan.facts.values()})
        plan.edges = [_supported(e, [f for f in live.values() if f.status == "active"]) for e in plan.edges]
    return plan


def _supported(edge: Edge, facts: Sequence[Fact]) -> Edge:
    """The edge with its support set: the active facts naming both endpoints, those of its turns first."""
    naming = [f for f in facts if mentions(f, edge.source) and mentions(f, edge.target)]
    turns = set(edge.provenance)
    own = [f for f in naming if turns & set(f.provenance)] or naming
    return edge.model_copy(update={"support": tuple(sorted(f.id for f in own))}) if own else edge


def _apply(
    op: consolidate.Operation,
    *,
    plan: ConsolidationPlan,
    ctx: MemoryContext,
    known: dict[str, Fact],
    aliases: Mapping[str, str],
    now: datetime,
    sources: _Sources,
) -> None:
    if op.op == "noop":
        plan.count("noop")
        return
    subject = _subject(op.subject, aliases)
    if subject is None:
        plan.refused.append(Refusal(op=op.op, subject=op.subject, reason="non-canonical subject"))
        plan.count("refused")
        return
    target = known.get(op.target_id) if op.target_id else None
    if op.op in {"reinforce", "update"}:
        if target is None:
            plan.refused.append(Refusal(op=op.op, subject=subject, reason=f"unknown target {op.target_id!r}"))
            plan.count("refused")
            return
        if target.subject != subject:
            reason = f"cross-subject {op.op}: {target.subject!r} fact by a {subject!r} operation"
            plan.refused.append(Refusal(op=op.op, subject=subject, reason=reason))
            plan.count("refused")
            return
    if op.op == "add" and not op.text.strip():
        plan.refused.append(Refusal(op=op.op, subject=subject, reason="empty text"))
        plan.count("refused")
        return
    episodes = sources.episode_ids(op.source_episode_ids)
    said = sources.matching(op.text or (target.text if target else ""), subject, episodes)
    turns = sources.turns(said, episodes)
    # Keys the model gave, else those of the observations the fact came from: a model that writes
    # no keys for facts still keeps the observer's.
    keys = retrieval_keys(op.keys or [k for obs in said for k in obs.keys])
    meta = {"prompt_version": consolidate.STAGE.version, "episodes": episodes}
    if op.op == "reinforce" or (op.op == "update" and target is not None and _same(target.text, op.text)):
        assert target is not None
        _reinforce(plan, plan.facts.get(target.id, target), op.confidence, now, turns, episodes, keys)
        return
    text = " ".join(op.text.split())
    new_id = fact_id(ctx, subject=subject, text=text)
    current = plan.facts.get(new_id) or known.get(new_id)
    if current is not None and current.status == "active":
        _reinforce(plan, current, op.confidence, now, turns, episodes, keys)
        return
    plan.facts[new_id] = Fact.new(
        ctx,
        subject=subject,
        text=text,
        now=now,
        confidence=op.confidence,
        valid_from=now,
        provenance=turns,
        metadata=meta,
        keys=keys,
    )
    if op.op == "update" and target is not None:
        plan.facts[target.id] = target.model_copy(
            update={"status": "superseded", "valid_to": now, "superseded_by": new_id, "updated_at": now}
        )
        plan.count("update")
    else:
        plan.count("add")


_WORD = re.compile(r"[a-z0-9]+")
_GENERIC = frozenset({"user", "the", "and", "a", "an", "to", "of", "in", "on", "at", "for", "is", "was", "with", "s"})


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _GENERIC)


class _Sources:
    """Where a fact came from: the observations (and so the turns) that say it, not the whole batch."""

    def __init__(self, episodes: Sequence[Episode], observations: Sequence[WorkingEntry]) -> None:
        self._episodes = {e.id: e for e in episodes}
        self._session = {e.session_id: e.id for e in episodes}
        self._observations = [(o, _words(o.text), self._session.get(o.session_id)) for o in observations]

    def episode_ids(self, named: Sequence[str]) -> list[str]:
        valid = [i for i in named if i in self._episodes]
        return valid or list(self._episodes)

    def turns(self, said: Sequence[WorkingEntry], episodes: Sequence[str]) -> tuple[str, ...]:
        """Turns of the observations that say the fact; else the source episodes' turns."""
        if said:
            return tuple(dict.fromkeys(t for obs in said for t in obs.provenance))
        return tuple(dict.fromkeys(t for e in episodes for t in self._episodes[e].provenance))

    def matching(self, text: str, subject: str, episodes: Sequence[str]) -> list[WorkingEntry]:
        """The best-matching observations of ``episodes`` (same subject first); none when nothing is close."""
        words = _words(text)
        scored = []
        for obs, obs_words, episode in self._observations:
            if episode not in episodes or not words or not obs_words:
                continue
            overlap = len(words & obs_words) / len(words | obs_words)
            scored.append((overlap + (0.05 if obs.subject == subject else 0.0), obs))
        scored.sort(key=lambda pair: -pair[0])
        if scored and scored[0][0] >= 0.2:
            best = scored[0][0]
            return [obs for score, obs in scored[:3] if score >= 0.6 * best]
        return []


def _same(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def _reinforce(
    plan: ConsolidationPlan,
    fact: Fact,
    confidence: float,
    now: datetime,
    turns: tuple[str, ...],
    episodes: list[str],
    keys: tuple[str, ...] = (),
) -> None:
    """Reinforce once per distinct episode: a rerun (a crash, a re-encoded session) repeats no evidence.

    A fact stored without keys takes the new ones; keys it has are kept.
    """
    seen = [str(e) for e in fact.metadata.get("episodes", [])]
    if set(episodes) <= set(seen):
        plan.count("repeat")
        return
    reinforced = reinforce(fact, confidence=confidence, now=now, provenance=turns)
    merged = list(dict.fromkeys([*seen, *episodes]))
    update: dict[str, object] = {"metadata": {**reinforced.metadata, "episodes": merged}}
    if keys and not fact.keys:
        update["keys"] = keys
    plan.facts[fact.id] = reinforced.model_copy(update=update)
    plan.count("reinforce")


def _edges(
    raw: Sequence[consolidate.EdgeOut],
    *,
    plan: ConsolidationPlan,
    ctx: MemoryContext,
    aliases: Mapping[str, str],
    rel: RelationsOptions,
    known: set[str],
    now: datetime,
    turns: tuple[str, ...],
) -> list[Edge]:
    out: dict[str, Edge] = {}
    for edge in raw:
        source, target = _subject(edge.source, aliases), _subject(edge.target, aliases)
        relation = " ".join(edge.relation.lower().split())
        if source is None or target is None or source == target:
            plan.count("edges_invalid")
            continue
        if rel.vocabulary is not None and relation not in rel.vocabulary:
            plan.count("edges_out_of_vocabulary")
            continue
        minted = sorted({source, target} - known)
        if minted and not rel.create_implicit_entities:
            # Reported, not only counted: the caller sees which entity was unknown and how to keep such edges.
            plan.count("edges_unknown_endpoint")
            reason = (
                f"unknown endpoint {', '.join(repr(m) for m in minted)}: not the subject of any fact or episode "
                "(create_implicit_entities=True would mint it)"
            )
            plan.refused.append(Refusal(op="edge", subject=f"{source} --{relation}--> {target}", reason=reason))
            continue
        if minted:
            plan.count("edges_implicit_endpoint")
        eid = edge_id(ctx, source=source, relation=relation, target=target)
        out[eid] = Edge(
            id=eid,
            namespace=ctx.namespace,
            user_id=ctx.user_id,
            source=source,
            relation=relation,
            target=target,
            confidence=edge.confidence,
            created_at=now,
            updated_at=now,
            valid_from=now,
            provenance=turns,
            # Minted endpoints have no facts of their own; the janitor must not take them for dangling.
            metadata={"prompt_version": consolidate.STAGE.version, **({"implicit": minted} if minted else {})},
        )
    return list(out.values())
