"""The LLM boundary's error mapping, a part of :mod:`._client`: where litellm's exceptions become tiermem's.

:func:`map_model_error` is the one place the mapping lives (see :mod:`tiermem.memory._errors` for
the tree); :func:`retry_delay` says which of the results are retried, and after how long.
"""

from __future__ import annotations

import re

import httpx
import openai

from . import _offline as _llm_offline  # noqa: F401  (before litellm: it must not fetch its cost map)

# isort: split
from litellm import exceptions as llm_errors

from .._errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelContentPolicyError,
    ModelContextWindowError,
    ModelError,
    ModelNotFoundError,
    ModelPermissionError,
    ModelRateLimitError,
    ModelServerError,
    ModelTimeoutError,
    ModelTransientError,
    TiermemError,
)

__all__ = ["map_model_error", "retry_delay"]

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


# A provider's client refusing to send without a key: openai's raises a bare ``OpenAIError`` (litellm files it
# as a 500), gemini's a ``ValueError`` (filed as a connection error). No answer came, so no status says so.
_NO_KEY = re.compile(r"\b(missing|no)\b.{0,40}\b(credentials|api[ _-]?key)\b", re.IGNORECASE | re.DOTALL)


def _missing_key(exc: BaseException) -> bool:
    """Raised before any request because no key is configured: a retry fails the same way, at once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _NO_KEY.search(str(current)) and not _is_transport_error(current):
            return True
        current = current.__cause__ or current.__context__
    return False


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
    an exception of any type this function does not know. A provider client's refusal to send without
    a key, whatever litellm filed it as, is a :class:`ModelAuthenticationError`: permanent, never retried.
    """
    if isinstance(exc, TiermemError):
        return exc
    detail = str(exc)
    error_type = _error_type(exc)
    if error_type is not None and _missing_key(exc):
        error_type = ModelAuthenticationError
    elif isinstance(exc, llm_errors.APIConnectionError):
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


def retry_delay(error: BaseException, attempt: int, num_retries: int, backoff: float) -> float | None:
    """Seconds to wait before the next attempt, or None when ``error`` is final."""
    if not isinstance(error, ModelTransientError) or attempt > num_retries:
        return None
    delay = backoff * 2 ** (attempt - 1) * (4 if isinstance(error, ModelRateLimitError) else 1)
    return float(min(delay, 30.0))
