"""``system()``: the capability plus the write side. The composition root: the only module of
``memory`` that imports ``pipelines`` (and ``jobs``).

Durability: a turn is journaled before any model work; when a model call fails or never
validates, the turn (or episode) stays pending with its error and ``retry_pending()`` takes it
up later. A permanent failure (a 401, a model that does not exist) records the fingerprint of
the model configuration it happened under and waits until that configuration changes; every
deferral is logged at WARNING. Ids are deterministic and writes are upserts, so a rerun after a
crash duplicates nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Concatenate, Never, ParamSpec, TypeVar

from tiermem.pipelines import (
    LLMStages,
    RulesStages,
    StageModel,
    consolidate_episodes,
    encode_session,
    observe_turn,
    write_digest,
)

from ._blocking import Blocking, run_blocking
from ._capability import MemoryCapability, create_memory_capability
from ._clock import Clock
from ._context import TokenCounter
from ._embedders import Embedder
from ._erasure import EraseReport, Erasure, ForgetReport
from ._errors import ConfigurationError, InvalidArgumentError, InvalidSubjectError, ModelError, error_kind
from ._governance import carry_pins
from ._identity import episode_id, fact_set_fingerprint, turn_id
from ._options import (
    CapabilityPreset,
    DigestOptions,
    EpisodicOptions,
    HygieneOptions,
    RecallOptions,
    SemanticOptions,
    WorkingOptions,
    reject_unknown,
)
from ._portability import ImportReport, Source
from ._records import Episode, Fact, MemoryContext, Message, Turn
from ._results import CaptureResult, ConsolidationResult, DigestResult, RetryReport, SessionResult
from ._store import Store
from ._subjects import canonical_subject
from ._tiers import checked_context, embedded_text
from ._transcripts import DEFAULT_KEEP_ROLES, keep_roles_option, normalize_messages, split_turns

__all__ = [
    "CaptureResult",
    "ConsolidationResult",
    "DigestResult",
    "MemorySystem",
    "RetryReport",
    "SessionResult",
    "system",
]

log = logging.getLogger(__name__)

# Provider keys that mean "a real model is configured"; the first found picks the default model.
_PROVIDER_DEFAULTS = {
    "OPENAI_API_KEY": "openai/gpt-4o-mini",
    "ANTHROPIC_API_KEY": "anthropic/claude-3-5-haiku-latest",
    "GEMINI_API_KEY": "gemini/gemini-2.0-flash",
}

_NO_ERROR: dict[str, Any] = {"error": None, "error_kind": None, "error_config": None}


def _model_config(stages: StageModel) -> str:
    """The stage model's configuration fingerprint (an LLM's covers model, settings and provider env)."""
    fingerprint = getattr(stages, "fingerprint", None)
    return fingerprint if isinstance(fingerprint, str) else stages.name


def _failure(exc: ModelError, config: str) -> dict[str, Any]:
    """What a deferred turn or episode records about its failure."""
    return {"error": str(exc)[:2000], "error_kind": error_kind(exc), "error_config": config}


def _blocked(record: Turn | Episode, config: str) -> bool:
    """Failed permanently under the configuration still in use: a retry would fail the same way."""
    return record.error_kind == "permanent" and record.error_config == config


P = ParamSpec("P")
R = TypeVar("R")


def _read(
    method: Callable[Concatenate[MemoryCapability, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[MemorySystem, P], Coroutine[Any, Any, R]]:
    """The system's ``method``: the capability's, same signature and docstring (delegation, not inheritance)."""

    @functools.wraps(method)
    async def read(self: MemorySystem, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await method(self.capability, *args, **kwargs)

    return read


def _read_sync(method: Callable[Concatenate[MemoryCapability, P], R]) -> Callable[Concatenate[MemorySystem, P], R]:
    """:func:`_read` for the capability's plain methods."""

    @functools.wraps(method)
    def read(self: MemorySystem, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(self.capability, *args, **kwargs)

    return read


def _speaker(messages: Sequence[Message], aliases: Mapping[str, str]) -> str:
    """Who spoke: a named speaker's subject (the user's display names are "user"), else the user."""
    name = next((m.name for m in messages if m.role == "user" and m.name), None)
    if name is None:
        return "user"
    try:
        return canonical_subject(name, aliases=aliases)
    except InvalidSubjectError:
        return "user"


class MemorySystem:
    """The write side (capture, sessions, consolidation, digests) over the read side it holds.

    Holds the capability (its tier repository and relations are where every write goes) and the
    stage model; the read API is the capability's, delegated name by name below.
    """

    def __init__(
        self,
        *,
        capability: MemoryCapability,
        stages: StageModel,
        keep_roles: Collection[str] = DEFAULT_KEEP_ROLES,
    ) -> None:
        self.capability = capability
        self.tiers = capability.tiers
        self.relations = capability.relations
        self.stages = stages
        self.keep_roles = keep_roles_option(keep_roles)
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._scheduler: Any = None
        self._last_turn: dict[str, Turn] = {}
        self.erasure = Erasure(capability.governance, rewrite_digest=self.digest)  # forget rewrites the digest

    # -- the read API, the capability's -----------------------------------------------------

    recall = _read(MemoryCapability.recall)
    format_context = _read(MemoryCapability.format_context)
    add_alias = _read(MemoryCapability.add_alias)
    aliases = _read(MemoryCapability.aliases)
    working_memory = _read(MemoryCapability.working_memory)
    add_working_memory = _read(MemoryCapability.add_working_memory)
    add_episode = _read(MemoryCapability.add_episode)
    recent_episodes = _read(MemoryCapability.recent_episodes)
    facts = _read(MemoryCapability.facts)
    add_semantic_fact = _read(MemoryCapability.add_semantic_fact)
    remember = _read(MemoryCapability.remember)
    set_digest = _read(MemoryCapability.set_digest)
    latest_digest = _read(MemoryCapability.latest_digest)
    connections = _read(MemoryCapability.connections)
    relate = _read(MemoryCapability.relate)
    ego_graph = _read(MemoryCapability.ego_graph)
    tools = _read_sync(MemoryCapability.tools)
    recall_sync = _read_sync(MemoryCapability.recall_sync)
    format_context_sync = _read_sync(MemoryCapability.format_context_sync)
    item = _read_sync(MemoryCapability.item)
    enabled_tiers = _read_sync(MemoryCapability.enabled_tiers)
    get = _read(MemoryCapability.get)
    history = _read(MemoryCapability.history)
    subjects = _read(MemoryCapability.subjects)
    stats = _read(MemoryCapability.stats)
    export = _read(MemoryCapability.export)

    @property
    def store(self) -> Store:
        return self.capability.store

    @property
    def embedder(self) -> Embedder:
        return self.capability.embedder

    @property
    def clock(self) -> Clock:
        return self.capability.clock

    def blocking(self) -> Blocking:
        """A synchronous facade for scripts without asyncio: same methods, no ``await``."""
        return Blocking(self)

    # -- jobs -------------------------------------------------------------------------------

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

    async def _names(self, ctx: MemoryContext) -> tuple[list[str], dict[str, str]]:
        """The user's display names (for the prompts) and every alias of this user."""
        aliases = await run_blocking(self.tiers.aliases, ctx)
        return [name.title() for name, subject in aliases.items() if subject == "user"], aliases

    # -- capture ----------------------------------------------------------------------------

    async def capture(
        self,
        ctx: MemoryContext,
        messages: Sequence[Mapping[str, Any] | Message | Any],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> CaptureResult:
        """After each turn: journal it, then observe it (one model call). Never loses the turn.

        ``messages``: the turn as the model API saw it, OpenAI or litellm shapes (dicts or message
        objects, tool calls and results included); the log keeps the roles in ``keep_roles``, and
        an invalid message raises InvalidArgumentError naming its index before anything is written.
        """
        sid = checked_context(ctx, session="capture").session_id
        assert sid is not None  # checked above
        msgs = normalize_messages(messages, keep_roles=self.keep_roles)
        async with self._lock(ctx):
            seq = await run_blocking(self.tiers.turn_count, ctx, sid)
            previous_id = turn_id(ctx, session_id=sid, seq=seq - 1)
            previous = self._last_turn.get(previous_id)
            if previous is None and seq > 0:
                found = await run_blocking(self.tiers.session_turns, ctx, sid, ids=[previous_id])
                previous = found[0] if found else None
            aliases = await run_blocking(self.tiers.aliases, ctx)
            turn = Turn(
                id=turn_id(ctx, session_id=sid, seq=seq),
                namespace=ctx.namespace,
                user_id=ctx.user_id,
                session_id=sid,
                seq=seq,
                messages=msgs,
                subject=_speaker(msgs, aliases),
                context=" ".join(m.content for m in previous.messages)[-1000:] if previous else "",
                created_at=self.clock.now(),
                metadata=dict(metadata or {}),
            )
            await run_blocking(self.tiers.put_turns, [turn], new=True)
            self._last_turn = {turn.id: turn}  # the next capture's context, without a read
            return await self._observe(ctx, turn)

    async def capture_from_items(
        self, ctx: MemoryContext, items: Sequence[Mapping[str, Any] | Sequence[Mapping[str, Any]]]
    ) -> list[CaptureResult]:
        """A batch: each list is one turn; loose messages start a new turn at every user message.

        The whole batch is validated before the first turn is journaled.
        """
        checked = [normalize_messages(turn, keep_roles=self.keep_roles) for turn in split_turns(items)]
        return [await self.capture(ctx, turn) for turn in checked]

    async def _observe(self, ctx: MemoryContext, turn: Turn) -> CaptureResult:
        names, aliases = await self._names(ctx)
        known = await run_blocking(self.tiers.known_subjects, ctx)
        try:
            observed = await observe_turn(
                self.stages, turn=turn, user_names=names, aliases=aliases, known_subjects=known
            )
        except ModelError as exc:
            update = {**_failure(exc, _model_config(self.stages)), "attempts": turn.attempts + 1}
            failed = turn.model_copy(update=update)
            await run_blocking(self.tiers.put_turns, [failed])
            log.warning("turn %s journaled, observation deferred (%s failure): %s", turn.id, error_kind(exc), exc)
            return CaptureResult(turn=failed, entries=[], deferred=True, error=str(exc), exception=exc)
        await run_blocking(self.tiers.add_working_entries, ctx, observed.entries)
        done = turn.model_copy(update={**_NO_ERROR, "status": "observed", "attempts": turn.attempts + 1})
        await run_blocking(self.tiers.put_turns, [done])
        log.debug("turn %s observed: %d entries", turn.id, len(observed.entries))
        return CaptureResult(turn=done, entries=observed.entries)

    # -- sessions ---------------------------------------------------------------------------

    async def end_session(self, ctx: MemoryContext, session_id: str | None = None) -> SessionResult:
        """Encode the session as an episode (one model call) and close its working memory."""
        checked_context(ctx)
        sid = session_id or ctx.session_id
        if sid is None:
            raise InvalidArgumentError("end_session needs a session_id")
        sctx = ctx.model_copy(update={"session_id": sid})
        async with self._lock(sctx):
            return await self._encode(sctx, sid)

    async def _encode(self, ctx: MemoryContext, sid: str) -> SessionResult:
        turns = await run_blocking(self.tiers.session_turns, ctx, sid)
        if not turns:
            return SessionResult(episode=None)
        existing = await run_blocking(self.tiers.episode, ctx, episode_id(ctx, session_id=sid))
        if existing and existing.status != "failed" and set(existing.provenance) >= {t.id for t in turns}:
            return SessionResult(episode=existing)  # already encoded and nothing new since: no re-queue
        config = _model_config(self.stages)
        for turn in [t for t in turns if t.status == "pending" and not _blocked(t, config)]:
            await self._observe(ctx, turn)  # one more chance before the session closes
        entries = await run_blocking(self.tiers.working_memory, ctx, include_inactive=True)
        names, aliases = await self._names(ctx)
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
                id=episode_id(ctx, session_id=sid), namespace=ctx.namespace, user_id=ctx.user_id, session_id=sid,
                summary="",
                started_at=turns[0].created_at, ended_at=turns[-1].created_at, created_at=now, updated_at=now,
                status="failed", provenance=tuple(t.id for t in turns), **_failure(exc, config),
            )  # fmt: skip
            await run_blocking(self.tiers.add_episode, marker)
            log.warning("session %s: episode encoding deferred (%s failure): %s", sid, error_kind(exc), exc)
            return SessionResult(episode=None, deferred=True, error=str(exc), exception=exc)
        await run_blocking(self.tiers.add_episode, episode)
        closed = [e.model_copy(update={"status": "closed", "updated_at": now}) for e in entries if e.status != "closed"]
        await run_blocking(self.tiers.put_working, closed)
        log.debug("session %s encoded as episode %s (%d turns)", sid, episode.id, len(turns))
        return SessionResult(episode=episode)

    # -- consolidation ----------------------------------------------------------------------

    def _candidate_facts(self, ctx: MemoryContext, episodes: Sequence[Episode], per_episode: int = 20) -> list[Fact]:
        """Existing facts the consolidator should see: the nearest ones of the same subjects (blocking)."""
        found: dict[str, Fact] = {}
        vectors = self.tiers.embed([embedded_text(e) for e in episodes])  # as the episodes are stored
        for episode, vector in zip(episodes, vectors, strict=True):
            for fact in self.tiers.nearest_facts(ctx, vector, subjects=episode.subjects, limit=per_episode):
                found[fact.id] = fact
        return list(found.values())

    async def consolidate(self, ctx: MemoryContext, *, batch_size: int = 4) -> ConsolidationResult:
        """Turn the user's pending episodes into facts (and edges), one model call per batch."""
        checked_context(ctx)
        result = ConsolidationResult()
        config = _model_config(self.stages)
        pending = await run_blocking(self.tiers.episodes, ctx, statuses=["pending"])
        pending = sorted((e for e in pending if not _blocked(e, config)), key=lambda e: (e.started_at, e.id))
        names, aliases = await self._names(ctx)
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]
            existing = await run_blocking(self._candidate_facts, ctx, batch)
            observed = await run_blocking(self.tiers.session_entries, ctx, [e.session_id for e in batch])
            now = self.clock.now()
            try:
                plan = await consolidate_episodes(
                    self.stages, ctx=ctx, episodes=batch, observations=observed, existing=existing, user_names=names,
                    aliases=aliases, relations=self.relations.options, now=now,
                    known_subjects=await run_blocking(self.tiers.known_subjects, ctx),
                )  # fmt: skip
            except ModelError as exc:
                failed = [e.model_copy(update={**_failure(exc, config), "updated_at": now}) for e in batch]
                await run_blocking(self.tiers.put_episodes, failed)
                log.warning("consolidation of %d episodes deferred (%s failure): %s", len(batch), error_kind(exc), exc)
                result.deferred, result.error, result.exception = True, str(exc), exc
                return result
            await run_blocking(self.tiers.put_facts, carry_pins(list(plan.facts.values())))  # a pin outlives updates
            if plan.edges:
                await run_blocking(self.relations.put_edges, ctx, plan.edges)
            # A superseded fact takes the edges it alone supported with it (closed, kept as history).
            await run_blocking(self.relations.close_unsupported_edges, ctx)
            done = [e.model_copy(update={**_NO_ERROR, "status": "consolidated", "updated_at": now}) for e in batch]
            await run_blocking(self.tiers.put_episodes, done)
            result.episodes += len(batch)
            for key, value in plan.counts.items():
                result.counts[key] = result.counts.get(key, 0) + value
            result.refusals += [f"{r.op} {r.subject}: {r.reason}" for r in plan.refused]
            log.debug("consolidated %d episodes: %s, %d refused", len(batch), plan.counts, len(plan.refused))
        return result

    # -- digest -----------------------------------------------------------------------------

    def fact_fingerprint(self, facts: Sequence[Fact]) -> str:
        return fact_set_fingerprint(facts)

    async def digest(self, ctx: MemoryContext) -> DigestResult:
        """Write the user's narrative digest from their active facts and current edges (one model call).

        Superseded facts and closed edges are not shown to the model: the digest states what holds now.
        """
        checked_context(ctx)
        options = self.capability.digest_options
        if options is None:
            return DigestResult(digest=None)
        facts = await run_blocking(self.tiers.facts, ctx)
        if not facts:
            return DigestResult(digest=None)
        now = self.clock.now()
        ranked = sorted(facts, key=lambda f: (-self.item(f, now).confidence, f.id))[: options.max_facts]
        edges = await run_blocking(self.relations.current_edges, ctx)  # empty when relations are off
        names, _ = await self._names(ctx)
        previous = await run_blocking(self.tiers.latest_digest, ctx)
        try:
            text = await write_digest(
                self.stages, facts=ranked, edges=edges, user_names=names, previous=previous.text if previous else None
            )
        except ModelError as exc:
            log.warning("digest deferred (%s failure): %s", error_kind(exc), exc)
            return DigestResult(digest=None, deferred=True, error=str(exc), exception=exc)
        meta = {"fingerprint": self.fact_fingerprint(facts), "model": self.stages.name}
        written = await run_blocking(self.tiers.set_digest, ctx, text, provenance=[f.id for f in ranked], metadata=meta)
        return DigestResult(digest=written)

    # -- retries ----------------------------------------------------------------------------

    async def retry_pending(self, ctx: MemoryContext | None = None) -> RetryReport:
        """Redo the model work that failed: turns, episode encodings, consolidations.

        Work that failed permanently under the model configuration still in use is skipped (and
        counted in ``skipped``): it would fail the same way until the key, model or settings change.
        """
        report = RetryReport()
        config = _model_config(self.stages)
        turns = await run_blocking(self.tiers.pending_turns, checked_context(ctx) if ctx is not None else None)
        for turn in sorted(turns, key=lambda t: (t.session_id, t.seq)):
            if _blocked(turn, config):
                report.skipped += 1
                continue
            tctx = MemoryContext(namespace=turn.namespace, user_id=turn.user_id, session_id=turn.session_id)
            report.turns += 1
            async with self._lock(tctx):
                report.turns_ok += 0 if (await self._observe(tctx, turn)).deferred else 1
        episodes = await run_blocking(self.tiers.unfinished_episodes, ctx)
        users: dict[tuple[str, str], MemoryContext] = {}
        for episode in episodes:
            if _blocked(episode, config):
                report.skipped += 1
                continue
            ectx = MemoryContext(namespace=episode.namespace, user_id=episode.user_id, session_id=episode.session_id)
            if episode.status == "failed":
                report.episodes += 1
                report.episodes_ok += 0 if (await self.end_session(ectx)).deferred else 1
            users[(episode.namespace, episode.user_id)] = ectx
        for uctx in users.values():
            if not (await self.consolidate(uctx)).deferred:
                report.consolidations += 1
        if report.skipped:
            log.warning(
                "%d turns or episodes not retried: they failed permanently under model configuration %s; "
                "fix the configuration (key, model, settings) and they are retried",
                report.skipped,
                config,
            )
        return report

    # -- correct, forget, erase, import (memory/_governance.py, _erasure.py, _portability.py) -

    async def update(self, ctx: MemoryContext, id: str, *, text: str | None = None, subject: str | None = None) -> Fact:
        """Correct a fact: the new version supersedes it; the old one keeps its text and validity as history.

        Edges the old version alone supported close unless the new one still names both endpoints.
        """
        fact = await self.capability.governance.update(ctx, id, text=text, subject=subject)
        await run_blocking(self.relations.close_unsupported_edges, checked_context(ctx))
        return fact

    async def pin(self, ctx: MemoryContext, id: str) -> Fact | Episode:
        """Pin a fact or episode: it never decays, expires, is archived or compacted away."""
        return await self.capability.governance.pin(ctx, id)

    async def unpin(self, ctx: MemoryContext, id: str) -> Fact | Episode:
        """Undo :meth:`pin`: the memory decays again from its last reinforcement."""
        return await self.capability.governance.unpin(ctx, id)

    async def forget(self, ctx: MemoryContext, id: str, *, include_turns: bool = False) -> ForgetReport:
        """Delete one memory (with its older versions) and what was derived only from it; rewrite the digest."""
        return await self.erasure.forget(ctx, id, include_turns=include_turns)

    async def erase_user(self, ctx: MemoryContext) -> EraseReport:
        """Delete every row of the user in every table and purge old versions: the bytes leave the disk.

        Needs the store to itself while it runs: another process on an older table version fails.
        """
        return await self.erasure.erase_user(ctx)

    async def import_(self, ctx: MemoryContext, source: Source) -> ImportReport:
        """Read an export into ``ctx``'s user, re-embedded and re-keyed; importing twice changes nothing."""
        return await self.capability.portability.import_(ctx, source)

    async def fork(self, src: MemoryContext, dst: MemoryContext) -> ImportReport:
        """Copy a user's memory to a new user or namespace; writing to one never changes the other."""
        return await self.capability.portability.fork(src, dst)

    list = _read(MemoryCapability.list)  # last in the class: below it, ``list`` would name this method


