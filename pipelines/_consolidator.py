"""Consolidator: episodes + existing facts -> fact operations and edges, through a guard in code.

The guard refuses, and counts, any operation that would write a non-canonical subject, touch a
fact it was not shown, or rewrite or merge a fact across subjects. An update supersedes: the
old fact keeps its text, gets ``valid_to`` and ``superseded_by`` and stays inspectable.

A batch holds several sessions, so its operations are applied in the order their evidence was said,
and each fact is dated by it: ``valid_from`` is the time of the earliest turn it comes from, and an
update closes the old fact at the new one's ``valid_from``. An update may target a fact added by an
earlier operation of the same answer (``target_id`` "#N", N counting the answer's operations from 1):
a move said two sessions after the old home, both in one batch, keeps the old home as history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tiermem.memory._decay import reinforce
from tiermem.memory._errors import InvalidSubjectError
from tiermem.memory._identity import edge_id, fact_id
from tiermem.memory._options import RelationsOptions
from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Edge, Episode, Fact, MemoryContext, WorkingEntry, mentions
from tiermem.memory._retrieval_keys import retrieval_keys
from tiermem.memory._subjects import canonical_subject
from tiermem.prompts import consolidate

from ._batches import run_consolidation
from ._evidence import Evidence, Sources
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
    rebase: Callable[[Sequence[Fact]], ConsolidationPlan] | None = None
    """The same answer applied to other versions of the facts: the current ones, re-read when the plan is
    written (a correction or a pin made during the model call is built on, never overwritten)."""

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
    policy: MemoryPolicy | None = None,
) -> ConsolidationPlan:
    """One model call for a batch of episodes; the plan is applied by the caller.

    ``answer``: the operations already asked for (the encode-and-consolidate stage's), checked the same way.
    ``policy``: told to the model, and held against its operations (see :class:`_Applier`).
    """
    rel = relations if relations is not None and relations.enabled else None
    inputs = consolidate.Input(
        episodes=list(episodes),
        observations=list(observations),
        existing=list(existing),
        user_names=list(user_names),
        relations=rel,
        now=now,
        policy=policy,
    )
    # Fitted to the model's budget; with edges when relations are on.
    output = answer if answer is not None else await run_consolidation(model, inputs)
    return _planned(
        output, ctx=ctx, episodes=episodes, observations=observations, existing=existing, aliases=aliases, rel=rel,
        now=now, known_subjects=known_subjects, policy=policy,
    )  # fmt: skip


def _planned(
    output: consolidate.FactsOutput,
    *,
    ctx: MemoryContext,
    episodes: Sequence[Episode],
    observations: Sequence[WorkingEntry],
    existing: Sequence[Fact],
    aliases: Mapping[str, str],
    rel: RelationsOptions | None,
    now: datetime,
    known_subjects: Sequence[str],
    policy: MemoryPolicy | None,
) -> ConsolidationPlan:
    """The plan of ``output`` over ``existing``, which may be rebased on other versions of them."""

    def rebase(current: Sequence[Fact]) -> ConsolidationPlan:
        return _planned(
            output, ctx=ctx, episodes=episodes, observations=observations, existing=current, aliases=aliases,
            rel=rel, now=now, known_subjects=known_subjects, policy=policy,
        )  # fmt: skip

    plan = ConsolidationPlan(rebase=rebase)
    known = {f.id: f for f in existing}
    _Applier(output.operations, plan=plan, ctx=ctx, known=known, aliases=aliases, now=now,
             sources=Sources(episodes, observations, now), policy=policy).run()  # fmt: skip
    if rel is not None and isinstance(output, consolidate.Output):
        subjects = {"user", *known_subjects} | {f.subject for f in existing} | {f.subject for f in plan.facts.values()}
        subjects |= {s for e in episodes for s in e.subjects}
        turns = tuple(dict.fromkeys(t for e in episodes for t in e.provenance))
        plan.edges = _edges(
            output.edges, plan=plan, ctx=ctx, aliases=aliases, rel=rel, known=subjects, now=now, turns=turns
        )
        live = {f.id: f for f in existing if f.status == "active"}
        live.update({f.id: f for f in plan.facts.values()})
        plan.edges = [_supported(e, list(live.values()), now) for e in plan.edges]
    return plan


def _supported(edge: Edge, facts: Sequence[Fact], now: datetime) -> Edge:
    """The edge with its support set, dated by it: the active facts naming both endpoints (those of its turns
    first), else those this batch superseded (the edge is then history: closed with them)."""
    naming = [f for f in facts if mentions(f, edge.source) and mentions(f, edge.target)]
    naming = [f for f in naming if f.status == "active"] or [f for f in naming if f.status == "superseded"]
    turns = set(edge.provenance)
    own = [f for f in naming if turns & set(f.provenance)] or naming
    if not own:
        return edge
    since = min((f.valid_from for f in own if f.valid_from is not None), default=now)
    return edge.model_copy(update={"support": tuple(sorted(f.id for f in own)), "valid_from": since})


class _Applier:
    """Applies an answer's operations to the plan in the order their evidence was said (an operation that
    targets another of the answer's ``#N`` after it), each fact dated by its evidence.

    A fact's labels are the operation's (among the policy's), else those of the observations it came from;
    an add or update whose subject or labels the policy excludes is refused (counted ``policy``)."""

    def __init__(
        self,
        ops: Sequence[consolidate.Operation],
        *,
        plan: ConsolidationPlan,
        ctx: MemoryContext,
        known: dict[str, Fact],
        aliases: Mapping[str, str],
        now: datetime,
        sources: Sources,
        policy: MemoryPolicy | None = None,
    ) -> None:
        self.ops, self.plan, self.ctx, self.known, self.aliases, self.now = ops, plan, ctx, known, aliases, now
        self.sources, self.policy = sources, policy
        self.refs = [self._ref(op.target_id) for op in ops]
        first = [self._evidence(i) for i in range(len(ops))]
        # A change is not said by what it changes: an update of "#N" leaves out what evidenced N.
        self.evidence = [
            self._evidence(i, first[ref].said) if op.op == "update" and ref is not None and ref != i else first[i]
            for i, (op, ref) in enumerate(zip(ops, self.refs, strict=True))
        ]
        self.wrote: dict[int, str | None] = {}  # operation index -> the fact it wrote or reinforced

    def _ref(self, target: str | None) -> int | None:
        """The index of the operation ``target`` names ("#2": the second), when it names one."""
        n = consolidate.operation_ref(target)
        return n - 1 if n is not None and n <= len(self.ops) else None

    def _text(self, i: int, seen: frozenset[int] = frozenset()) -> str:
        """What operation ``i`` states: its text, else its target's."""
        op, ref = self.ops[i], self.refs[i]
        if op.text.strip():
            return op.text
        if ref is not None and ref not in seen and ref != i:
            return self._text(ref, seen | {i})
        target = self.known.get(op.target_id or "")
        return target.text if target else ""

    def _evidence(self, i: int, excluding: Sequence[WorkingEntry] = ()) -> Evidence:
        op = self.ops[i]
        subject = _subject(op.subject, self.aliases) or op.subject
        return self.sources.evidence(self._text(i), subject, op.source_episode_ids, excluding)

    def run(self) -> None:
        for i in sorted(range(len(self.ops)), key=lambda i: (self.evidence[i].since, i)):
            self._run(i, frozenset())

    def _run(self, i: int, stack: frozenset[int]) -> None:
        if i in self.wrote:
            return
        ref = self.refs[i]
        if ref is not None and ref not in stack and ref != i:
            self._run(ref, stack | {i})  # the fact an update changes is written first
        target = None
        if ref is not None:
            wrote = self.wrote.get(ref)
            target = self.plan.facts.get(wrote or "") or self.known.get(wrote or "")
        elif self.ops[i].target_id:
            target = self.known.get(self.ops[i].target_id or "")
            if self.ops[i].op == "update":  # corrected since the model saw it: the update changes what holds now
                target = self._current(target)
        hops = 0
        while self.ops[i].op == "update" and target is not None and hops < len(self.ops):
            # Changed already by an earlier operation of this answer: this one changes what holds since.
            later = self.plan.facts.get(target.superseded_by or "") if target.id in self.plan.facts else None
            target, hops = (later, hops + 1) if later is not None else (target, len(self.ops))
        self.wrote[i] = self._apply(self.ops[i], target, self.evidence[i])

    def _current(self, fact: Fact | None) -> Fact | None:
        """The version of a known fact that holds now (the end of its chain, when the chain is known)."""
        hops = 0
        while fact is not None and fact.status == "superseded" and fact.superseded_by in self.known:
            if (hops := hops + 1) > len(self.known):
                break
            fact = self.known[fact.superseded_by or ""]
        return fact

    def _refuse(self, op: consolidate.Operation, subject: str, reason: str) -> None:
        self.plan.refused.append(Refusal(op=op.op, subject=subject, reason=reason))
        self.plan.count("refused")

    def _apply(self, op: consolidate.Operation, target: Fact | None, evidence: Evidence) -> str | None:
        plan, now = self.plan, self.now
        if op.op == "noop":
            plan.count("noop")
            return None
        subject = _subject(op.subject, self.aliases)
        if subject is None:
            self._refuse(op, op.subject, "non-canonical subject")
            return None
        if op.op in {"reinforce", "update"}:
            if target is None:
                self._refuse(op, subject, f"unknown target {op.target_id!r}")
                return None
            if target.subject != subject:
                self._refuse(op, subject, f"cross-subject {op.op}: {target.subject!r} fact by a {subject!r} operation")
                return None
            if target.status != "active" and target.id not in plan.facts:  # changed since the model saw it
                self._refuse(op, subject, f"target {target.id!r} is {target.status} now")
                return None
        if op.op == "add" and not op.text.strip():
            self._refuse(op, subject, "empty text")
            return None
        episodes, turns, since = evidence.episodes, evidence.turns, evidence.since
        inherited = [c for obs in evidence.said for c in obs.categories]
        labels = self.policy.assigned(op.categories, inherited) if self.policy is not None else ()
        if self.policy is not None and op.op in {"add", "update"} and not self.policy.admits(subject, labels):
            self.plan.count("policy")
            self._refuse(op, subject, "kept out by the memory policy")
            return None
        # Keys the model gave, else those of the observations the fact came from: a model that writes
        # no keys for facts still keeps the observer's.
        keys = retrieval_keys(op.keys or [k for obs in evidence.said for k in obs.keys])
        meta = {"prompt_version": consolidate.STAGE.version, "episodes": episodes}
        if op.op == "reinforce" or (op.op == "update" and target is not None and _same(target.text, op.text)):
            assert target is not None
            fact = plan.facts.get(target.id, target)
            _reinforce(plan, fact, op.confidence, now, turns, episodes, keys, since)
            return fact.id
        text = " ".join(op.text.split())
        new_id = fact_id(self.ctx, subject=subject, text=text)
        current = plan.facts.get(new_id) or self.known.get(new_id)
        if current is not None and current.status == "active":
            _reinforce(plan, current, op.confidence, now, turns, episodes, keys, since)
            return new_id
        if current is not None and current.status == "superseded" and new_id not in plan.facts:
            # One row per text: writing it anew would make a second active version beside its successor.
            self._refuse(op, subject, f"restates {new_id!r}, superseded by {current.superseded_by!r}")
            return None
        fact = Fact.new(
            self.ctx, subject=subject, text=text, now=now, confidence=op.confidence, valid_from=since,
            provenance=turns, metadata=meta, keys=keys, categories=labels,
        )  # fmt: skip
        plan.facts[new_id] = fact
        if op.op == "update" and target is not None:
            _supersede(plan, plan.facts.get(target.id, target), fact, now)
            plan.count("update")
        else:
            plan.count("add")
        return new_id


def _supersede(plan: ConsolidationPlan, old: Fact, new: Fact, now: datetime) -> None:
    """``new`` replaces ``old`` from its ``valid_from``; said before ``old`` held, ``new`` is the history."""
    if old.valid_from is not None and new.valid_from is not None and new.valid_from < old.valid_from:
        past = {"status": "superseded", "valid_to": old.valid_from, "superseded_by": old.id}
        plan.facts[new.id] = new.model_copy(update=past)
        return
    ended = {"status": "superseded", "valid_to": new.valid_from or now, "superseded_by": new.id, "updated_at": now}
    plan.facts[old.id] = old.model_copy(update=ended)


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
    since: datetime | None = None,
) -> None:
    """Reinforce once per distinct episode: a rerun (a crash, a re-encoded session) repeats no evidence.

    A fact stored without keys takes the new ones; keys it has are kept. Evidence older than the fact
    (an imported history) moves its ``valid_from`` back to ``since``.
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
    if since is not None and fact.status == "active" and fact.valid_from is not None and since < fact.valid_from:
        update["valid_from"] = since
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
