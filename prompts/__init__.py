"""Prompts, one module each: ``VERSION``, ``Input``, ``Output``, ``TEXT`` and the typed ``STAGE`` built from them.

``STAGES`` lists every stage once, in pipeline order (observe, observe a window of past turns, encode,
consolidate, encode-and-consolidate, digest, compact, redact); ``Stage`` is their type.
"""

from __future__ import annotations

from typing import Any

from tiermem.memory._stage import Stage

from . import compact, consolidate, digest, encode_consolidate, encode_episode, observe, observe_window, redact

__all__ = [
    "STAGES",
    "Stage",
    "compact",
    "consolidate",
    "digest",
    "encode_consolidate",
    "encode_episode",
    "observe",
    "observe_window",
    "redact",
]

STAGES: tuple[Stage[Any, Any], ...] = (
    observe.STAGE,
    observe_window.STAGE,
    encode_episode.STAGE,
    consolidate.STAGE,
    encode_consolidate.STAGE,
    digest.STAGE,
    compact.STAGE,
    redact.STAGE,
)
