"""The LLM boundary: the only module that imports litellm, and where its errors become ours.

:class:`LLM` renders nothing itself: it takes messages and a pydantic output model, asks the
model for JSON (schema-constrained where litellm says the model supports it, JSON mode plus the
schema in the prompt otherwise; both from :mod:`._structured`), validates, retries with the
validation error fed back, and records every call in a :class:`UsageLedger`.

Errors: :func:`map_model_error` is the one place litellm's exceptions become tiermem's (see
:mod:`tiermem.memory._errors` for the tree). Transient failures (timeouts, rate limits,
connection and server errors) are retried here with exponential backoff, ``num_retries`` times;
permanent ones (authentication, permission, not found, bad request) fail at once. litellm itself
is always called with ``num_retries=0``: it would retry a 401 as readily as a 503.

Context window: :attr:`LLM.context_window` is what litellm knows of the model (or what the caller
set); a prompt that exceeds it is refused here, before anything is sent, with
:class:`ModelContextWindowError`; the pipelines fit their inputs below :meth:`LLM.input_budget`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map over the network

import httpx
import litellm
import openai
from litellm import exceptions as llm_errors
from litellm.llms.custom_llm import CustomLLM
from pydantic import BaseModel, ValidationError

from ._errors import (
    ConfigurationError,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelContentPolicyError,
    ModelContextWindowError,
    ModelError,
    ModelNotFoundError,
    ModelOutputError,
    ModelPermanentError,
    ModelPermissionError,
    ModelRateLimitError,
    ModelServerError,
    ModelTimeoutError,
    ModelTransientError,
    TiermemError,
)
from ._fingerprint import config_fingerprint
from ._stage import StageCall
from ._structured import schema_json, schema_prompt, strip_fences
from ._usage import UsageLedger

__all__ = [
    "DEFAULT_MAX_INPUT_TOKENS",
    "INPUT_SHARE",
    "LLM",
    "FakeEmbedHandler",
    "FakeHandler",
    "context_window_exceeded",
    "embed_texts",
    "install_fake_embedder",
    "install_fake_provider",
    "map_model_error",
    "message_tokens",
]

log = logging.getLogger(__name__)

litellm.suppress_debug_info = True
litellm.telemetry = False

T = TypeVar("T", bound=BaseModel)
FAKE_PROVIDER = "tiermem-fake"

DEFAULT_MAX_INPUT_TOKENS = 8192
"""The input window assumed for a model litellm does not know: small enough for nearly every chat model."""
INPUT_SHARE = 0.8
"""Of the window, what a stage's input may fill: the rest absorbs tokenizer differences between litellm's
counter and the provider's, and the validation retries' extra messages."""
MIN_INPUT_BUDGET = 256  # however large the schema, a stage is left this much for its input

# Tests flip this off so that any call to a real provider fails loudly instead of touching the network.
_real_requests_allowed = True
_ALLOWED_LOCK = threading.Lock()


def allow_real_requests(allowed: bool) -> None:
    """Allow or forbid calls to real providers (fakes always work)."""
    global _real_requests_allowed
    with _ALLOWED_LOCK:
        _real_requests_allowed = allowed


def _check_allowed(model: str, stage: str) -> None:
    if not _real_requests_allowed and not model.startswith(f"{FAKE_PROVIDER}/"):
        raise ModelPermanentError(
            f"real model requests are disabled (attempted {model!r}); use a fake model in tests",
            stage=stage,
            model=model,
        )


# -- error mapping ---------------------------------------------------------------------------------

# Most specific first: ContextWindowExceededError and ContentPolicyViolationError are BadRequestErrors.
_BY_TYPE: tuple[tuple[type[Exception], type[ModelError]], ...] = (
    (llm_errors.ContextWindowExceededError, ModelContextWindowError),
    (llm_errors.ContentPolicyViolationError, ModelContentPolicyError),
    (llm_errors.AuthenticationError, ModelAuthenticationError),
    (llm_errors.PermissionDeniedError, ModelPermissionError),
    (llm_errors.NotFoundError, ModelNotFoundError),
    (llm_errors.BadRequestError, ModelBadRequestError),
    (llm_errors.UnprocessableEntityError, ModelBadRequestError),
    (llm_errors.Timeout, ModelTimeoutError),
    (llm_errors.RateLimitError, ModelRateLimitError),
    (llm_errors.APIConnectionError, ModelConnectionError),
    (llm_errors.ServiceUnavailableError, ModelServerError),
    (llm_errors.InternalServerError, ModelServerError),
    (llm_errors.BadGatewayError, ModelServerError),
)

# For any other provider error (litellm.APIError and the openai errors beneath it): the HTTP status.
_BY_STATUS: dict[int, type[ModelError]] = {
    400: ModelBadRequestError,
    401: ModelAuthenticationError,
    403: ModelPermissionError,
    404: ModelNotFoundError,
    408: ModelTimeoutError,
    413: ModelBadRequestError,
    422: ModelBadRequestError,
    429: ModelRateLimitError,
    504: ModelTimeoutError,
}

# Transports litellm may run on without tiermem importing them: their errors are network errors.
_TRANSPORT_MODULES = frozenset({"aiohttp", "httpcore", "httpx"})


def _is_transport_error(exc: BaseException) -> bool:
    if isinstance(exc, (OSError, TimeoutError, httpx.TransportError)):
        return True
    return type(exc).__module__.split(".", 1)[0] in _TRANSPORT_MODULES


def _wrapped_original(exc: BaseException) -> BaseException | None:
    """What litellm wrapped: the first exception down the chain that is neither litellm's nor openai's.

    litellm turns anything a provider (or a fake) raised into ``APIConnectionError`` and keeps the
    original only as ``__context__``.
    """
    seen: set[int] = set()
    current = exc.__cause__ or exc.__context__
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__module__.split(".", 1)[0] not in {"litellm", "openai"}:
            return current
        current = current.__cause__ or current.__context__
    return None


def _status_code(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def _error_type(exc: Exception) -> type[ModelError] | None:
    for engine_type, ours in _BY_TYPE:
        if isinstance(exc, engine_type):
            return ours
    if isinstance(exc, openai.APIError):  # litellm.APIError and the rest of the provider errors (openai's types)
        code = _status_code(exc)
        if code is not None and code in _BY_STATUS:
            return _BY_STATUS[code]
        return ModelServerError
    return None


def map_model_error(exc: Exception, *, stage: str, model: str, attempts: int) -> BaseException:
    """The exception to raise for ``exc``, raised by a litellm call: the one place the mapping lives.

    A litellm error of a known type becomes its tiermem class (``exc`` chained as ``__cause__``).
    When litellm wrapped something that is not a network error (a bug, ours or a library's, or a
    tiermem error raised inside a fake), that original is returned, to propagate unchanged; so is
    an exception of any type this function does not know.
    """
    if isinstance(exc, TiermemError):
        return exc
    detail = str(exc)
    error_type = _error_type(exc)
    if isinstance(exc, llm_errors.APIConnectionError):
        original = _wrapped_original(exc)
        if original is not None and not _is_transport_error(original):
            return original
        if original is not None:
            detail = f"{type(original).__name__}: {original}"
            if isinstance(original, TimeoutError):
                error_type = ModelTimeoutError
    if error_type is None:
        return exc
    detail = detail.split("\nTraceback", 1)[0].strip()[:1000]
    error = error_type(
        f"{stage}: model call failed: {detail}",
        stage=stage,
        attempts=attempts,
        model=model,
        status_code=_status_code(exc),
    )
    error.__cause__ = exc
    return error


def _retry_delay(error: BaseException, attempt: int, num_retries: int, backoff: float) -> float | None:
    """Seconds to wait before the next attempt, or None when ``error`` is final."""
    if not isinstance(error, ModelTransientError) or attempt > num_retries:
        return None
    delay = backoff * 2 ** (attempt - 1) * (4 if isinstance(error, ModelRateLimitError) else 1)
    return float(min(delay, 30.0))


# -- token counts and the context window ---------------------------------------------------------


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


def _text_tokens(model: str, text: str) -> int:
    if len(text) > _CACHED_TEXT_CHARS:
        return _count_text(model, text)
    return _cached_text_tokens(model, text, _tokenizer_flags())


@functools.lru_cache(maxsize=64)
def _cached_message_tokens(
    model: str, messages: tuple[tuple[tuple[str, str], ...], ...], flags: tuple[object, object]
) -> int:
    return _count_messages(model, [dict(m) for m in messages])


def _count_messages(model: str, messages: Sequence[dict[str, Any]]) -> int:
    try:
        return int(litellm.token_counter(model=model, messages=[dict(m) for m in messages]))
    except Exception:  # as _text_tokens, plus litellm's few tokens of framing per message
        return sum(_text_tokens(model, str(m.get("content", ""))) + 4 for m in messages) + 3


def message_tokens(model: str, messages: Sequence[dict[str, Any]]) -> int:
    """Prompt tokens of ``messages`` for ``model``, by litellm's counter (its default tokenizer for unknown models).

    Plain-text messages are counted once: the window check before a call and a fake provider's own
    count of the same request share one result.
    """
    key = tuple(tuple(m.items()) for m in messages)
    if all(isinstance(v, str) for m in key for _, v in m) and sum(len(v) for m in key for _, v in m) <= (
        _CACHED_MESSAGES_CHARS
    ):
        return _cached_message_tokens(model, key, _tokenizer_flags())
    return _count_messages(model, messages)


def _known_window(model: str) -> int | None:
    """The model's input window as litellm knows it (None when it does not)."""
    try:
        info = litellm.get_model_info(model)
    except Exception:  # unknown models: litellm raises rather than answering None
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if isinstance(window, int) and window > 0 else None


