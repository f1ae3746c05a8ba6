"""``system()``: the capability plus the write side. The composition root: with its parts
(``_system_write_side``, ``_system_retries``) and the write side's (``_capture``, ``_sessions``,
``_consolidation``), the only modules of ``memory`` that import ``pipelines`` (and ``jobs``).

What the write side promises (nothing lost, nothing doubled) is told in :mod:`._write_side`,
where :class:`MemorySystem` lives.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Never, TypedDict

from tiermem.pipelines import LLMStages, RulesStages, StageModel

from .._clock import Clock
from .._embed import Embedder
from .._errors import ConfigurationError
from .._options import (
    CapabilityPreset,
    DigestOptions,
    EpisodicOptions,
    HygieneOptions,
    RecallOptions,
    SemanticOptions,
    WorkingOptions,
    reject_unknown,
)
from .._read import create_memory_capability
from .._recall import TokenCounter
from .._results import CaptureResult, ConsolidationResult, DigestResult, RetryReport, SessionResult
from .._secrets import RedactionOptions
from .._store import Store
from .._transcripts import DEFAULT_KEEP_ROLES
from ._write_side import MemorySystem

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


class _LLMOptions(TypedDict, total=False):
    """What :func:`system` hands the :class:`LLM` it builds."""

    timeout: float
    num_retries: int
    validation_retries: int
    max_input_tokens: int


def _stages(model: str | StageModel | None, llm_options: _LLMOptions) -> StageModel:
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
    from .._llm import LLM

    return LLMStages(LLM(model, **llm_options))


def system(
    *,
    model: str | StageModel | None = None,
    timeout: float = 60.0,
    num_retries: int = 2,
    validation_retries: int = 2,
    max_input_tokens: int | None = None,
    keep_roles: Collection[str] = DEFAULT_KEEP_ROLES,
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
) -> MemorySystem:
    """The read side plus the capture pipeline.

    ``model``: any litellm model string, ``"rules"`` for the offline rules model, or a StageModel.
    With none, ``$TIERMEM_MODEL`` or a provider key picks a model; otherwise the rules model runs.
    ``max_input_tokens``: the model's input window when litellm does not know it (or knows it wrong);
    every stage fits its prompt inside it.
    ``keep_roles``: which roles of a captured transcript the turn log keeps (default: what people
    said, ``{"user", "assistant"}``; add ``"system"``, ``"developer"`` or ``"tool"`` to keep more).
    ``create=False``: for reading only (as ``create_memory_capability``'s): nothing is created or recorded.
    ``redact``: secrets in what is captured, imported or written are replaced by a typed placeholder
    (``[secret:api-key]``) before anything is journaled, embedded or sent to the model: True (the default),
    False, a dict or :class:`RedactionOptions` (``pii=True`` adds emails and phone numbers; ``patterns``,
    name -> regex, adds kinds). Counted per user in ``stats().redacted``.
    The other options are those of :func:`create_memory_capability`; an unknown keyword raises
    :class:`ConfigurationError` naming the closest valid one.
    """
    reject_unknown(system, unknown)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ConfigurationError(f"timeout must be a positive number of seconds, not {timeout!r}")
    for name, retries in (("num_retries", num_retries), ("validation_retries", validation_retries)):
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"{name} must be an int >= 0, not {retries!r}")
    llm_options: _LLMOptions = {
        "timeout": timeout,
        "num_retries": num_retries,
        "validation_retries": validation_retries,
    }
    if max_input_tokens is not None:
        llm_options["max_input_tokens"] = max_input_tokens
    stages = _stages(model, llm_options)
    capability = create_memory_capability(
        store=store, storage_options=storage_options, embedder=embedder, embedder_dimensions=embedder_dimensions,
        working=working, episodic=episodic, semantic=semantic, digest=digest, hygiene=hygiene, recall=recall,
        preset=preset, clock=clock, max_context_tokens=max_context_tokens, token_counter=token_counter, create=create,
        redact=redact,
    )  # fmt: skip
    return MemorySystem(capability=capability, stages=stages, keep_roles=keep_roles)
