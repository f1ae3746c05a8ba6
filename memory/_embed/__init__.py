"""Embedders (ONNX, static, hashing, sentence-transformers, litellm) and the names that resolve to them."""

from __future__ import annotations

from ._embedders import (
    Embedder,
    HashingEmbedder,
    LiteLLMEmbedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
)
from ._names import embedder_for_store, embedder_name, resolve_embedder
from ._onnx import OnnxEmbedder

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "LiteLLMEmbedder",
    "OnnxEmbedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "embedder_for_store",
    "embedder_name",
    "resolve_embedder",
]