class LLM:
    """Structured completions through litellm with retries, validation retries and a usage ledger.

    ``num_retries``: further attempts after a transient failure (timeout, rate limit, connection
    or server error), ``retry_backoff`` seconds apart, doubling each time (rate limits wait 4x
    longer). ``validation_retries``: further attempts after output that does not validate.
    ``max_input_tokens``: the model's input window, for models litellm does not know (or knows wrong).
    """

    def __init__(
        self,
        model: str,
        *,
        timeout: float = 60.0,
        num_retries: int = 2,
        validation_retries: int = 2,
        retry_backoff: float = 0.5,
        ledger: UsageLedger | None = None,
        temperature: float | None = 0.0,
        extra: dict[str, Any] | None = None,
        max_input_tokens: int | None = None,
    ) -> None:
        if max_input_tokens is not None and (isinstance(max_input_tokens, bool) or max_input_tokens < 1):
            raise ConfigurationError(f"max_input_tokens must be a positive number, not {max_input_tokens!r}")
        self.model = model
        self.max_input_tokens = max_input_tokens
        self.timeout = timeout
        self.num_retries = num_retries
        self.validation_retries = validation_retries
        self.retry_backoff = retry_backoff
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.temperature = temperature
        self.extra = dict(extra or {})

    @property
    def fingerprint(self) -> str:
        """The model configuration calls are made with now (see :func:`config_fingerprint`)."""
        settings: dict[str, Any] = {"temperature": self.temperature, "extra": self.extra}
        if self.max_input_tokens is not None:  # only when set, so that existing fingerprints stay as they were
            settings["max_input_tokens"] = self.max_input_tokens
        return config_fingerprint(self.model, settings)

    @functools.cached_property
    def context_window(self) -> int | None:
        """Input tokens the model takes: ``max_input_tokens`` if given, else litellm's; None when unknown."""
        return self.max_input_tokens or _known_window(self.model)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` for this model (litellm's counter)."""
        return _text_tokens(self.model, text)

    def input_budget(self, output: type[BaseModel]) -> int:
        """Tokens a stage's messages may fill when asking for ``output``.

        A share of the window (:data:`DEFAULT_MAX_INPUT_TOKENS` when unknown), less the output schema,
        which is sent either way (in the prompt or as the response format).
        """
        window = self.context_window or DEFAULT_MAX_INPUT_TOKENS
        schema = self.count_tokens(schema_prompt(output))
        return max(int(window * INPUT_SHARE) - schema, MIN_INPUT_BUDGET)

    def _response_format(self, output: type[BaseModel]) -> tuple[dict[str, Any], bool]:
        """JSON schema when the model supports it; else JSON mode and the schema goes in the prompt."""
        try:
            native = bool(litellm.supports_response_schema(model=self.model))
        except Exception:  # unknown models: litellm raises rather than answering False
            native = False
        if native:
            # A fresh dict each call, equal to model_json_schema()'s: litellm may rewrite it for a provider.
            schema = {"name": output.__name__, "schema": json.loads(schema_json(output)), "strict": False}
            return {"type": "json_schema", "json_schema": schema}, False
        return {"type": "json_object"}, True

    async def structured(
        self,
        *,
        stage: str,
        messages: Sequence[dict[str, str]],
        output: type[T],
        call: StageCall[Any, Any] | None = None,
    ) -> T:
        """Ask for ``output``; retry with the validation error fed back; raise ModelOutputError at the end.

        ``call`` (the stage, its typed input and output schema) is handed to fake models beside the messages;
        it is never sent to a real provider.
        """
        _check_allowed(self.model, stage)
        response_format, schema_in_prompt = self._response_format(output)
        convo = [dict(m) for m in messages]
        if schema_in_prompt:
            convo.append({"role": "system", "content": schema_prompt(output)})
        raw = ""
        attempts = 0
        last_error = ""
        for attempt in range(self.validation_retries + 1):
            attempts = attempt + 1
            raw = await self._complete(stage, convo, response_format, call)
            try:
                return output.model_validate_json(strip_fences(raw))
            except ValidationError as exc:
                last_error = str(exc)
            log.debug("%s: output did not validate (attempt %d of %d)", stage, attempts, self.validation_retries + 1)
            self.ledger.record(stage, retries=1 if attempt < self.validation_retries else 0)
            convo = [
                *convo,
                {"role": "assistant", "content": raw},
                {
                    "role": "user",
                    "content": f"That output did not validate:\n{last_error}\nReply with corrected JSON only.",
                },
            ]
        self.ledger.record(stage, failures=1)
        raise ModelOutputError(
            f"{stage}: model output did not validate after {attempts} attempts: {last_error[:500]}",
            stage=stage,
            attempts=attempts,
            model=self.model,
            raw_output=raw,
        )

    async def _complete(
        self,
        stage: str,
        messages: list[dict[str, str]],
        response_format: dict[str, Any],
        call: StageCall[Any, Any] | None = None,
    ) -> str:
        """One completion; transient failures retried with backoff, everything else raised at once.

        A prompt larger than the known context window is refused without being sent.
        """
        window = self.context_window
        if window is not None and (size := message_tokens(self.model, messages)) > window:
            self.ledger.record(stage, failures=1)
            raise ModelContextWindowError(
                f"{stage}: the prompt has {size} tokens, more than {self.model}'s context window of {window}; not sent",
                stage=stage,
                model=self.model,
            )
        kwargs: dict[str, Any] = dict(self.extra)
        if call is not None and self.model.startswith(f"{FAKE_PROVIDER}/"):
            kwargs["metadata"] = {_STAGE_CALL: call}  # in-process fakes only: litellm hands it to _FakeProvider
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                response = await litellm.acompletion(
                    model=self.model,
                    messages=messages,
                    response_format=response_format,
                    timeout=self.timeout,
                    num_retries=0,  # retried below, transient errors only
                    **kwargs,
                )
                break
            except Exception as exc:  # mapped below, outside this block, so originals keep their context
                failure = exc
            elapsed = time.perf_counter() - started
            error = map_model_error(failure, stage=stage, model=self.model, attempts=attempt)
            delay = _retry_delay(error, attempt, self.num_retries, self.retry_backoff)
            if delay is None:
                self.ledger.record(stage, calls=1, failures=1, latency_s=elapsed)
                raise error
            self.ledger.record(stage, calls=1, retries=1, latency_s=elapsed)
            log.info("%s: %s; retrying in %.1fs (attempt %d of %d)", stage, error, delay, attempt, self.num_retries + 1)
            await asyncio.sleep(delay)
        content = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # litellm has no price for many models (and none for fakes)
            cost = 0.0
        elapsed = time.perf_counter() - started
        self.ledger.record(
            stage,
            calls=1,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            latency_s=elapsed,
        )
        log.debug(
            "%s: %s answered in %.3fs (attempt %d, %d prompt + %d completion tokens)",
            stage,
            self.model,
            elapsed,
            attempt,
            prompt_tokens,
            completion_tokens,
        )
        return str(content)


def embed_texts(
    model: str, texts: list[str], *, timeout: float, num_retries: int, retry_backoff: float = 0.5
) -> list[list[float]]:
    """Embeddings through litellm, errors mapped and transient ones retried as for completions."""
    stage = "embed"
    _check_allowed(model, stage)
    attempt = 0
    while True:
        attempt += 1
        started = time.perf_counter()
        try:
            response = litellm.embedding(model=model, input=texts, timeout=timeout, num_retries=0)
            break
        except Exception as exc:  # mapped below, outside this block, so originals keep their context
            failure = exc
        error = map_model_error(failure, stage=stage, model=model, attempts=attempt)
        delay = _retry_delay(error, attempt, num_retries, retry_backoff)
        if delay is None:
            raise error
        log.info("%s: %s; retrying in %.1fs (attempt %d of %d)", stage, error, delay, attempt, num_retries + 1)
        time.sleep(delay)
    log.debug("%s: %s embedded %d texts in %.3fs", stage, model, len(texts), time.perf_counter() - started)
    return [list(item["embedding"]) for item in response.data]


FakeHandler = Callable[[str, list[dict[str, Any]], StageCall[Any, Any] | None], Awaitable[str] | str]
"""A fake model: (model name, messages, the stage call or None) -> the reply text (sync or async)."""

_STAGE_CALL = "tiermem_stage_call"

FakeEmbedHandler = Callable[[str, list[str]], list[list[float]]]
"""A fake embedding model: (model name, texts) -> one vector per text."""

_fakes: dict[str, FakeHandler] = {}
_fake_embedders: dict[str, FakeEmbedHandler] = {}


class _FakeProvider(CustomLLM):
    """Routes ``tiermem-fake/<name>`` through litellm to an in-process handler.

    A handler answers an HTTP error by raising ``litellm.llms.custom_llm.CustomLLMError(status_code,
    message)``: litellm maps it by status (401 -> AuthenticationError, 503 -> ServiceUnavailableError).
    """

    def _reply(self, model: str, messages: list[dict[str, Any]], text: str) -> Any:
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
    def _call(kwargs: dict[str, Any]) -> StageCall[Any, Any] | None:
        metadata = (kwargs.get("litellm_params") or {}).get("metadata") or {}
        call = metadata.get(_STAGE_CALL)
        return call if isinstance(call, StageCall) else None

    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
        model, messages = kwargs["model"], kwargs["messages"]
        result = self._handler(model)(model, messages, self._call(kwargs))
        text = await result if not isinstance(result, str) else result
        return self._reply(model, messages, text)

    def completion(self, *args: Any, **kwargs: Any) -> Any:
        model, messages = kwargs["model"], kwargs["messages"]
        result = self._handler(model)(model, messages, self._call(kwargs))
        if not isinstance(result, str):
            raise ModelError("an async fake model cannot serve a sync completion")
        return self._reply(model, messages, result)

    def embedding(self, *args: Any, **kwargs: Any) -> Any:
        model, texts, response = kwargs["model"], kwargs["input"], kwargs["model_response"]
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
