"""The read side: ``create_memory_capability()``, the ``MemoryCapability`` it returns
(:mod:`._capability`) and the read-side contract any memory implementation can satisfy, ``MemoryProvider``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Never, Protocol, runtime_checkable

from .._clock import Clock, SystemClock
from .._embed import Embedder, embedder_for_store, resolve_embedder
from .._errors import ConfigurationError
from .._items import RankedMemoryItem
from .._options import (
    MEMORY_CAPABILITY_PRESETS,
    CapabilityPreset,
    DigestOptions,
    EpisodicOptions,
    HygieneOptions,
    RecallOptions,
    SemanticOptions,
    WorkingOptions,
    reject_unknown,
)
from .._recall import TokenCounter, approx_tokens
from .._records import MemoryContext
from .._secrets import RedactionOptions, Redactor, redaction_option
from .._store import Store, resolve_options
from .._tiers import Tiers
from ._capability import MemoryCapability

__all__ = ["MemoryCapability", "MemoryProvider", "create_memory_capability"]


@runtime_checkable
class MemoryProvider(Protocol):
    """The read-side contract any memory implementation can satisfy."""

    async def recall(
        self,
        ctx: MemoryContext,
        cue: str | None = None,
        *,
        limit: int = 10,
        tiers: Sequence[str] | None = None,
        subject: str | None = None,
        where: Mapping[str, Any] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        as_of: datetime | None = None,
        categories: Sequence[str] | None = None,
    ) -> list[RankedMemoryItem]: ...

    async def format_context(self, ctx: MemoryContext, input: str, *, max_tokens: int | None = None) -> str: ...


def _default_store() -> str:
    return os.environ.get("TIERMEM_STORE") or str(Path.home() / ".tiermem" / "store")


def _storage_options(options: Mapping[str, str] | None, store: object) -> dict[str, str]:
    """Checked object-store options: string keys and values, and no Store already opened with its own."""
    if options is None:
        return {}
    pairs = options.items() if isinstance(options, Mapping) else None
    if pairs is None or not all(isinstance(k, str) and isinstance(v, str) for k, v in pairs):
        raise ConfigurationError("storage_options must be a mapping of str to str (e.g. {'allow_http': 'true'})")
    if isinstance(store, Store):
        raise ConfigurationError("storage_options apply to a store path or URI, not to an already opened Store")
    return dict(options)


def create_memory_capability(
    *,
    store: str | Path | Store | None = None,
    storage_options: Mapping[str, str] | None = None,
    embedder: Embedder | str | None = None,
    embedder_dimensions: int | None = None,
    working: bool | dict[str, Any] | WorkingOptions | None = None,
    episodic: bool | dict[str, Any] | EpisodicOptions | None = None,
    semantic: bool | dict[str, Any] | SemanticOptions | None = None,
    digest: bool | dict[str, Any] | DigestOptions | None = None,
    hygiene: bool | dict[str, Any] | HygieneOptions | None = None,
    recall: dict[str, Any] | RecallOptions | None = None,
    preset: str | CapabilityPreset = "default",
    clock: Clock | None = None,
    max_context_tokens: int = 1000,
    token_counter: TokenCounter | None = None,
    create: bool = True,
    redact: bool | dict[str, Any] | RedactionOptions = True,
    **unknown: Never,
) -> MemoryCapability:
    """Build the read side over a store (a folder, ``s3://...`` or ``db://...``).

    ``storage_options``: credentials and endpoint of an object store, as LanceDB takes them (e.g.
    ``aws_endpoint``, ``aws_access_key_id``, ``allow_http``); without them the ``AWS_*`` variables apply.
    ``embedder``: a name, a litellm model (+ ``embedder_dimensions``) or an :class:`Embedder`;
    ``working``, ``episodic``, ``semantic``, ``digest``, ``hygiene``: True / False / dict / options
    model each; ``recall``: ranking weights; ``preset``: which tools and context sections. The options
    a store was created with are recorded in it: one left unset (None) takes the recorded value (else
    on / the defaults); an explicit one that differs is used here and reported in ``option_conflicts``.
    ``create=False``: a read-only flow; a missing store raises StoreNotFoundError and nothing is created.
    ``redact``: what the capability's writes (``remember``, ``add_semantic_fact``, ``update``) replace with a
    placeholder before storing: True (secrets), False (nothing), a dict or :class:`RedactionOptions`.
    An unknown keyword raises :class:`ConfigurationError` naming the closest valid one.
    """
    reject_unknown(create_memory_capability, unknown)
    if isinstance(preset, str):
        if preset not in MEMORY_CAPABILITY_PRESETS:
            raise ConfigurationError(f"unknown preset {preset!r}; choose from {sorted(MEMORY_CAPABILITY_PRESETS)}")
        preset = MEMORY_CAPABILITY_PRESETS[preset]
    if not isinstance(preset, CapabilityPreset):
        raise ConfigurationError(f"preset must be a name or a CapabilityPreset, not {type(preset).__name__}")
    if isinstance(max_context_tokens, bool) or not isinstance(max_context_tokens, int) or max_context_tokens < 16:
        raise ConfigurationError("max_context_tokens must be an int of at least 16")
    options = _storage_options(storage_options, store)
    secrets = Redactor(redaction_option(redact))  # checked before the store is opened or created
    if embedder is None and (store is None or isinstance(store, (str, Path))):  # an existing store keeps its own
        embedder = embedder_for_store(str(store) if store is not None else _default_store(), storage_options=options)
    emb = resolve_embedder(embedder, dimensions=embedder_dimensions)
    if isinstance(store, Store):
        if (store.embedder_id, store.dimensions) != (emb.id, emb.dimensions):
            raise ConfigurationError("the given Store was opened for another embedder")
        opened = store
    elif store is None or isinstance(store, (str, Path)):
        uri = str(store) if store is not None else _default_store()
        opened = Store(uri, embedder_id=emb.id, dimensions=emb.dimensions, storage_options=options, create=create)
    else:
        raise ConfigurationError(f"store must be a path, a URI or a Store, not {type(store).__name__}")
    given = {"working": working, "episodic": episodic, "semantic": semantic, "digest": digest, "hygiene": hygiene,
             "recall": recall}  # fmt: skip
    resolved = resolve_options(opened, given, record=create)
    tiers = Tiers(
        store=opened,
        embedder=emb,
        clock=clock or SystemClock(),
        working=resolved.option("working", WorkingOptions),
        semantic=resolved.option("semantic", SemanticOptions),
        secrets=secrets,
    )
    capability = MemoryCapability(
        tiers=tiers,
        episodic=resolved.option("episodic", EpisodicOptions),
        digest=resolved.option("digest", DigestOptions),
        hygiene=resolved.option("hygiene", HygieneOptions),
        recall_options=resolved.option("recall", RecallOptions) or RecallOptions(),
        preset=preset,
        max_context_tokens=max_context_tokens,
        token_counter=token_counter or approx_tokens,
    )
    capability.option_conflicts = resolved.conflicts
    return capability
