"""The LLM boundary: the only module that imports litellm, and where its errors become ours.

:class:`LLM` renders nothing itself: it takes messages and a pydantic output model, asks the
model for JSON (schema-constrained where litellm says the model supports it, JSON mode plus the
schema in the prompt otherwise; both from :mod:`._structured`), validates, retries with the
validation error fed back, and records every call in a :class:`UsageLedger`.

Errors: :func:`~tiermem.memory._llm._error_map.map_model_error` is the one place litellm's exceptions
become tiermem's (see :mod:`tiermem.memory._errors` for the tree). Transient failures (timeouts, rate limits,
connection and server errors) are retried here with exponential backoff, ``num_retries`` times;
permanent ones (authentication, permission, not found, bad request) fail at once. litellm itself
is always called with ``num_retries=0``: it would retry a 401 as readily as a 503.

Context window: :attr:`LLM.context_window` is what litellm knows of the model (or what the caller
set); a prompt that exceeds it is refused here, before anything is sent, with
:class:`ModelContextWindowError`; the pipelines fit their inputs below :meth:`LLM.input_budget`.

Its parts, modules beside it (the only others that import litellm): :mod:`._error_map` (the error
mapping), :mod:`._tokens` (token counts, the window litellm knows) and :mod:`._fakes` (the
in-process fake models). They are imported here, after litellm's environment is set (below).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, TypeVar

from . import _offline as _llm_offline  # noqa: F401  (before litellm: it must not fetch its cost map)

# isort: split
import litellm
from pydantic import BaseModel, ValidationError

from .._errors import ConfigurationError, ModelContextWindowError, ModelOutputError, ModelPermanentError
from .._stage import StageCall
from .._text import loggable
from .._usage import UsageLedger
from ._error_map import map_model_error, retry_delay
from ._fakes import (
    FAKE_PROVIDER,
    STAGE_CALL,
    FakeEmbedHandler,
    FakeHandler,
    context_window_exceeded,
    install_fake_embedder,
    install_fake_provider,
)
from ._fingerprint import config_fingerprint
from ._structured import schema_json, schema_prompt, strip_fences
from ._tokens import known_window, message_tokens, text_tokens

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
        extra: dict[str, object] | None = None,
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
        settings: dict[str, object] = {"temperature": self.temperature, "extra": self.extra}
        if self.max_input_tokens is not None:  # only when set, so that existing fingerprints stay as they were
            settings["max_input_tokens"] = self.max_input_tokens
        return config_fingerprint(self.model, settings)

    @functools.cached_property
    def context_window(self) -> int | None:
        """Input tokens the model takes: ``max_input_tokens`` if given, else litellm's; None when unknown."""
        return self.max_input_tokens or known_window(self.model)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` for this model (litellm's counter)."""
        return text_tokens(self.model, text)

    def input_budget(self, output: type[BaseModel]) -> int:
        """Tokens a stage's messages may fill when asking for ``output``.

        A share of the window (:data:`DEFAULT_MAX_INPUT_TOKENS` when unknown), less the output schema,
        which is sent either way (in the prompt or as the response format).
        """
        window = self.context_window or DEFAULT_MAX_INPUT_TOKENS
        schema = self.count_tokens(schema_prompt(output))
        return max(int(window * INPUT_SHARE) - schema, MIN_INPUT_BUDGET)

    def _response_format(self, output: type[BaseModel]) -> tuple[dict[str, object], bool]:
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
        response_format: dict[str, object],
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
        kwargs: dict[str, object] = dict(self.extra)
        if call is not None and self.model.startswith(f"{FAKE_PROVIDER}/"):
            kwargs["metadata"] = {STAGE_CALL: call}  # in-process fakes only: litellm hands it to _FakeProvider
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
            delay = retry_delay(error, attempt, self.num_retries, self.retry_backoff)
            if delay is None:
                self.ledger.record(stage, calls=1, failures=1, latency_s=elapsed)
                raise error
            self.ledger.record(stage, calls=1, retries=1, latency_s=elapsed)
            log.info(
                "%s: %s; retrying in %.1fs (attempt %d of %d)",
                stage,
                loggable(error),
                delay,
                attempt,
                self.num_retries + 1,
            )
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
        delay = retry_delay(error, attempt, num_retries, retry_backoff)
        if delay is None:
            raise error
        log.info(
            "%s: %s; retrying in %.1fs (attempt %d of %d)", stage, loggable(error), delay, attempt, num_retries + 1
        )
        time.sleep(delay)
    log.debug("%s: %s embedded %d texts in %.3fs", stage, model, len(texts), time.perf_counter() - started)
    return [list(item["embedding"]) for item in response.data]
