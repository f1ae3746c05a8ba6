"""In-process fake models, a part of :mod:`._client`: ``tiermem-fake/<name>`` routed through litellm to a handler.

Tests and :mod:`tiermem.memory.testing` install them; every real request can be forbidden meanwhile
(:func:`~tiermem.memory._llm._client.allow_real_requests`), a fake always answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from . import _offline as _llm_offline  # noqa: F401  (before litellm: it must not fetch its cost map)

# isort: split
import litellm
from litellm import exceptions as llm_errors
from litellm.llms.custom_llm import CustomLLM

from .._errors import ModelError
from .._stage import ChatMessages, StageCall

__all__ = [
    "FAKE_PROVIDER",
    "STAGE_CALL",
    "FakeEmbedHandler",
    "FakeHandler",
    "context_window_exceeded",
    "install_fake_embedder",
    "install_fake_provider",
]

FAKE_PROVIDER = "tiermem-fake"

FakeHandler = Callable[[str, ChatMessages, StageCall[Any, Any] | None], Awaitable[str] | str]
"""A fake model: (model name, messages, the stage call or None) -> the reply text (sync or async)."""

STAGE_CALL = "tiermem_stage_call"  # the metadata key a stage call rides under, from LLM to an in-process fake

FakeEmbedHandler = Callable[[str, list[str]], list[list[float]]]
"""A fake embedding model: (model name, texts) -> one vector per text."""

_fakes: dict[str, FakeHandler] = {}
_fake_embedders: dict[str, FakeEmbedHandler] = {}


class _FakeProvider(CustomLLM):
    """Routes ``tiermem-fake/<name>`` through litellm to an in-process handler.

    A handler answers an HTTP error by raising ``litellm.llms.custom_llm.CustomLLMError(status_code,
    message)``: litellm maps it by status (401 -> AuthenticationError, 503 -> ServiceUnavailableError).
    """

    def _reply(self, model: str, messages: ChatMessages, text: str) -> litellm.ModelResponse:
        response = litellm.mock_completion(model=model, messages=messages, mock_response=text)
        response.usage = litellm.Usage(
            prompt_tokens=litellm.token_counter(model="gpt-4o-mini", messages=messages),
            completion_tokens=litellm.token_counter(model="gpt-4o-mini", text=text),
            total_tokens=0,
        )
        return response

    def _handler(self, model: str) -> FakeHandler:
        name = model.split("/", 1)[-1]
        if name not in _fakes:
            raise ModelError(f"no fake model named {name!r} is installed")
        return _fakes[name]

    @staticmethod
    def _request(kwargs: Mapping[str, object]) -> tuple[str, ChatMessages, StageCall[Any, Any] | None]:
        """The model, the messages (as :class:`~tiermem.memory._llm.LLM` sent them) and the stage call."""
        params = kwargs.get("litellm_params")
        metadata = (params.get("metadata") if isinstance(params, Mapping) else None) or {}
        call = metadata.get(STAGE_CALL)
        return (
            str(kwargs["model"]),
            cast(ChatMessages, kwargs["messages"]),
            call if isinstance(call, StageCall) else None,
        )

    async def acompletion(self, *args: object, **kwargs: object) -> litellm.ModelResponse:
        model, messages, call = self._request(kwargs)
        result = self._handler(model)(model, messages, call)
        text = await result if not isinstance(result, str) else result
        return self._reply(model, messages, text)

    def completion(self, *args: object, **kwargs: object) -> litellm.ModelResponse:
        model, messages, call = self._request(kwargs)
        result = self._handler(model)(model, messages, call)
        if not isinstance(result, str):
            raise ModelError("an async fake model cannot serve a sync completion")
        return self._reply(model, messages, result)

    def embedding(self, *args: object, **kwargs: object) -> litellm.EmbeddingResponse:
        model, texts, response = str(kwargs["model"]), kwargs["input"], kwargs["model_response"]
        if not isinstance(response, litellm.EmbeddingResponse) or not isinstance(texts, list):
            raise ModelError("a fake embedding model needs litellm's input list and response")
        name = model.split("/", 1)[-1]
        if name not in _fake_embedders:
            raise ModelError(f"no fake embedding model named {name!r} is installed")
        vectors = _fake_embedders[name](model, list(texts))
        response.data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        return response


_provider = _FakeProvider()


def _register_provider() -> None:
    if not any(item.get("provider") == FAKE_PROVIDER for item in litellm.custom_provider_map):
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": FAKE_PROVIDER, "custom_handler": _provider},
        ]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()  # type: ignore[no-untyped-call]


def install_fake_provider(name: str, handler: FakeHandler, *, context_window: int | None = None) -> str:
    """Install an in-process fake reachable as ``tiermem-fake/<name>``; returns that model string.

    ``context_window``: the input tokens litellm is told the model takes (``litellm.get_model_info``).
    """
    _fakes[name] = handler
    _register_provider()
    model = f"{FAKE_PROVIDER}/{name}"
    if context_window is not None:
        litellm.register_model(
            {model: {"max_input_tokens": context_window, "litellm_provider": FAKE_PROVIDER, "mode": "chat"}}
        )
    return model


def context_window_exceeded(model: str, *, tokens: int, window: int) -> Exception:
    """The error a provider raises for a prompt of ``tokens`` beyond its ``window`` (litellm's type, for fakes)."""
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens."
    )
    return llm_errors.ContextWindowExceededError(message=message, model=model, llm_provider=FAKE_PROVIDER)


def install_fake_embedder(name: str, handler: FakeEmbedHandler) -> str:
    """Install an in-process fake embedding model reachable as ``tiermem-fake/<name>``."""
    _fake_embedders[name] = handler
    _register_provider()
    return f"{FAKE_PROVIDER}/{name}"
