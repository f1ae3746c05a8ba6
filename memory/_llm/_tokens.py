"""The LLM boundary's token counts and context windows, a part of :mod:`._client`, by litellm's counter."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from . import _offline as _llm_offline  # noqa: F401  (before litellm: it must not fetch its cost map)

# isort: split
import litellm

__all__ = ["known_window", "message_tokens", "text_tokens"]


def _tokenizer_flags() -> tuple[object, object]:
    """litellm's switches that change what its counter answers: part of every cached count's key."""
    return litellm.disable_token_counter, litellm.disable_hf_tokenizer_download


# Counts are pure functions of (model, text, flags); the pipelines count the same texts (schemas, prompt
# parts) again and again, and litellm's counter costs ~0.3 ms of event-loop CPU for a 1.5 kB text.
_CACHED_TEXT_CHARS = 16_384  # longer texts are counted afresh: the cache stays a few MB at most
_CACHED_MESSAGES_CHARS = 65_536


@functools.lru_cache(maxsize=1024)
def _cached_text_tokens(model: str, text: str, flags: tuple[object, object]) -> int:
    return _count_text(model, text)


def _count_text(model: str, text: str) -> int:
    try:
        return int(litellm.token_counter(model=model, text=text))
    except Exception:  # a tokenizer litellm cannot load: every token is at least one byte, most are three or more
        return len(text.encode("utf-8")) // 3 + 1


def text_tokens(model: str, text: str) -> int:
    """Tokens of ``text`` for ``model``, by litellm's counter (remembered for texts of a few kB)."""
    if len(text) > _CACHED_TEXT_CHARS:
        return _count_text(model, text)
    return _cached_text_tokens(model, text, _tokenizer_flags())


@functools.lru_cache(maxsize=64)
def _cached_message_tokens(
    model: str, messages: tuple[tuple[tuple[str, str], ...], ...], flags: tuple[object, object]
) -> int:
    return _count_messages(model, [dict(m) for m in messages])


def _count_messages(model: str, messages: Sequence[Mapping[str, object]]) -> int:
    try:
        return int(litellm.token_counter(model=model, messages=[dict(m) for m in messages]))
    except Exception:  # as text_tokens, plus litellm's few tokens of framing per message
        return sum(text_tokens(model, str(m.get("content", ""))) + 4 for m in messages) + 3


def message_tokens(model: str, messages: Sequence[Mapping[str, object]]) -> int:
    """Prompt tokens of ``messages`` for ``model``, by litellm's counter (its default tokenizer for unknown models).

    Plain-text messages are counted once: the window check before a call and a fake provider's own
    count of the same request share one result.
    """
    key = tuple(tuple((k, v) for k, v in m.items() if isinstance(v, str)) for m in messages)
    plain = all(len(fields) == len(m) for fields, m in zip(key, messages, strict=True))  # every field a string
    if plain and sum(len(v) for m in key for _, v in m) <= _CACHED_MESSAGES_CHARS:
        return _cached_message_tokens(model, key, _tokenizer_flags())
    return _count_messages(model, messages)


def known_window(model: str) -> int | None:
    """The model's input window as litellm knows it (None when it does not)."""
    try:
        info = litellm.get_model_info(model)
    except Exception:  # unknown models: litellm raises rather than answering None
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if isinstance(window, int) and window > 0 else None
