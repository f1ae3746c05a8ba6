"""The LLM boundary: the only module that imports litellm, and where its errors become ours.

:class:`LLM` renders nothing itself: it takes messages and a pydantic output model, asks the
model for JSON (schema-constrained where litellm says the model supports it, JSON mode plus the
schema in the prompt otherwise), validates, retries with the validation error fed back, and
records every call in a :class:`UsageLedger`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map over the network

import litellm
from litellm.llms.custom_llm import CustomLLM
from pydantic import BaseModel, ValidationError

from ._errors import EmbedderError, ModelError, ModelOutputError
from ._usage import UsageLedger

__all__ = ["LLM", "FakeHandler", "embed_texts", "install_fake_provider"]

litellm.suppress_debug_info = True
litellm.telemetry = False

T = TypeVar("T", bound=BaseModel)
FAKE_PROVIDER = "tiermem-fake"

# Tests flip this off so that any call to a real provider fails loudly instead of touching the network.
_real_requests_allowed = True
_ALLOWED_LOCK = threading.Lock()


def allow_real_requests(allowed: bool) -> None:
    """Allow or forbid calls to real providers (fakes always work)."""
    global _real_requests_allowed
    with _ALLOWED_LOCK:
        _real_requests_allowed = allowed


def _check_allowed(model: str) -> None:
    if not _real_requests_allowed and not model.startswith(f"{FAKE_PROVIDER}/"):
        raise ModelError(f"real model requests are disabled (attempted {model!r}); use a fake model in tests")


def _schema_prompt(output: type[BaseModel]) -> str:
    schema = json.dumps(output.model_json_schema(), separators=(",", ":"))
    return f"Reply with a single JSON object, no prose, matching this JSON schema:\n{schema}"


class LLM:
    """Structured completions through litellm with validation retries and a usage ledger."""

    def __init__(
        self,
        model: str,
        *,
        timeout: float = 60.0,
        num_retries: int = 2,
        validation_retries: int = 2,
        ledger: UsageLedger | None = None,
        temperature: float | None = 0.0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.num_retries = num_retries
        self.validation_retries = validation_retries
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.temperature = temperature
        self.extra = dict(extra or {})

    def _response_format(self, output: type[BaseModel]) -> tuple[dict[str, Any], bool]:
        """JSON schema when the model supports it; else JSON mode and the schema goes in the prompt."""
        try:
            native = bool(litellm.supports_response_schema(model=self.model))
        except Exception:  # unknown models: litellm raises rather than answering False
            native = False
        if native:
            schema = {"name": output.__name__, "schema": output.model_json_schema(), "strict": False}
            return {"type": "json_schema", "json_schema": schema}, False
        return {"type": "json_object"}, True

    async def structured(self, *, stage: str, messages: Sequence[dict[str, str]], output: type[T]) -> T:
        """Ask for ``output``; retry with the validation error fed back; raise ModelOutputError at the end."""
        _check_allowed(self.model)
        response_format, schema_in_prompt = self._response_format(output)
        convo = [dict(m) for m in messages]
        if schema_in_prompt:
            convo.append({"role": "system", "content": _schema_prompt(output)})
        raw = ""
        attempts = 0
        last_error = ""
        for attempt in range(self.validation_retries + 1):
            attempts = attempt + 1
            raw = await self._complete(stage, convo, response_format)
            try:
                return output.model_validate_json(_strip_fences(raw))
            except ValidationError as exc:
                last_error = str(exc)
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
            raw_output=raw,
        )

    async def _complete(self, stage: str, messages: list[dict[str, str]], response_format: dict[str, Any]) -> str:
        kwargs: dict[str, Any] = dict(self.extra)
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        started = time.perf_counter()
        try:
            response = await litellm.acompletion(
                model=self.model,
                messages=messages,
                response_format=response_format,
                timeout=self.timeout,
                num_retries=self.num_retries,
                **kwargs,
            )
        except Exception as exc:  # every litellm provider error derives from different bases
            self.ledger.record(stage, calls=1, failures=1, latency_s=time.perf_counter() - started)
            raise ModelError(f"{stage}: model call failed: {exc}", stage=stage, attempts=1) from exc
        content = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # litellm has no price for many models (and none for fakes)
            cost = 0.0
        self.ledger.record(
            stage,
            calls=1,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            latency_s=time.perf_counter() - started,
        )
        return str(content)


def _strip_fences(raw: str) -> str:
    text = raw.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text.strip()


def embed_texts(model: str, texts: list[str], *, timeout: float, num_retries: int) -> list[list[float]]:
    """Embeddings through litellm, errors translated."""
    _check_allowed(model)
    try:
        response = litellm.embedding(model=model, input=texts, timeout=timeout, num_retries=num_retries)
    except Exception as exc:
        raise EmbedderError(f"embedding call to {model!r} failed: {exc}") from exc
    return [list(item["embedding"]) for item in response.data]


FakeHandler = Callable[[str, list[dict[str, Any]]], Awaitable[str] | str]
"""A fake model: (model name, messages) -> the reply text (sync or async)."""

_fakes: dict[str, FakeHandler] = {}


class _FakeProvider(CustomLLM):
    """Routes ``tiermem-fake/<name>`` through litellm to an in-process handler."""

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

    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
        model, messages = kwargs["model"], kwargs["messages"]
        result = self._handler(model)(model, messages)
        text = await result if not isinstance(result, str) else result
        return self._reply(model, messages, text)

    def completion(self, *args: Any, **kwargs: Any) -> Any:
        model, messages = kwargs["model"], kwargs["messages"]
        result = self._handler(model)(model, messages)
        if not isinstance(result, str):
            raise ModelError("an async fake model cannot serve a sync completion")
        return self._reply(model, messages, result)


_provider = _FakeProvider()


def install_fake_provider(name: str, handler: FakeHandler) -> str:
    """Install an in-process fake reachable as ``tiermem-fake/<name>``; returns that model string."""
    _fakes[name] = handler
    if not any(item.get("provider") == FAKE_PROVIDER for item in litellm.custom_provider_map):
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": FAKE_PROVIDER, "custom_handler": _provider},
        ]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()  # type: ignore[no-untyped-call]
    return f"{FAKE_PROVIDER}/{name}"
