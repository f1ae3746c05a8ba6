"""``system()``: the capability plus the write side. The composition root: the only module of
``memory`` that imports ``pipelines`` (and ``jobs``).

Durability: a turn is journaled before any model work; when a model call fails or never
validates, the turn (or episode) stays pending with its error and ``retry_pending()`` takes it
up later. Ids are deterministic and writes are upserts, so a rerun after a crash duplicates
nothing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Any

from tiermem.pipelines import (
    LLMStages,
    RulesStages,
    StageModel,
    consolidate_episodes,
    encode_session,
    episode_id,
    observe_turn,
    write_digest,
)

from ._capability import MemoryCapability, capability_options
from ._errors import ConfigurationError, InvalidArgumentError, InvalidSubjectError, ModelError
from ._identity import stable_id
from ._records import Episode, Fact, MemoryContext, Message, Turn, WorkingEntry
from ._results import CaptureResult, ConsolidationResult, DigestResult, RetryReport, SessionResult
from ._store import Where

__all__ = [
    "CaptureResult",
    "ConsolidationResult",
    "DigestResult",
    "MemorySystem",
    "RetryReport",
    "SessionResult",
    "system",
]

# Provider keys that mean "a real model is configured"; the first found picks the default model.
_PROVIDER_DEFAULTS = {
    "OPENAI_API_KEY": "openai/gpt-4o-mini",
    "ANTHROPIC_API_KEY": "anthropic/claude-3-5-haiku-latest",
    "GEMINI_API_KEY": "gemini/gemini-2.0-flash",
}


def _messages(raw: Sequence[Mapping[str, Any] | Message]) -> tuple[Message, ...]:
    if isinstance(raw, (str, bytes)) or not raw:
        raise InvalidArgumentError("capture needs a non-empty list of messages")
    out = []
    for m in raw:
        if isinstance(m, Message):
            out.append(m)
            continue
        if not isinstance(m, Mapping) or not isinstance(m.get("content"), str):
            raise InvalidArgumentError("each message must be a dict with a string 'content'")
        try:
            out.append(Message(role=m.get("role", "user"), content=m["content"], name=m.get("name")))
        except ValueError as exc:
            raise InvalidArgumentError(f"invalid message: {exc}") from exc
    return tuple(out)


class MemorySystem(MemoryCapability):
    """Everything the capability has, plus capture, sessions, consolidation and digests."""

    def __init__(self, *, stages: StageModel, options: dict[str, Any]) -> None:
        super().__init__(**options)
        self.stages = stages
        self._options = options
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._read_side: MemoryCapability | None = None
        self._scheduler: Any = None
        self._last_turn: dict[str, Turn] = {}

    @property
    def capability(self) -> MemoryCapability:
        """The read side over the same store, for flows that never capture."""
        if self._read_side is None:
            self._read_side = MemoryCapability(**self._options)
        return self._read_side

    def start_jobs(self, scheduler: Any = None, **intervals: Any) -> Any:
        """Run the scheduled jobs in this process (an APScheduler scheduler is made if none is given)."""
        from tiermem.jobs import schedule_jobs

        if self._scheduler is not None:
            raise ConfigurationError("jobs are already running; call stop_jobs() first")
        self._scheduler = schedule_jobs(self, scheduler, **intervals)
        self._scheduler.start()
        return self._scheduler

    def stop_jobs(self, *, wait: bool = True) -> None:
        """Stop the in-process jobs started by :meth:`start_jobs`."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=wait)
            self._scheduler = None

    async def run_worker(
        self,
        stop: asyncio.Event,
        *,
        jobstore_url: str | None = None,
        run_now: bool = False,
        grace: float = 30.0,
        **intervals: Any,
    ) -> int:
        """Run the scheduled jobs on this event loop until ``stop`` is set; returns jobs abandoned.

        Every write is one atomic LanceDB commit and every stage is idempotent, so a job abandoned
        after ``grace`` seconds leaves nothing half-written; the next run redoes its work.
        """
        from tiermem.jobs import schedule_jobs, wait_for_jobs

        scheduler = schedule_jobs(self, jobstore_url=jobstore_url, start_now=run_now, **intervals)
        scheduler.start()
        try:
            await stop.wait()
            scheduler.pause()  # no new runs; the ones in flight get the grace period
            return await wait_for_jobs(grace)
        finally:
            scheduler.shutdown(wait=False)

    def usage(self) -> dict[str, dict[str, float]]:
        """Model usage per stage: calls, retries, failures, tokens, cost, latency."""
        return self.stages.ledger.snapshot()

    def _lock(self, ctx: MemoryContext) -> asyncio.Lock:
        key = (ctx.namespace, ctx.user_id, ctx.session_id or "")
        return self._locks.setdefault(key, asyncio.Lock())

    def _session_where(self, ctx: MemoryContext, session_id: str) -> Where:
        return Where(eq={**self.scope(ctx), "session_id": session_id})

    @staticmethod
    def _turn_id(ctx: MemoryContext, session_id: str, seq: int) -> str:
        return stable_id("turn", ctx.namespace, ctx.user_id, session_id, str(seq))

    def _speaker(self, ctx: MemoryContext, messages: Sequence[Message]) -> str:
        """Who spoke: a named speaker's subject (the user's display names are "user"), else the user."""
        name = next((m.name for m in messages if m.role == "user" and m.name), None)
        if name is None:
            return "user"
        try:
            return self.canonical(name, self.aliases_sync(ctx))
        except InvalidSubjectError:
            return "user"

    def _names(self, ctx: MemoryContext) -> tuple[list[str], dict[str, str]]:
        aliases = self.aliases_sync(ctx)
        return [name.title() for name, subject in aliases.items() if subject == "user"], aliases

    # -- capture ----------------------------------------------------------------------------

    async def capture(
        self,
        ctx: MemoryContext,
        messages: Sequence[Mapping[str, Any] | Message],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> CaptureResult:
        """After each turn: journal it, then observe it (one model call). Never loses the turn."""
        if ctx.session_id is None:
            raise InvalidArgumentError("capture needs a MemoryContext with a session_id")
        msgs = _messages(messages)
        async with self._lock(ctx):
            where = self._session_where(ctx, ctx.session_id)
            seq = await self._run(self.store.count, "turns", where)
            previous = self._last_turn.get(self._turn_id(ctx, ctx.session_id, seq - 1))
            if previous is None and seq > 0:
                found = await self._run(self.store.get, "turns", where, [self._turn_id(ctx, ctx.session_id, seq - 1)])
                previous = found[0] if found else None
            turn = Turn(
                id=self._turn_id(ctx, ctx.session_id, seq),
                namespace=ctx.namespace,
                user_id=ctx.user_id,
                session_id=ctx.session_id,
                seq=seq,
                messages=msgs,
                subject=self._speaker(ctx, msgs),
                context=" ".join(m.content for m in previous.messages)[-1000:] if previous else "",
                created_at=self.clock.now(),
                metadata=dict(metadata or {}),
            )
            await self._run(self.put_turns_sync, [turn], new=True)
            self._last_turn = {turn.id: turn}  # the next capture's context, without a read
            return await self._observe(ctx, turn)

    async def capture_from_items(
        self, ctx: MemoryContext, items: Sequence[Mapping[str, Any] | Sequence[Mapping[str, Any]]]
    ) -> list[CaptureResult]:
        """A batch: each list is one turn; loose messages start a new turn at every user message.

        The whole batch is validated before the first turn is journaled.
        """
        turns: list[list[Mapping[str, Any]]] = []
        for item in items:
            if isinstance(item, Mapping):
                if item.get("role", "user") == "user" or not turns:
                    turns.append([])
                turns[-1].append(item)
            else:
                turns.append(list(item))
        checked = [_messages(turn) for turn in turns]
        return [await self.capture(ctx, turn) for turn in checked]

    async def _observe(self, ctx: MemoryContext, turn: Turn) -> CaptureResult:
        names, aliases = self._names(ctx)
        known = await self._run(self.known_subjects_sync, ctx)
        try:
            observed = await observe_turn(
                self.stages, turn=turn, user_names=names, aliases=aliases, known_subjects=known
            )
        except ModelError as exc:
            failed = turn.model_copy(update={"error": str(exc)[:2000], "attempts": turn.attempts + 1})
            await self._run(self.put_turns_sync, [failed])
            return CaptureResult(turn=failed, entries=[], deferred=True, error=str(exc))
        await self._run(self.add_working_entries_sync, ctx, observed.entries)
        done = turn.model_copy(update={"status": "observed", "error": None, "attempts": turn.attempts + 1})
        await self._run(self.put_turns_sync, [done])
        return CaptureResult(turn=done, entries=observed.entries)

    # -- sessions ---------------------------------------------------------------------------

    async def end_session(self, ctx: MemoryContext, session_id: str | None = None) -> SessionResult:
        """Encode the session as an episode (one model call) and close its working memory."""
        sid = session_id or ctx.session_id
        if sid is None:
            raise InvalidArgumentError("end_session needs a session_id")
        sctx = ctx.model_copy(update={"session_id": sid})
        async with self._lock(sctx):
            return await self._encode(sctx, sid)

    async def _encode(self, ctx: MemoryContext, sid: str) -> SessionResult:
        turns: list[Turn] = sorted(
            await self._run(self.store.query, "turns", self._session_where(ctx, sid)), key=lambda t: t.seq
        )
        if not turns:
            return SessionResult(episode=None)
        existing = await self._run(self.store.get, "episodes", Where(eq=self.scope(ctx)), [episode_id(ctx, sid)])
        if existing and existing[0].status != "failed" and set(existing[0].provenance) >= {t.id for t in turns}:
            return SessionResult(episode=existing[0])  # already encoded and nothing new since: no re-queue
        for turn in [t for t in turns if t.status == "pending"]:
            await self._observe(ctx, turn)  # one more chance before the session closes
        entries = await self._run(self.working_memory_sync, ctx, include_inactive=True)
        names, aliases = self._names(ctx)
        now = self.clock.now()
        try:
            episode = await encode_session(
                self.stages,
                ctx=ctx,
                session_id=sid,
                entries=entries,
                turns=turns,
                user_names=names,
                aliases=aliases,
                now=now,
            )
        except ModelError as exc:
            marker = Episode(
                id=episode_id(ctx, sid), namespace=ctx.namespace, user_id=ctx.user_id, session_id=sid, summary="",
                started_at=turns[0].created_at, ended_at=turns[-1].created_at, created_at=now, updated_at=now,
                status="failed", error=str(exc)[:2000], provenance=tuple(t.id for t in turns),
            )  # fmt: skip
            await self._run(self.add_episode_sync, marker)
            return SessionResult(episode=None, deferred=True, error=str(exc))
        await self._run(self.add_episode_sync, episode)
        closed = [e.model_copy(update={"status": "closed", "updated_at": now}) for e in entries if e.status != "closed"]
        if closed:
            await self._run(self.store.upsert, "working", closed, self.embed([e.text for e in closed]))
        return SessionResult(episode=episode)

    # -- consolidation ----------------------------------------------------------------------

    def _candidate_facts(self, ctx: MemoryContext, episodes: Sequence[Episode], per_episode: int = 20) -> list[Fact]:
        """Existing facts the consolidator should see: the nearest ones of the same subjects."""
        found: dict[str, Fact] = {}
        vectors = self.embed([e.summary for e in episodes])
        for episode, vector in zip(episodes, vectors, strict=True):
            where = Where(eq=self.scope(ctx), isin={"status": ["active"], "subject": list(episode.subjects)})
            for hit in self.store.vector_search("facts", vector, where, limit=per_episode):
                found[hit.record.id] = hit.record
        return list(found.values())

    async def consolidate(self, ctx: MemoryContext, *, batch_size: int = 4) -> ConsolidationResult:
        """Turn the user's pending episodes into facts (and edges), one model call per batch."""
        result = ConsolidationResult()
        pending = await self._run(self.episodes_sync, ctx, statuses=["pending"])
        pending.sort(key=lambda e: (e.started_at, e.id))
        names, aliases = self._names(ctx)
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]
            existing = await self._run(self._candidate_facts, ctx, batch)
            sessions = Where(eq=self.scope(ctx), isin={"session_id": [e.session_id for e in batch]})
            observed: list[WorkingEntry] = await self._run(self.store.query, "working", sessions)
            observed.sort(key=lambda e: (e.session_id, e.seq, e.id))
            now = self.clock.now()
            try:
                plan = await consolidate_episodes(
                    self.stages, ctx=ctx, episodes=batch, observations=observed, existing=existing, user_names=names,
                    aliases=aliases, relations=self.relations, now=now,
                    known_subjects=await self._run(self.known_subjects_sync, ctx),
                )  # fmt: skip
            except ModelError as exc:
                failed = [e.model_copy(update={"error": str(exc)[:2000], "updated_at": now}) for e in batch]
                await self._run(self.store.upsert, "episodes", failed, self.embed([e.summary for e in failed]))
                result.deferred, result.error = True, str(exc)
                return result
            await self._run(self.put_facts_sync, list(plan.facts.values()))
            if plan.edges:
                await self._run(self.put_edges_sync, ctx, plan.edges)
            done = [e.model_copy(update={"status": "consolidated", "error": None, "updated_at": now}) for e in batch]
            await self._run(self.store.upsert, "episodes", done, self.embed([e.summary for e in done]))
            result.episodes += len(batch)
            for key, value in plan.counts.items():
                result.counts[key] = result.counts.get(key, 0) + value
            result.refusals += [f"{r.op} {r.subject}: {r.reason}" for r in plan.refused]
        return result

    # -- digest -----------------------------------------------------------------------------

    def fact_fingerprint(self, facts: Sequence[Fact]) -> str:
        return stable_id("facts", *sorted(f"{f.id}@{f.updated_at.isoformat()}" for f in facts))

    async def digest(self, ctx: MemoryContext) -> DigestResult:
        """Write the user's narrative digest from their facts (one model call)."""
        if self.digest_options is None:
            return DigestResult(digest=None)
        facts = await self._run(self.facts_sync, ctx)
        if not facts:
            return DigestResult(digest=None)
        now = self.clock.now()
        ranked = sorted(facts, key=lambda f: (-self.item(f, now).confidence, f.id))[: self.digest_options.max_facts]
        edges = await self._run(self.edges_sync, ctx) if self.relations else []
        names, _ = self._names(ctx)
        previous = await self._run(self.latest_digest_sync, ctx)
        try:
            text = await write_digest(
                self.stages, facts=ranked, edges=edges, user_names=names, previous=previous.text if previous else None
            )
        except ModelError as exc:
            return DigestResult(digest=None, deferred=True, error=str(exc))
        meta = {"fingerprint": self.fact_fingerprint(facts), "model": self.stages.name}
        written = await self._run(self.set_digest_sync, ctx, text, provenance=[f.id for f in ranked], metadata=meta)
        return DigestResult(digest=written)

    # -- retries ----------------------------------------------------------------------------

    async def retry_pending(self, ctx: MemoryContext | None = None) -> RetryReport:
        """Redo the model work that failed: turns, episode encodings, consolidations."""
        report = RetryReport()
        scope = self.scope(ctx) if ctx else {}
        turns: list[Turn] = await self._run(self.store.query, "turns", Where(eq=scope, isin={"status": ["pending"]}))
        for turn in sorted(turns, key=lambda t: (t.session_id, t.seq)):
            tctx = MemoryContext(namespace=turn.namespace, user_id=turn.user_id, session_id=turn.session_id)
            report.turns += 1
            async with self._lock(tctx):
                report.turns_ok += 0 if (await self._observe(tctx, turn)).deferred else 1
        episodes: list[Episode] = await self._run(
            self.store.query, "episodes", Where(eq=scope, isin={"status": ["failed", "pending"]})
        )
        users: dict[tuple[str, str], MemoryContext] = {}
        for episode in episodes:
            ectx = MemoryContext(namespace=episode.namespace, user_id=episode.user_id, session_id=episode.session_id)
            if episode.status == "failed":
                report.episodes += 1
                report.episodes_ok += 0 if (await self.end_session(ectx)).deferred else 1
            users[(episode.namespace, episode.user_id)] = ectx
        for uctx in users.values():
            if not (await self.consolidate(uctx)).deferred:
                report.consolidations += 1
        return report


