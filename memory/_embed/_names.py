"""Which embedder a name or a store's recorded id stands for: ``embedder="..."`` and ``embedder=None``.

The names ``resolve_embedder`` takes, the ids the shipped embedders record in a store's meta table,
and the embedder a store is opened with when none is given (the one that made it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .._embedder_ids import HASHING_ID, SHIPPED_IDS, embedder_name
from .._errors import ConfigurationError
from .._store import stored_meta
from ._embedders import (
    Embedder,
    HashingEmbedder,
    LiteLLMEmbedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
)
from ._onnx import OnnxEmbedder

__all__ = [
    "DEFAULT_EMBEDDER",
    "SHIPPED_EMBEDDERS",
    "embedder_for_id",
    "embedder_for_store",
    "embedder_name",
    "resolve_embedder",
]

DEFAULT_EMBEDDER = "minilm-onnx"
# Names resolve_embedder accepts for the embedders that ship in the package, no extra installs.
SHIPPED_EMBEDDERS = ("minilm-onnx", "minilm-static", "hashing")


def resolve_embedder(spec: Embedder | str | None, *, dimensions: int | None = None) -> Embedder:
    """None -> the default (``minilm-onnx``); a shipped name (``minilm-onnx``, ``minilm-static``,
    ``hashing``), ``sentence-transformers``; any other name is a litellm model (needs ``dimensions``)."""
    if spec is None:
        spec = DEFAULT_EMBEDDER
    if isinstance(spec, str):
        if spec == "minilm-onnx":
            return OnnxEmbedder()
        if spec == "minilm-static":
            return StaticEmbedder()
        if spec == "hashing":
            return HashingEmbedder(dimensions or 256)
        if spec in {"sentence-transformers", "local"}:
            return SentenceTransformerEmbedder()
        if dimensions is None:
            raise ConfigurationError(f"embedder {spec!r} goes through litellm and needs embedder_dimensions=")
        return LiteLLMEmbedder(spec, dimensions=dimensions)
    if isinstance(spec, Embedder):
        return spec
    raise ConfigurationError(f"embedder must be an Embedder or a name, not {type(spec).__name__}")


def embedder_for_id(embedder_id: str) -> Embedder | None:
    """The shipped embedder whose ``id`` is ``embedder_id`` (as a store's meta records it), else None."""
    if embedder_id in SHIPPED_IDS:
        return resolve_embedder(SHIPPED_IDS[embedder_id])
    match = HASHING_ID.fullmatch(embedder_id)
    if match and int(match.group(1)) >= 8:
        return HashingEmbedder(int(match.group(1)))
    return None


def embedder_for_store(uri: str, *, storage_options: Mapping[str, str] | None = None) -> Embedder:
    """For ``embedder=None``: the shipped embedder that made the store at ``uri``, else the default.

    So a store made with an earlier default (``minilm-static``) keeps opening with it;
    ``tiermem reembed`` moves it to the current default.
    """
    made = stored_meta(uri, storage_options=storage_options).get("embedder_id")
    own = embedder_for_id(made) if made else None
    if own is None:
        return resolve_embedder(None)
    if own.id != resolve_embedder(None).id:
        logging.getLogger("tiermem").info(
            "store %s was made with the embedder %s; opening it with that one "
            "(`tiermem reembed --store %s` moves it to the default, %s)",
            uri,
            made,
            uri,
            DEFAULT_EMBEDDER,
        )
    return own
