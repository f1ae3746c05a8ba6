"""The ids the shipped embedders record in a store's meta table, and the names ``resolve_embedder`` takes for them.

Data only, so the store can name the embedder that made it without importing any embedder.
"""

from __future__ import annotations

import re

__all__ = ["HASHING_ID", "SHIPPED_IDS", "embedder_name"]

HASHING_ID = re.compile(r"hashing-v1-(\d+)")
# The ids the shipped embedders record in a store, and the names resolve_embedder takes for them.
SHIPPED_IDS = {"minilm-l6-onnx-int8-v1": "minilm-onnx", "minilm-static-v1": "minilm-static"}


def embedder_name(embedder_id: str) -> str | None:
    """The ``resolve_embedder`` name of a shipped embedder, from the id a store's meta records; else None."""
    if embedder_id in SHIPPED_IDS:
        return SHIPPED_IDS[embedder_id]
    if embedder_id.startswith("sentence-transformers:"):
        return "sentence-transformers"
    if embedder_id.startswith("litellm:"):
        return embedder_id.removeprefix("litellm:")
    return "hashing" if HASHING_ID.fullmatch(embedder_id) else None
