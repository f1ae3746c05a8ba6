"""The litellm adapter: structured calls, error mapping, token counts, and the in-process fake provider."""

from __future__ import annotations

from ._client import LLM, allow_real_requests, embed_texts
from ._fakes import context_window_exceeded, install_fake_provider
from ._tokens import message_tokens

__all__ = [
    "LLM",
    "allow_real_requests",
    "context_window_exceeded",
    "embed_texts",
    "install_fake_provider",
    "message_tokens",
]