def _stages(model: str | StageModel | None, llm_options: Mapping[str, Any]) -> StageModel:
    if model is not None and not isinstance(model, str):
        if not (callable(getattr(model, "run", None)) and hasattr(model, "ledger")):
            raise ConfigurationError(f"model must be a model name or a StageModel, not {type(model).__name__}")
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
    keep_roles: Collection[str] = DEFAULT_KEEP_ROLES,
    store: str | Path | Store | None = None,
    embedder: Embedder | str | None = None,
    embedder_dimensions: int | None = None,
    working: bool | dict[str, Any] | WorkingOptions = True,
    episodic: bool | dict[str, Any] | EpisodicOptions = True,
    semantic: bool | dict[str, Any] | SemanticOptions = True,
    digest: bool | dict[str, Any] | DigestOptions = True,
    hygiene: bool | dict[str, Any] | HygieneOptions = True,
    recall: dict[str, Any] | RecallOptions | None = None,
    preset: str | CapabilityPreset = "default",
    clock: Clock | None = None,
    max_context_tokens: int = 1000,
    token_counter: TokenCounter | None = None,
    **unknown: Never,
) -> MemorySystem:
    """The read side plus the capture pipeline.

    ``model``: any litellm model string, ``"rules"`` for the offline rules model, or a StageModel.
    With none, ``$TIERMEM_MODEL`` or a provider key picks a model; otherwise the rules model runs.
    ``keep_roles``: which roles of a captured transcript the turn log keeps (default: what people
    said, ``{"user", "assistant"}``; add ``"system"``, ``"developer"`` or ``"tool"`` to keep more).
    The other options are those of :func:`create_memory_capability`; an unknown keyword raises
    :class:`ConfigurationError` naming the closest valid one.
    """
    reject_unknown(system, unknown)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ConfigurationError(f"timeout must be a positive number of seconds, not {timeout!r}")
    for name, retries in (("num_retries", num_retries), ("validation_retries", validation_retries)):
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"{name} must be an int >= 0, not {retries!r}")
    llm_options = {"timeout": timeout, "num_retries": num_retries, "validation_retries": validation_retries}
    stages = _stages(model, llm_options)
    capability = create_memory_capability(
        store=store, embedder=embedder, embedder_dimensions=embedder_dimensions, working=working,
        episodic=episodic, semantic=semantic, digest=digest, hygiene=hygiene, recall=recall, preset=preset,
        clock=clock, max_context_tokens=max_context_tokens, token_counter=token_counter,
    )  # fmt: skip
    return MemorySystem(capability=capability, stages=stages, keep_roles=keep_roles)
