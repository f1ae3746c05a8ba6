"""Retrieval keys: the broader terms a model gives a memory for later questions to find it by."""

from __future__ import annotations

import unicodedata
from typing import Annotated

from pydantic import BeforeValidator, Field

__all__ = ["MAX_KEYS", "MAX_KEY_LENGTH", "ModelKeys", "retrieval_keys"]

MAX_KEYS = 8
"""Retrieval keys a memory keeps at most."""
MAX_KEY_LENGTH = 40


def retrieval_keys(values: object) -> tuple[str, ...]:
    """``values`` as retrieval keys: lowercase, whitespace collapsed, deduplicated, at most :data:`MAX_KEYS`.

    Keys come from a model, so a bad item (not a string, empty, too long, control characters) is
    dropped instead of failing the whole answer; anything but a list or tuple gives no keys.
    """
    if not isinstance(values, list | tuple):
        return ()
    keys: dict[str, None] = {}
    for value in values:
        if not isinstance(value, str):
            continue
        key = " ".join(value.lower().split())
        if not key or len(key) > MAX_KEY_LENGTH or any(unicodedata.category(ch) in {"Cc", "Cs"} for ch in key):
            continue
        keys[key] = None
        if len(keys) == MAX_KEYS:
            break
    return tuple(keys)


def _model_keys(values: object) -> list[str]:
    return list(retrieval_keys(values))


ModelKeys = Annotated[
    list[str],
    BeforeValidator(_model_keys),
    Field(
        max_length=MAX_KEYS, description="Broader terms and synonyms a later question may use, not words of the text."
    ),
]
"""Retrieval keys in a model's output schema: normalised, a bad key dropped rather than failing the answer."""
