"""``MemorySystem``: the write side (capture, sessions, consolidation, digests) over the read side it holds.

A part of the composition root (:mod:`._system` builds it): with ``_capture``, ``_sessions`` and
``_consolidation`` (its parts), the only modules of ``memory`` that import ``pipelines`` (and ``jobs``).

Nothing lost, nothing doubled: a turn is journaled exactly once before any model work (by its
idempotency key); when a model call fails or never validates the turn (or episode) stays pending
with its error, and ``retry_pending()`` takes it up later, with bounded attempts per item (then it
is parked, visible in ``stats()``, and retried when asked). Stages several processes may run hold
a per-user lease kept in the store, and every write is an idempotent upsert.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Concatenate, ParamSpec, TypeVar, cast

from tiermem.pipelines import StageModel, redact_text

from .._blocking import Blocking
from .._clock import Clock
from .._delegation import delegate, delegate_async
from .._embed import Embedder
from .._errors import ConfigurationError, InvalidArgumentError
from .._govern import Erasure
from .._identity import fact_set_fingerprint
from .._policy import MemoryPolicy, policy_of
from .._read import MemoryCapability
from .._records import Fact, MemoryContext, Turn
from .._results import CaptureResult, ConsolidationResult, DigestResult, SessionResult
from .._retries import RetryPolicy
from .._scope import checked_context
from .._store import Leases, Store
from .._tools import Toolset
from .._transcripts import DEFAULT_KEEP_ROLES, keep_roles_option, normalize_messages, split_turns
from ._background import BackgroundObserver
from ._blocking_system import BlockingMemorySystem
from ._capture import Capture
from ._consolidation import Consolidation
from ._conversation_import import OBSERVE_WINDOW, Conversation, HistoryProgress, HistoryReport, import_conversations
from ._fencing import fenced as _fenced
from ._governed_writes import GovernedWrites
from ._ingest import Ingestion
from ._job_runner import JobRunner
from ._pending import PendingRetries
from ._sessions import Sessions, holder_id
from ._write_tools import agent_tools

__all__ = ["MemorySystem"]

P = ParamSpec("P")
R = TypeVar("R")


def _read(
    method: Callable[Concatenate[MemoryCapability, P], Awaitable[R]],
) -> Callable[Concatenate[MemorySystem, P], Coroutine[object, None, R]]:
    """The system's ``method``: the capability's, same signature and docstring (delegation, not inheritance)."""
    return delegate_async("capability", method)


def _read_sync(method: Callable[Concatenate[MemoryCapability, P], R]) -> Callable[Concatenate[MemorySystem, P], R]:
    """:func:`_read` for the capability's plain methods."""
    return delegate("capability", method)


