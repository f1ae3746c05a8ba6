"""The tiermem exception tree.

Everything tiermem raises on purpose derives from :class:`TiermemError`::

    TiermemError
    ├── ConfigurationError              you called it wrong: bad options, bad ids, bad arguments
    │   ├── InvalidSubjectError         a subject that is not "user", a first name or an org name
    │   ├── InvalidArgumentError        a tool or API argument that does not validate
    │   │   ├── MemoryNotFoundError     no memory with this id belongs to the context's user
    │   │   └── DocumentError           a document that cannot be read: corrupt, encrypted, empty, of no known type
    │   └── SyncInEventLoopError        the blocking facade was called inside a running event loop: await instead
    ├── StoreError                      the storage engine (LanceDB) failed
    │   ├── StoreMismatchError          written with another embedder, dimension or schema: use another store
    │   ├── StoreNotFoundError          a table, dataset or file of the store is missing
    │   ├── StoreConflictError          other writers kept winning the commit race, retries included
    │   └── StoreUnavailableError       the disk or object store could not be reached, read or written
    ├── UserErasedError                 the user was erased after this work began: its writes were dropped
    ├── EmbedderError                   a local embedder could not produce vectors
    └── ModelError                      a language-model (or litellm embedding) call failed
        ├── ModelOutputError            the output never validated (carries raw output and attempts)
        ├── ModelPermanentError         fix the configuration: retrying the same call cannot help
        │   ├── ModelAuthenticationError    401: missing or wrong API key
        │   ├── ModelPermissionError        403: the key may not use this model
        │   ├── ModelNotFoundError          404: no such model or deployment
        │   └── ModelBadRequestError        400: the provider refuses the request as sent
        │       ├── ModelContextWindowError     the prompt is longer than the model's context window
        │       └── ModelContentPolicyError     the provider's content policy refused it
        └── ModelTransientError         retry later: the same call may well succeed
            ├── ModelTimeoutError           the call timed out
            ├── ModelRateLimitError         429: rate limited or out of quota for now
            ├── ModelConnectionError        the provider could not be reached
            └── ModelServerError            5xx: the provider failed (500, 502, 503)

litellm's exceptions become these in one place, ``tiermem.memory._llm._client.map_model_error``; LanceDB's,
pyarrow's and the OS's in ``tiermem.memory._store._engine_errors.engine_errors``, around every engine call of
the store and its parts. An exception of a type neither maps (a bug, ours or a library's) propagates
unchanged instead of being disguised as "model failed" or "store failed". A plain :class:`ModelError`
(neither permanent nor transient) is retried like a transient one.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "AccessDeniedError",
    "ConfigurationError",
    "DocumentError",
    "EmbedderError",
    "ErrorKind",
    "InvalidArgumentError",
    "InvalidSubjectError",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelConnectionError",
    "ModelContentPolicyError",
    "ModelContextWindowError",
    "ModelError",
    "ModelNotFoundError",
    "ModelOutputError",
    "ModelPermanentError",
    "ModelPermissionError",
    "ModelRateLimitError",
    "ModelServerError",
    "ModelTimeoutError",
    "ModelTransientError",
    "StoreConflictError",
    "StoreError",
    "StoreMismatchError",
    "StoreNotFoundError",
    "StoreUnavailableError",
    "TiermemError",
    "UserErasedError",
    "error_kind",
]

ErrorKind = Literal["permanent", "transient"]
"""How a failed model call should be handled: fix the configuration, or retry later."""


class TiermemError(Exception):
    """Root of every error tiermem raises on purpose."""


class ConfigurationError(TiermemError, ValueError):
    """The caller passed options, ids or arguments that cannot be used."""


class InvalidSubjectError(ConfigurationError):
    """A subject is not "user", a lowercase first name or a lowercase-hyphenated org name."""


class InvalidArgumentError(ConfigurationError):
    """An argument to an API call or a tool did not validate."""


class MemoryNotFoundError(InvalidArgumentError):
    """No memory with this id belongs to the context's user (it may exist for another user)."""


