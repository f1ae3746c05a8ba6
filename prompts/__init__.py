"""Prompts, one module each: VERSION, Input, Output, TEXT and render(...)."""

from __future__ import annotations

from . import compact, consolidate, digest, encode_episode, observe

__all__ = ["compact", "consolidate", "digest", "encode_episode", "observe"]
