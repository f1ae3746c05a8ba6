"""Deterministic ids: the same input always names the same record, so reruns upsert, never duplicate."""

from __future__ import annotations

import hashlib

__all__ = ["fact_id", "stable_id"]


def stable_id(kind: str, *parts: str) -> str:
    """``kind`` prefix plus a 32-hex-digit digest of the parts (unambiguously joined)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=16).hexdigest()
    return f"{kind}_{digest}"


def fact_id(namespace: str, user_id: str, subject: str, text: str) -> str:
    """The same fact about the same subject always gets the same id (case and spacing ignored)."""
    return stable_id("fact", namespace, user_id, subject, " ".join(text.lower().split()))