class DocumentError(InvalidArgumentError):
    """A document given to ``ingest`` cannot be read (corrupt, encrypted, no text, unknown type): nothing is written."""


class SyncInEventLoopError(ConfigurationError):
    """The blocking facade was called where an event loop runs (a notebook, an async app): ``await`` the async API."""


class AccessDeniedError(TiermemError):
    """The context asks for a shared scope (``team:``, ``org:``, ``agent:``) its user holds no grant for.

    Nothing is read or written. The operator grants access (``MemorySystem.grant``, ``tiermem grant``);
    no argument of a call or a tool can widen it.
    """


class UserErasedError(TiermemError):
    """The user was erased (``erase_user``) after this work began: nothing more of it is written.

    Work already running when a user is erased (a queued observation, a consolidation waiting on the model,
    in this process or another) ends with this error instead of writing the user back. Work begun after
    the erasure writes as for a new user.
    """


class StoreError(TiermemError):
    """The storage engine failed; the original engine error is chained as ``__cause__``."""


class StoreMismatchError(StoreError):
    """The store was created with a different embedder, dimension or schema version."""


class StoreNotFoundError(StoreError):
    """A table, dataset or data file of the store is missing (a wrong URI, or files deleted)."""


class StoreConflictError(StoreError):
    """Other writers kept committing first: the store retried the write with backoff and gave up.

    Raised only after those retries (see ``CommitRetry``); the write may still succeed later.
    """


class StoreUnavailableError(StoreError):
    """The disk or object store could not be reached, read or written (I/O, permissions, network)."""


class EmbedderError(TiermemError):
    """An embedder could not turn texts into vectors."""


class ModelError(TiermemError):
    """A language-model call failed.

    ``stage`` is the pipeline stage (``"embed"`` for litellm embeddings), ``attempts`` how many
    calls were made, ``model`` the litellm model string and ``status_code`` the provider's HTTP
    status when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        stage: str = "",
        attempts: int = 0,
        model: str = "",
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.stage = stage
        self.attempts = attempts
        self.model = model
        self.status_code = status_code


class ModelOutputError(ModelError):
    """The model's output did not validate after every allowed attempt."""

    def __init__(
        self,
        message: str,
        *,
        stage: str = "",
        attempts: int = 0,
        model: str = "",
        raw_output: str = "",
    ) -> None:
        super().__init__(message, stage=stage, attempts=attempts, model=model)
        self.raw_output = raw_output


class ModelPermanentError(ModelError):
    """The provider refused the call for a reason retrying cannot fix; change the configuration."""


class ModelAuthenticationError(ModelPermanentError):
    """The API key is missing, wrong or revoked (HTTP 401)."""


class ModelPermissionError(ModelPermanentError):
    """The key is valid but may not use this model or endpoint (HTTP 403)."""


class ModelNotFoundError(ModelPermanentError):
    """The model or deployment does not exist at this provider (HTTP 404)."""


class ModelBadRequestError(ModelPermanentError):
    """The provider refused the request as sent: unsupported parameters, bad input (HTTP 400, 422)."""


class ModelContextWindowError(ModelBadRequestError):
    """The prompt does not fit the model's context window."""


class ModelContentPolicyError(ModelBadRequestError):
    """The provider's content policy refused the request."""


class ModelTransientError(ModelError):
    """The call failed for a reason that may pass; retried with backoff, then deferred."""


class ModelTimeoutError(ModelTransientError):
    """The call did not finish within its timeout (or the provider answered 408 / 504)."""


class ModelRateLimitError(ModelTransientError):
    """The provider is rate limiting this key, or its quota is used up for now (HTTP 429)."""


class ModelConnectionError(ModelTransientError):
    """The provider could not be reached: DNS, refused or dropped connections."""


class ModelServerError(ModelTransientError):
    """The provider failed or is overloaded (HTTP 500, 502, 503)."""


def error_kind(exc: BaseException) -> ErrorKind:
    """``"permanent"`` for a :class:`ModelPermanentError`, else ``"transient"`` (retry later)."""
    return "permanent" if isinstance(exc, ModelPermanentError) else "transient"
