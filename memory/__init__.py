"""tiermem: tiered memory for LLM agents (working, episodic, semantic, digest).

The front door: everything public is exported here; other modules are implementation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .blocking import Blocking
from .capability import (
    MEMORY_CAPABILITY_PRESETS,
    CapabilityPreset,
    MemoryCapability,
    MemoryProvider,
    create_memory_capability,
)
from .clock import Clock, SystemClock
from .context import approx_tokens
from .decay import effective_confidence
from .embedders import (
    Embedder,
    HashingEmbedder,
    LiteLLMEmbedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
)
from .errors import (
    ConfigurationError,
    EmbedderError,
    InvalidArgumentError,
    InvalidSubjectError,
    ModelError,
    ModelOutputError,
    StoreError,
    StoreMismatchError,
    TiermemError,
)
from .options import (
    DigestOptions,
    EpisodicOptions,
    HygieneOptions,
    RecallOptions,
    RelationsOptions,
    SemanticOptions,
    WorkingOptions,
)
from .recall import edge_to_memory_item
from .records import (
    Alias,
    Digest,
    Edge,
    Episode,
    Fact,
    MemoryContext,
    MemoryItem,
    Message,
    RankedMemoryItem,
    Tier,
    Turn,
    WorkingEntry,
)
from .relations import ConnectArguments
from .store import Store
from .subjects import USER, canonical_subject, is_canonical_subject
from .tools import MemoryTool, RecallArguments, ToolEnvelope, Toolset
from .usage import StageUsage, UsageLedger

# isort: split
# The write side (the composition root) comes last: the pipelines it imports read the names above.
from .system import (
    CaptureResult,
    ConsolidationResult,
    DigestResult,
    MemorySystem,
    RetryReport,
    SessionResult,
    system,
)

if TYPE_CHECKING:
    from .llm import LLM


def __getattr__(name: str) -> object:
    """``LLM`` imports litellm, which is slow to import: load it on first use only."""
    if name == "LLM":
        from .llm import LLM

        return LLM
    raise AttributeError(f"module 'memory' has no attribute {name!r}")


__all__ = [
    "LLM",
    "MEMORY_CAPABILITY_PRESETS",
    "USER",
    "Alias",
    "Blocking",
    "CapabilityPreset",
    "CaptureResult",
    "Clock",
    "ConfigurationError",
    "ConnectArguments",
    "ConsolidationResult",
    "Digest",
    "DigestOptions",
    "DigestResult",
    "Edge",
    "Embedder",
    "EmbedderError",
    "Episode",
    "EpisodicOptions",
    "Fact",
    "HashingEmbedder",
    "HygieneOptions",
    "InvalidArgumentError",
    "InvalidSubjectError",
    "LiteLLMEmbedder",
    "MemoryCapability",
    "MemoryContext",
    "MemoryItem",
    "MemoryProvider",
    "MemorySystem",
    "MemoryTool",
    "Message",
    "ModelError",
    "ModelOutputError",
    "RankedMemoryItem",
    "RecallArguments",
    "RecallOptions",
    "RelationsOptions",
    "RetryReport",
    "SemanticOptions",
    "SentenceTransformerEmbedder",
    "SessionResult",
    "StageUsage",
    "StaticEmbedder",
    "Store",
    "StoreError",
    "StoreMismatchError",
    "SystemClock",
    "Tier",
    "TiermemError",
    "ToolEnvelope",
    "Toolset",
    "Turn",
    "UsageLedger",
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
