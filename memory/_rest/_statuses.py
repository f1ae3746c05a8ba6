"""Which HTTP status each tiermem error is, and the one JSON body every refusal has: ``{error, message}``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .._errors import (
    AccessDeniedError,
    ConfigurationError,
    EmbedderError,
    MemoryNotFoundError,
    ModelError,
    ModelTransientError,
    StoreConflictError,
    StoreError,
    StoreUnavailableError,
    SyncInEventLoopError,
    TiermemError,
    UserErasedError,
)

__all__ = ["STATUSES", "ErrorBody", "error_body", "status_of"]

MAX_MESSAGE_CHARS = 1000
"""A message is cut here: it may quote what the client sent."""

STATUSES: dict[type[TiermemError], int] = {
    AccessDeniedError: 403,  # the key's context names a shared scope its user holds no grant for
    MemoryNotFoundError: 404,  # not this user's: another user's memory is "not found" too
    SyncInEventLoopError: 500,  # the server's own mistake, not the caller's
    ConfigurationError: 422,  # the arguments cannot be used (InvalidArgumentError, InvalidSubjectError)
    UserErasedError: 409,
    StoreConflictError: 409,  # other writers kept winning; the same call may succeed later
    StoreUnavailableError: 503,
    StoreError: 500,
    EmbedderError: 500,
    ModelTransientError: 503,  # the provider is slow or rate-limited now
    ModelError: 502,  # the provider refused (configuration) or its output never validated
    TiermemError: 500,
}
"""The status of each error; a subclass not listed takes its nearest listed base's."""


def status_of(exc: TiermemError) -> int:
    """The HTTP status for ``exc``: the entry of its most specific class in :data:`STATUSES`."""
    for cls in type(exc).__mro__:
        if cls in STATUSES:
            return STATUSES[cls]
    return 500  # unreachable: TiermemError is listed


class ErrorBody(BaseModel):
    """What every refused request gets back."""

    model_config = ConfigDict(frozen=True)

    error: str = Field(description="The error's name: MemoryNotFoundError, InvalidArgumentError, Unauthorized ...")
    message: str = Field(description="What went wrong, for a person to read.")


def error_body(error: str, message: str) -> dict[str, str]:
    """The body of a refusal, its message cut to :data:`MAX_MESSAGE_CHARS`."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 3] + "..."
    return ErrorBody(error=error, message=message).model_dump()
