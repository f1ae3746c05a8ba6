"""Prompts, one module each: VERSION, Input, Output, TEXT and render(...)."""

from __future__ import annotations

from . import consolidate, digest, encode_episode, observe

__all__ = ["consolidate", "digest", "encode_episode", "observe"]