def _stages(model: str | StageModel | None, llm_options: Mapping[str, Any]) -> StageModel:
    if model is not None and not isinstance(model, str):
        return model
    if model is None:
        model = os.environ.get("TIERMEM_MODEL") or next(
            (default for key, default in _PROVIDER_DEFAULTS.items() if os.environ.get(key)), "rules"
        )
    if model == "rules":
        return RulesStages()
    from ._llm import LLM

    return LLMStages(LLM(model, **llm_options))


def system(
    *,
    model: str | StageModel | None = None,
    timeout: float = 60.0,
    num_retries: int = 2,
    validation_retries: int = 2,
    **options: Any,
) -> MemorySystem:
    """The read side plus the capture pipeline.

    ``model``: any litellm model string, ``"rules"`` for the offline rules model, or a StageModel.
    With none, ``$TIERMEM_MODEL`` or a provider key picks a model; otherwise the rules model runs.
    Other options are those of :func:`create_memory_capability`.
    """
    if timeout <= 0 or num_retries < 0 or validation_retries < 0:
        raise ConfigurationError("timeout must be positive; retries must be >= 0")
    llm_options = {"timeout": timeout, "num_retries": num_retries, "validation_retries": validation_retries}
    return MemorySystem(stages=_stages(model, llm_options), options=capability_options(**options))
