"""tiermem: tiered memory for LLM agents (working, episodic, semantic, digest).

The front door: everything public is exported here; other modules are implementation.
"""

from __future__ import annotations

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
from .store import Store
from .subjects import USER, canonical_subject, is_canonical_subject
from .tools import MemoryTool, RecallArguments, ToolEnvelope, Toolset

__all__ = [
    "MEMORY_CAPABILITY_PRESETS",
    "USER",
    "Alias",
    "Blocking",
    "CapabilityPreset",
    "Clock",
    "ConfigurationError",
    "Digest",
    "DigestOptions",
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
    "MemoryTool",
    "Message",
    "ModelError",
    "ModelOutputError",
    "RankedMemoryItem",
    "RecallArguments",
    "RecallOptions",
    "RelationsOptions",
    "SemanticOptions",
    "SentenceTransformerEmbedder",
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
    "WorkingEntry",
    "WorkingOptions",
    "approx_tokens",
    "canonical_subject",
    "create_memory_capability",
    "edge_to_memory_item",
    "effective_confidence",
    "is_canonical_subject",
]
