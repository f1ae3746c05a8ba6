"""Consolidation and the digest (part of the composition root).

Both run under a per-user lease kept in the store, so two workers (or an app and a worker) never
consolidate the same episodes twice or pay for the same model call twice: the second finds the
lease held and returns ``busy``, or finds nothing pending once the first is done. A fact is
reinforced once per distinct episode, so a rerun after a crash does not reinforce its own facts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from tiermem.pipelines import (
    PROVISIONAL,
    ConsolidationPlan,
    StageModel,
    consolidate_episodes,
    encode_and_consolidate,
    kept_edges,
    kept_facts,
    write_digest,
)

from .._blocking import run_blocking
from .._clock import Clock
from .._errors import EmbedderError, ModelError, error_kind
from .._govern import carry_pins
from .._identity import fact_set_fingerprint, lease_key
from .._policy import MemoryPolicy, policy_fingerprint
from .._read import MemoryCapability
from .._records import Digest, Edge, Episode, Fact, MemoryContext, Turn, consolidation_order
from .._results import ConsolidationResult, DigestResult
from .._retries import NO_ERROR, RetryPolicy, blocked, due, model_config
from .._store import Leases, Where, user_writes
from .._text import loggable
from .._tiers import embedded_text, scope
from ._sessions import held

__all__ = ["Consolidation", "digest_current"]

log = logging.getLogger(__name__)

_REBASES = 3  # rounds of re-reading what a rebased plan writes


def _extension(episode: Episode) -> Episode:
    """An extended episode as the consolidator sees it: only the summary of the turns added since it was
    consolidated (the rest would propose again what was consolidated)."""
    return episode.model_copy(update={"summary": str(episode.metadata["extension"])})


def _summarised(episode: Episode, written: Episode) -> Episode:
    """``episode`` with the summary the combined stage wrote (``written`` is the episode as shown: an extended
    one's extension only, whose summary is appended to what was consolidated before)."""
    if not episode.metadata.get(PROVISIONAL) or written.metadata.get(PROVISIONAL):
        return episode  # not provisional, or the model left it out: its summary stays (and its mark)
    extension = str(episode.metadata.get("extension", ""))
    summary, salience = written.summary, written.salience
    if extension:
        base = episode.summary.removesuffix(extension).rstrip()
        summary, salience = f"{base} {summary}".strip(), max(episode.salience, salience)
    # Ordered as re-encoding would have them: an extension's after the episode's, else the encoder's first.
    pair = (episode.subjects, written.subjects) if extension else (written.subjects, episode.subjects)
    subjects = tuple(dict.fromkeys([*pair[0], *pair[1]]))
    return episode.model_copy(
        update={"summary": summary, "subjects": subjects, "salience": salience, "metadata": written.metadata}
    )


class Consolidation:
    """Episodes -> facts and edges; facts -> the digest."""

    def __init__(
        self,
        *,
        capability: MemoryCapability,
        stages: StageModel,
        clock: Clock,
        leases: Leases,
        holder: str,
        retries: RetryPolicy,
        policy: MemoryPolicy | None = None,
    ) -> None:
        self.policy = policy
        self.capability = capability
        self.tiers = capability.tiers
        self.relations = capability.relations
        self.stages = stages
        self.clock = clock
        self.leases = leases
        self.holder = holder
        self.retries = retries

    def _candidate_facts(self, ctx: MemoryContext, episodes: Sequence[Episode], per_episode: int = 20) -> list[Fact]:
        """Existing facts the consolidator should see: the nearest ones of the same subjects (blocking)."""
        found: dict[str, Fact] = {}
        vectors = self.tiers.embed([embedded_text(e) for e in episodes])  # as the episodes are stored
        for episode, vector in zip(episodes, vectors, strict=True):
            for fact in self.tiers.nearest_facts(ctx, vector, subjects=episode.subjects, limit=per_episode):
                found[fact.id] = fact
        return list(found.values())

    def _unconsolidated_turns(self, ctx: MemoryContext, batch: Sequence[Episode]) -> list[Turn]:
        """The turns of the batch's provisional episodes that no consolidation has seen (blocking)."""
        wanted: dict[str, list[str]] = {}
        for episode in (e for e in batch if e.metadata.get(PROVISIONAL)):
            seen = set(episode.metadata.get("consolidated_turns", []))
            wanted.setdefault(episode.session_id, []).extend(t for t in episode.provenance if t not in seen)
        ids = [t for session in wanted.values() for t in session]
        found = self.tiers.store.get("turns", Where(eq=scope(ctx)), ids) if ids else []  # one read
        by_session = {sid: [t for t in found if t.session_id == sid] for sid in wanted}
        # In the batch's order, each session's turns in order (as Tiers.session_turns gives them).
        return [t for sid in wanted for t in sorted(by_session[sid], key=lambda t: (t.seq, t.created_at, t.id))]

    def _write_plan(
        self, ctx: MemoryContext, plan: ConsolidationPlan, seen: Sequence[Fact], dated: bool
    ) -> ConsolidationPlan:
        """Write ``plan`` rebased on the current versions of the facts it changes (blocking; the plan written).

        Under the user's write lease, from the read to the commit: a correction, pin, feedback or
        janitor pass made during the model call is built on (an update of a fact corrected meanwhile
        changes what holds now; a reinforcement of it is refused), never overwritten.
        """
        with user_writes(self.tiers.store, ctx):
            plan = self._rebased(ctx, plan, seen)
            facts = carry_pins(list(plan.facts.values()))  # a pin outlives updates
            if dated:  # dated by the history, taken in now: decay counts from now (``decay_start``)
                facts = [f.model_copy(update={"stored_at": self.clock.now()}) for f in facts]
            self.tiers.put_facts(facts)
            if plan.edges:
                self.relations.put_edges(ctx, plan.edges)
            # A superseded fact takes the edges it alone supported with it (closed, kept as history).
            self.relations.close_unsupported_edges(ctx)
        return plan

    def _rebased(self, ctx: MemoryContext, plan: ConsolidationPlan, seen: Sequence[Fact]) -> ConsolidationPlan:
        """``plan`` over the stored versions of the facts it was planned on or writes (and their successors)."""
        based = {f.id: f for f in seen}
        ids = set(based) | set(plan.facts)
        for _ in range(_REBASES):
            current = self._current_facts(ctx, ids)
            if plan.rebase is None or all(current.get(i) == based.get(i) for i in ids):
                return plan  # nothing it read or writes changed since
            plan, based = plan.rebase(list(current.values())), current
            if set(plan.facts) <= ids:
                return plan
            ids |= set(plan.facts)  # it writes a fact it has not read (a text stored already?): read that too
        return plan

    def _current_facts(self, ctx: MemoryContext, ids: set[str]) -> dict[str, Fact]:
        """The stored facts of ``ids`` and the versions that superseded them, by id."""
        found: dict[str, Fact] = {}
        wanted = set(ids)
        for _ in range(_REBASES * 4):  # chains are short; bounded all the same
            if not wanted:
                break
            for fact in self.tiers.store.get("facts", Where(eq=scope(ctx)), sorted(wanted)):
                found[fact.id] = fact
            wanted = {f.superseded_by for f in found.values() if f.superseded_by is not None} - set(found)
        return found

    async def consolidate(
        self,
        ctx: MemoryContext,
        *,
        batch_size: int = 4,
        limit: int | None = None,
        due_only: bool = False,
        include_parked: bool = False,
        policy: MemoryPolicy | None = None,
    ) -> ConsolidationResult:
        """Turn the user's pending episodes into facts (and edges), one model call per batch.

        ``limit``: at most this many episodes, the earliest first (the rest stay pending).
        ``policy``: this call's override of the system's policy (the fields it sets replace the system's).
        """
        async with held(self.leases, lease_key("consolidate", ctx), holder=self.holder) as lease:
            if lease is None:
                return ConsolidationResult(busy=True)
            return await self._consolidate(
                ctx, batch_size=batch_size, limit=limit, due_only=due_only, include_parked=include_parked,
                policy=self.chosen_policy(policy),
            )  # fmt: skip

    async def _consolidate(
        self,
        ctx: MemoryContext,
        *,
        batch_size: int,
        limit: int | None,
        due_only: bool,
        include_parked: bool,
        policy: MemoryPolicy | None,
    ) -> ConsolidationResult:
        result = ConsolidationResult()
        config, now = model_config(self.stages), self.clock.now()
        statuses = ["pending", "parked"] if include_parked else ["pending"]
        pending = await run_blocking(self.tiers.episodes, ctx, statuses=statuses)
        pending = [e for e in pending if not blocked(e, config) and (due(e, now) or not due_only)]
        pending.sort(key=consolidation_order)
        pending = pending if limit is None else pending[:limit]
        aliases = await run_blocking(self.tiers.aliases, ctx)
        names = [name.title() for name, subject in aliases.items() if subject == "user"]
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]
            existing = await run_blocking(self._candidate_facts, ctx, batch)
            observed = await run_blocking(self.tiers.session_entries, ctx, [e.session_id for e in batch])
            # A re-encoded episode (turns observed late) brings only its new observations: the others
            # were consolidated before and would be proposed again.
            seen = {t for e in batch for t in e.metadata.get("consolidated_turns", [])}
            observed = [o for o in observed if not o.provenance or not set(o.provenance) <= seen]
            shown = [_extension(e) if e.metadata.get("extension") else e for e in batch]
            # Facts are dated by their evidence: an imported history's facts carry its dates.
            dated = all(e.metadata.get("dated") for e in batch)
            now = max(e.ended_at for e in batch) if dated else self.clock.now()
            summarised = list(batch)  # as written once consolidated: with the model's summaries, if asked for
            try:
                known = await run_blocking(self.tiers.known_subjects, ctx)
                if any(e.metadata.get(PROVISIONAL) for e in batch):  # one call summarises and consolidates
                    encoded = await encode_and_consolidate(
                        self.stages, ctx=ctx, episodes=shown, observations=observed, existing=existing,
                        user_names=names, aliases=aliases, relations=self.relations.options, now=now,
                        known_subjects=known, turns=await run_blocking(self._unconsolidated_turns, ctx, batch),
                        policy=policy,
                    )  # fmt: skip
                    plan = encoded.plan
                    summarised = [_summarised(e, w) for e, w in zip(batch, encoded.episodes, strict=True)]
                else:
                    plan = await consolidate_episodes(
                        self.stages, ctx=ctx, episodes=shown, observations=observed, existing=existing,
                        user_names=names, aliases=aliases, relations=self.relations.options, now=now,
                        known_subjects=known, policy=policy,
                    )  # fmt: skip
                plan = await run_blocking(self._write_plan, ctx, plan, existing, dated)
            except (ModelError, EmbedderError) as exc:
                failed = [
                    self.retries.failed(e, exc, config=config, now=self.clock.now(), parked_status="parked")
                    for e in batch
                ]
                await run_blocking(self.tiers.put_episodes, failed)
                log.warning(
                    "consolidation of %d episodes deferred (%s failure): %s", len(batch), error_kind(exc), loggable(exc)
                )
                result.deferred, result.error, result.exception = True, str(exc), exc
                return result
            done = [
                e.model_copy(
                    update={
                        **NO_ERROR, "attempts": 0, "status": "consolidated", "updated_at": now,
                        "metadata": {
                            **{k: v for k, v in e.metadata.items() if k != "extension"},
                            "consolidated_turns": list(e.provenance),
                        },
                    }
                )
                for e in summarised
            ]  # fmt: skip
            await run_blocking(self.tiers.put_episodes, done)  # re-embedded: an episode's vector is its summary
            result.episodes += len(batch)
            for name, value in plan.counts.items():
                result.counts[name] = result.counts.get(name, 0) + value
            result.refusals += [f"{r.op} {r.subject}: {r.reason}" for r in plan.refused]
            log.debug("consolidated %d episodes: %s, %d refused", len(batch), plan.counts, len(plan.refused))
        return result

    def chosen_policy(self, policy: MemoryPolicy | None) -> MemoryPolicy | None:
        """The policy a call runs under: the system's, with the call's override over it."""
        return policy if self.policy is None else self.policy.overridden_by(policy)

    async def digest(self, ctx: MemoryContext, *, policy: MemoryPolicy | None = None) -> DigestResult:
        """Write the user's narrative digest from their active facts and current edges (one model call; more, in
        parts, for facts too many for the model's window).

        Superseded facts and closed edges are not shown to the model: the digest states what holds now.
        Nor are facts the memory policy keeps out (``policy``: this call's override of the system's), and
        the previous digest only when it was written under the same policy.
        No call when nothing the latest digest was written from changed (its policy included): it is
        returned, ``unchanged``.
        """
        options = self.capability.digest_options
        if options is None:
            return DigestResult(digest=None)
        policy = self.chosen_policy(policy)
        mark = policy_fingerprint(policy)
        current = await self._current_digest(ctx, mark)  # checked before the lease too: most users have no news
        if current is not None:
            return DigestResult(digest=current, unchanged=True)
        async with held(self.leases, lease_key("digest", ctx), holder=self.holder) as lease:
            if lease is None:
                return DigestResult(digest=None, busy=True)
            facts = await run_blocking(self.tiers.facts, ctx)
            if not facts:
                return DigestResult(digest=None)
            edges = await run_blocking(self.relations.current_edges, ctx)  # empty when relations are off
            previous = await run_blocking(self.tiers.latest_digest, ctx)
            if digest_current(previous, facts, edges, mark):  # another process wrote it while we waited
                return DigestResult(digest=previous, unchanged=True)
            now = self.clock.now()
            # The digest reads at most max_facts of those the policy keeps: pinned ones first, then the most
            # confident (decayed to now).
            kept = kept_facts(policy, facts)
            kept_relations = kept_edges(policy, edges, facts, kept)  # not those only kept-out facts support
            ranked = sorted(kept, key=lambda f: (not f.pinned, -self.capability.item(f, now).confidence, f.id))
            ranked = ranked[: options.max_facts]
            aliases = await run_blocking(self.tiers.aliases, ctx)
            names = [name.title() for name, subject in aliases.items() if subject == "user"]
            try:
                written_text = await write_digest(
                    self.stages, facts=ranked, edges=kept_relations, user_names=names, policy=policy,
                    # one written under another policy may say what this one keeps out
                    previous=previous.text if previous and _policy_mark(previous) == mark else None,
                )  # fmt: skip
            except (ModelError, EmbedderError) as exc:
                log.warning("digest deferred (%s failure): %s", error_kind(exc), loggable(exc))
                return DigestResult(digest=None, deferred=True, error=str(exc), exception=exc)
            meta = {
                "fingerprint": fact_set_fingerprint(facts), "edges": fact_set_fingerprint(edges),
                "model": self.stages.name, "calls": written_text.calls, "parts": written_text.parts,
                "facts_left_out": len(kept) - len(ranked), "facts_kept_out": len(facts) - len(kept), "policy": mark,
            }  # fmt: skip
            written = await run_blocking(
                self.tiers.set_digest, ctx, written_text.text, provenance=[f.id for f in ranked], metadata=meta
            )
            return DigestResult(digest=written)

    async def _current_digest(self, ctx: MemoryContext, mark: str) -> Digest | None:
        """The latest digest when it is still current under the policy ``mark`` (see :func:`digest_current`)."""
        latest = await run_blocking(self.tiers.latest_digest, ctx)
        if latest is None:
            return None
        facts = await run_blocking(self.tiers.facts, ctx)
        edges = await run_blocking(self.relations.current_edges, ctx)
        return latest if digest_current(latest, facts, edges, mark) else None


def _policy_mark(digest: Digest) -> str:
    """The fingerprint of the policy ``digest`` was written under ("" for none, and for digests older than it)."""
    return str(digest.metadata.get("policy", ""))


def digest_current(latest: Digest | None, facts: Sequence[Fact], edges: Sequence[Edge], policy: str = "") -> bool:
    """Whether ``latest`` still says what a rewrite would be given: no active fact came, went or changed since
    (its fingerprint), every fact it was written from is still active (its provenance), no current edge
    changed (a digest written before edges were fingerprinted is judged on its facts), and it was written
    under the memory policy whose :func:`~tiermem.memory._policy.policy_fingerprint` is ``policy``."""
    if latest is None or not facts or latest.metadata.get("fingerprint") != fact_set_fingerprint(facts):
        return False
    if _policy_mark(latest) != policy:
        return False
    if not set(latest.provenance) <= {f.id for f in facts}:
        return False
    return str(latest.metadata.get("edges", fact_set_fingerprint(edges))) == fact_set_fingerprint(edges)
