"""tiermem: tiered memory for LLM agents (working, episodic, semantic, digest).

The front door: everything public is exported here. The subpackages are ``tiermem.memory`` (the core),
``tiermem.pipelines`` (LLM transformations), ``tiermem.prompts`` (one stage per prompt) and
``tiermem.jobs`` (scheduled work); their modules are implementation unless their package exports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .memory._blocking import Blocking
from .memory._clock import Clock, SystemClock
from .memory._decay import effective_confidence
from .memory._embed import (
    Embedder,
    HashingEmbedder,
    LiteLLMEmbedder,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
)
from .memory._errors import (
    AccessDeniedError,
    ConfigurationError,
    DocumentError,
    EmbedderError,
    ErrorKind,
    InvalidArgumentError,
    InvalidSubjectError,
    MemoryNotFoundError,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelContentPolicyError,
    ModelContextWindowError,
    ModelError,
    ModelNotFoundError,
    ModelOutputError,
    ModelPermanentError,
    ModelPermissionError,
    ModelRateLimitError,
    ModelServerError,
    ModelTimeoutError,
    ModelTransientError,
    StoreConflictError,
    StoreError,
    StoreMismatchError,
    StoreNotFoundError,
    StoreUnavailableError,
    SyncInEventLoopError,
    TiermemError,
    UserErasedError,
)
from .memory._govern import (
    EraseReport,
    ExportReport,
    FeedbackReport,
    ForgetReport,
    Grant,
    ImportReport,
    MemoryPage,
    MemoryStats,
    MemoryVersion,
    RecallResult,
)
from .memory._items import MemoryItem, RankedMemoryItem
from .memory._options import (
    MEMORY_CAPABILITY_PRESETS,
    CapabilityPreset,
    DigestOptions,
    EpisodicOptions,
    HygieneOptions,
    RecallOptions,
    RelationsOptions,
    SemanticOptions,
    WorkingOptions,
)
from .memory._policy import MemoryPolicy
from .memory._read import MemoryCapability, MemoryProvider, create_memory_capability
from .memory._recall import approx_tokens
from .memory._records import (
    Alias,
    Chunk,
    Digest,
    Document,
    Edge,
    Episode,
    Fact,
    MemoryContext,
    Message,
    Tier,
    Turn,
    WorkingEntry,
)
from .memory._relations import ConnectArguments
from .memory._secrets import RedactionOptions
from .memory._store import Store
from .memory._subjects import USER, canonical_subject, is_canonical_subject
from .memory._tiers import edge_to_memory_item
from .memory._tools import MemoryTool, RecallArguments, ToolEnvelope, Toolset
from .memory._usage import StageUsage, UsageLedger
from .memory._write import (
    Conversation,
    HistoryProgress,
    HistoryReport,
    HistoryTurn,
    IngestEstimate,
    IngestProgress,
    IngestReport,
    LeasedWork,
)

# isort: split
# The write side (the composition root) comes last: the pipelines it imports read the names above.
from .memory._write import (
    CaptureResult,
    ConsolidationResult,
    DigestResult,
    MemorySystem,
    RetryReport,
    SessionResult,
    SharedProposal,
    system,
)

if TYPE_CHECKING:
    from .memory._adapters import TiermemSession as TiermemSession  # served by __getattr__, out of __all__
    from .memory._adapters import TiermemStore as TiermemStore
    from .memory._adapters import TiermemToolset as TiermemToolset
    from .memory._llm import LLM


def __getattr__(name: str) -> object:
    """``LLM`` imports litellm, which is slow to import: load it on first use only. The framework adapters
    import their frameworks (each an extra), so they too load on first use; without the extra, using one
    raises ConfigurationError naming it. They stay out of ``__all__``: ``from tiermem import *`` must not
    need every framework installed."""
    if name == "LLM":
        from .memory._llm import LLM

        return LLM
    if name in ("TiermemStore", "TiermemSession", "TiermemToolset"):
        from .memory import _adapters

        return getattr(_adapters, name)
    raise AttributeError(f"module 'tiermem' has no attribute {name!r}")


__all__ = [
    "LLM",
    "MEMORY_CAPABILITY_PRESETS",
    "USER",
    "AccessDeniedError",
    "Alias",
    "Blocking",
    "CapabilityPreset",
    "CaptureResult",
    "Chunk",
    "Clock",
    "ConfigurationError",
    "ConnectArguments",
    "ConsolidationResult",
    "Conversation",
    "Digest",
    "DigestOptions",
    "DigestResult",
    "Document",
    "DocumentError",
    "Edge",
    "Embedder",
    "EmbedderError",
    "Episode",
    "EpisodicOptions",
    "EraseReport",
    "ErrorKind",
    "ExportReport",
    "Fact",
    "FeedbackReport",
    "ForgetReport",
    "Grant",
    "HashingEmbedder",
    "HistoryProgress",
    "HistoryReport",
    "HistoryTurn",
    "HygieneOptions",
    "ImportReport",
    "IngestEstimate",
    "IngestProgress",
    "IngestReport",
    "InvalidArgumentError",
    "InvalidSubjectError",
    "LeasedWork",
    "LiteLLMEmbedder",
    "MemoryCapability",
    "MemoryContext",
    "MemoryItem",
    "MemoryNotFoundError",
    "MemoryPage",
    "MemoryPolicy",
    "MemoryProvider",
    "MemoryStats",
    "MemorySystem",
    "MemoryTool",
    "MemoryVersion",
    "Message",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelConnectionError",
    "ModelContentPolicyError",
    "ModelContextWindowError",
    "ModelError",
    "ModelNotFoundError",
    "ModelOutputError",
    "ModelPermanentError",
    "ModelPermissionError",
    "ModelRateLimitError",
    "ModelServerError",
    "ModelTimeoutError",
    "ModelTransientError",
    "OnnxEmbedder",
    "RankedMemoryItem",
    "RecallArguments",
    "RecallOptions",
    "RecallResult",
    "RedactionOptions",
    "RelationsOptions",
    "RetryReport",
    "SemanticOptions",
    "SentenceTransformerEmbedder",
    "SessionResult",
    "SharedProposal",
    "StageUsage",
    "StaticEmbedder",
    "Store",
    "StoreConflictError",
    "StoreError",
    "StoreMismatchError",
    "StoreNotFoundError",
    "StoreUnavailableError",
    "SyncInEventLoopError",
    "SystemClock",
    "Tier",
    "TiermemError",
    "ToolEnvelope",
    "Toolset",
    "Turn",
    "UsageLedger",
    "UserErasedError",
    "WorkingEntry",
    "WorkingOptions",
    "approx_tokens",
    "canonical_subject",
    "create_memory_capability",
    "edge_to_memory_item",
    "effective_confidence",
    "is_canonical_subject",
    "system",
]


def _exported_here() -> None:
    """Exported classes and functions report ``tiermem`` as their module (as httpx and anyio do), so reprs,
    pickles and docs show the public name, never the private path where they are implemented."""
    for name in __all__:
        value = globals().get(name)  # ``LLM`` is loaded on first use, and keeps its own module
        if callable(value) and getattr(value, "__module__", "").startswith("tiermem."):
            value.__module__ = __name__


_exported_here()