class MemorySystem:
    """The write side (capture, sessions, consolidation, digests) over the read side it holds.

    Holds the capability (its tier repository and relations are where every write goes), the
    stage model and the write side's parts; the read API is the capability's, delegated name by
    name below.
    """

    def __init__(
        self,
        *,
        capability: MemoryCapability,
        stages: StageModel,
        keep_roles: Collection[str] = DEFAULT_KEEP_ROLES,
        retries: RetryPolicy | None = None,
        policy: MemoryPolicy | None = None,
    ) -> None:
        self.capability = capability
        self.policy = policy_of(policy)
        """What the write side remembers and leaves out (``system(policy=..., instructions=..., categories=...)``)."""
        capability.policy = self.policy  # the agent's tools obey it too
        self.tiers = capability.tiers
        self.relations = capability.relations
        self.stages = stages
        self.keep_roles = keep_roles_option(keep_roles)
        self.retries = retries or RetryPolicy()
        self.holder = holder_id()
        self.leases = Leases(capability.store)
        self._capture = Capture(
            tiers=self.tiers, stages=stages, clock=capability.clock, keep_roles=self.keep_roles, retries=self.retries,
            policy=self.policy,
        )  # fmt: skip
        self._sessions = Sessions(
            tiers=self.tiers, stages=stages, clock=capability.clock, capture=self._capture, leases=self.leases,
            holder=self.holder, retries=self.retries,
            encode=capability.episodic.encode if capability.episodic is not None else "session",
        )  # fmt: skip
        self._consolidation = Consolidation(
            capability=capability, stages=stages, clock=capability.clock, leases=self.leases, holder=self.holder,
            retries=self.retries, policy=self.policy,
        )  # fmt: skip
        self._background = BackgroundObserver(self._observe_queued)
        self._jobs = JobRunner(self)
        erasure = Erasure(  # forget rewrites the digest and the episode summaries through the stage model
            capability.governance, rewrite_digest=self.digest, rewrite_text=functools.partial(redact_text, stages)
        )
        self._governed = GovernedWrites(capability=capability, erasure=erasure, background=self._background)
        self._ingestion = Ingestion(
            tiers=self.tiers, importer=self, count=capability.token_counter, access=capability.access
        )
        self._pending_retries = PendingRetries(
            tiers=self.tiers, stages=stages, clock=capability.clock, capture=self._capture, sessions=self._sessions,
            consolidation=self._consolidation, end_session=self.end_session,
        )  # fmt: skip

    # -- the read API, the capability's -----------------------------------------------------

    recall = _read(MemoryCapability.recall)
    feedback = _read(MemoryCapability.feedback)
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

    def tools(self, ctx: MemoryContext, *, write: bool = False) -> Toolset:
        """The capability's tools bound to ``ctx``; ``write``: also the agent's write tools (opt-in).

        With ``write``, ``memory_remember`` (when the semantic tier is on) and ``memory_forget``
        (through :meth:`forget`) write and delete the bound user's memories only.
        """
        self.capability.access.check(ctx)
        if write is not True and write is not False:
            raise ConfigurationError(f"write must be True or False, not {write!r}")
        return agent_tools(self.capability, ctx, forget=self.forget if write else None)

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
    def model_name(self) -> str:
        """The model the write side calls: a litellm model string, or ``"rules"`` (the offline model)."""
        return self.stages.name

    @property
    def embedder(self) -> Embedder:
        return self.capability.embedder

    @property
    def clock(self) -> Clock:
        return self.capability.clock

    def blocking(self) -> BlockingMemorySystem:
        """A synchronous facade for scripts without asyncio: same methods, no ``await``."""
        # Blocking forwards by __getattr__; the generated protocol says what it forwards, with its types
        return cast(BlockingMemorySystem, Blocking(self))

    # -- jobs (_job_runner.py) ----------------------------------------------------------------

    start_jobs = delegate("_jobs", JobRunner.start_jobs)
    stop_jobs = delegate("_jobs", JobRunner.stop_jobs)
    run_worker = delegate_async("_jobs", JobRunner.run_worker)

    def usage(self) -> dict[str, dict[str, float]]:
        """Model usage per stage: calls, retries, failures, tokens, cost, latency."""
        return self.stages.ledger.snapshot()

    # -- capture ----------------------------------------------------------------------------

    @_fenced
    async def capture(
        self,
        ctx: MemoryContext,
        messages: Sequence[object],
        *,
        metadata: Mapping[str, object] | None = None,
        at: datetime | None = None,
        idempotency_key: str | None = None,
        background: bool = False,
        policy: MemoryPolicy | Mapping[str, object] | None = None,
    ) -> CaptureResult:
        """After each turn: journal it exactly once, then observe it (one model call). Never loses the turn.

        ``messages``: the turn as the model API saw it, OpenAI or litellm shapes (dicts or message
        objects, tool calls and results included); the log keeps the roles in ``keep_roles``, and
        an invalid message raises InvalidArgumentError naming its index before anything is written.
        ``at``: the turn's real time (importing history): every record derived from it is dated by it.
        ``idempotency_key``: names the turn, so a rerun returns the first result (``duplicate=True``)
        instead of a second turn. Without one the key is derived from the messages and ``at`` (or,
        without ``at``, a 10-minute window: the same messages twice in a row in one session within it are one turn).
        ``background``: return once the turn is journaled (``queued=True``) and observe it in a bounded
        in-process queue, off the agent's response path; ``flush()`` waits for the queue, ``aclose()``
        drains it on shutdown, and a turn queued when the process dies is observed by ``retry_pending()``.
        ``policy``: this turn's override of the system's memory policy (a MemoryPolicy or a dict of its fields;
        the fields it sets replace the system's), kept on the journaled turn so a later observation obeys it.
        """
        if not isinstance(background, bool):
            raise InvalidArgumentError(f"background must be a bool, not {type(background).__name__}")
        queue = self._background if background else None
        override = policy_of(policy)
        if override is not None and self.policy is not None:
            self.policy.overridden_by(override)  # refused now, before the turn is journaled, if they conflict
        return await self._capture.capture(
            ctx, messages, metadata=metadata, at=at, idempotency_key=idempotency_key, background=queue,
            policy=override,
        )  # fmt: skip

    async def _observe_queued(self, ctx: MemoryContext, turn: Turn) -> CaptureResult:
        # Not under the session's lock: the next capture journals while this turn's model call runs.
        return await self._capture.observe(ctx, turn)

    async def flush(self) -> None:
        """Wait until every turn captured with ``background=True`` is observed (or deferred with its error)."""
        await self._background.drain()

    async def aclose(self) -> None:
        """Drain the background queue and stop its tasks (call on shutdown; ``async with`` does it)."""
        await self._background.close()

    async def __aenter__(self) -> MemorySystem:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @_fenced
    async def import_conversations(
        self,
        ctx: MemoryContext,
        conversations: Iterable[Conversation | Mapping[str, object]],
        *,
        concurrency: int = 8,
        on_progress: Callable[[HistoryProgress], None] | None = None,
        consolidate: bool = True,
        observe_window: int = OBSERVE_WINDOW,
    ) -> HistoryReport:
        """Feed a user's past conversations through the pipeline with their real dates; resumable.

        ``conversations``: ``{"session_id": ..., "turns": [{"at": datetime or ISO string, "messages": [...]}]}``
        each (checked whole before anything is written). Sessions are journaled and observed in bulk,
        ``concurrency`` at a time with at most ``concurrency`` observer calls in flight; each is ended,
        the user's episodes consolidated as they come, then the user is digested. Run it again after a
        crash: turns already journaled are skipped.

        ``observe_window``: consecutive turns of one session per observer call (1 to 32, default 8; as many
        as fit the model's input, a turn too large for one call observed alone, in parts). Each observation
        names its turn, and its entry is numbered, dated and attributed as if that turn had been observed
        alone; 1 is one call per turn, as ``capture``. A window whose answer does not validate after its
        retries is observed turn by turn. Raises InvalidArgumentError, before writing, for another value.
        """
        return await import_conversations(
            self, self._capture, ctx, conversations, concurrency=concurrency, on_progress=on_progress,
            consolidate=consolidate, observe_window=observe_window,
        )  # fmt: skip

    async def capture_from_items(
        self, ctx: MemoryContext, items: Sequence[Mapping[str, object] | Sequence[Mapping[str, object]]]
    ) -> list[CaptureResult]:
        """A batch: each list is one turn; loose messages start a new turn at every user message.

        The whole batch is validated before the first turn is journaled.
        """
        checked = [normalize_messages(turn, keep_roles=self.keep_roles) for turn in split_turns(items)]
        return [await self.capture(ctx, turn) for turn in checked]

    # -- sessions, consolidation, digest ----------------------------------------------------

    @_fenced
    async def end_session(self, ctx: MemoryContext, session_id: str | None = None) -> SessionResult:
        """Encode the session's observed turns as an episode (by default no model call: a provisional episode
        whose summary the consolidation call writes; one call with ``episodic={"encode": "session"}``) and close
        its working memory.

        Idempotent: a rerun after a crash finishes what it left. ``busy`` when another process is ending it.
        """
        checked_context(ctx)
        sid = session_id or ctx.session_id
        if sid is None:
            raise InvalidArgumentError("end_session needs a session_id")
        return await self._sessions.end(ctx, sid)

    @_fenced
    async def end_sessions(self, ctx: MemoryContext, session_ids: Sequence[str]) -> list[SessionResult]:
        """``end_session`` for several sessions of ``ctx``'s user at once, in the order given: the same results,
        in a few store round trips (one read of their turns, episodes and entries; one write of their episodes,
        one of their closed entries). ``import_conversations`` ends its sessions this way, by groups."""
        checked_context(ctx)
        if isinstance(session_ids, str) or not all(isinstance(s, str) and s for s in session_ids):
            raise InvalidArgumentError("session_ids must be a list of non-empty strings")
        return await self._sessions.end_many(ctx, list(session_ids))

    @_fenced
    async def consolidate(
        self,
        ctx: MemoryContext,
        *,
        batch_size: int = 4,
        limit: int | None = None,
        policy: MemoryPolicy | Mapping[str, object] | None = None,
    ) -> ConsolidationResult:
        """Turn the user's pending episodes into facts (and edges), one model call per batch.

        ``limit``: at most this many episodes, the earliest sessions first; the rest stay pending.
        ``busy`` (nothing done) when another process holds this user's consolidation lease.
        ``policy``: this call's override of the system's memory policy (the fields it sets replace the system's).
        """
        checked_context(ctx)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be an int >= 1, not {batch_size!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise InvalidArgumentError(f"limit must be None or an int >= 1, not {limit!r}")
        return await self._consolidation.consolidate(ctx, batch_size=batch_size, limit=limit, policy=policy_of(policy))

    def fact_fingerprint(self, facts: Sequence[Fact]) -> str:
        return fact_set_fingerprint(facts)

    @_fenced
    async def digest(
        self, ctx: MemoryContext, *, policy: MemoryPolicy | Mapping[str, object] | None = None
    ) -> DigestResult:
        """Write the user's narrative digest from their active facts and current edges (one model call; more, in
        parts, for facts too many for the model's window).

        Superseded facts and closed edges are not shown to the model: the digest states what holds now.
        Nor are the facts the memory policy keeps out; the model is told the policy.
        ``policy``: this call's override of the system's memory policy (the fields it sets replace the system's).
        """
        checked_context(ctx)
        return await self._consolidation.digest(ctx, policy=policy_of(policy))

    # -- retries ----------------------------------------------------------------------------

    retry_pending = _fenced(delegate_async("_pending_retries", PendingRetries.retry_pending))  # _pending.py

    # -- correct, forget, erase, share, import (_governed_writes.py) ------------------------------

    update = _fenced(delegate_async("_governed", GovernedWrites.update))
    pin = _fenced(delegate_async("_governed", GovernedWrites.pin))
    unpin = _fenced(delegate_async("_governed", GovernedWrites.unpin))
    forget = _fenced(delegate_async("_governed", GovernedWrites.forget))
    erase_user = delegate_async("_governed", GovernedWrites.erase_user)
    grant = delegate_async("_governed", GovernedWrites.grant)
    revoke = delegate_async("_governed", GovernedWrites.revoke)
    grants = delegate_async("_governed", GovernedWrites.grants)
    share = _fenced(delegate_async("_governed", GovernedWrites.share))
    propose_shared = delegate_async("_governed", GovernedWrites.propose_shared)
    erase_scope = delegate_async("_governed", GovernedWrites.erase_scope)
    import_ = _fenced(delegate_async("_governed", GovernedWrites.import_))
    fork = _fenced(delegate_async("_governed", GovernedWrites.fork))

    # -- documents (memory/_write/_ingest.py) --------------------------------------------------

    ingest = _fenced(delegate_async("_ingestion", Ingestion.ingest))
    estimate_ingest = delegate_async("_ingestion", Ingestion.estimate_ingest)
    documents = delegate_async("_ingestion", Ingestion.documents)
    forget_document = _fenced(delegate_async("_ingestion", Ingestion.forget_document))

    list = _read(MemoryCapability.list)  # last in the class: below it, ``list`` would name this method
