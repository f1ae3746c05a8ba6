"""The tiermem exception tree.

Everything tiermem raises on purpose derives from :class:`TiermemError`::

    TiermemError
    ├── ConfigurationError        you called it wrong: bad options, bad ids, bad arguments
    │   ├── InvalidSubjectError   a subject that is not "user", a first name or an org name
    │   └── InvalidArgumentError  a tool or API argument that does not validate
    ├── StoreError                the storage engine (LanceDB) failed
    │   └── StoreMismatchError    the store was written with another embedder, dimension or schema
    ├── EmbedderError             an embedder could not produce vectors
    └── ModelError                a language-model call failed
        └── ModelOutputError      the model's output never validated (carries raw output and attempts)
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "EmbedderError",
    "InvalidArgumentError",
    "InvalidSubjectError",
    "ModelError",
    "ModelOutputError",
    "StoreError",
    "StoreMismatchError",
    "TiermemError",
]


class TiermemError(Exception):
    """Root of every error tiermem raises on purpose."""


class ConfigurationError(TiermemError, ValueError):
    """The caller passed options, ids or arguments that cannot be used."""


class InvalidSubjectError(ConfigurationError):
    """A subject is not "user", a lowercase first name or a lowercase-hyphenated org name."""


class InvalidArgumentError(ConfigurationError):
    """An argument to an API call or a tool did not validate."""


class StoreError(TiermemError):
    """The storage engine failed; the original engine error is chained as ``__cause__``."""


class StoreMismatchError(StoreError):
    """The store was created with a different embedder, dimension or schema version."""


class EmbedderError(TiermemError):
    """An embedder could not turn texts into vectors."""


class ModelError(TiermemError):
    """A language-model call failed (network, provider, timeout)."""

    def __init__(self, message: str, *, stage: str = "", attempts: int = 0) -> None:
        super().__init__(message)
        self.stage = stage
        self.attempts = attempts


class ModelOutputError(ModelError):
    """The model's output did not validate after every allowed attempt."""

    def __init__(self, message: str, *, stage: str = "", attempts: int = 0, raw_output: str = "") -> None:
        super().__init__(message, stage=stage, attempts=attempts)
        self.raw_output = raw_output
