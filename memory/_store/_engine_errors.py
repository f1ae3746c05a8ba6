"""Which :class:`StoreError` an exception from LanceDB, Arrow or the OS is, by its type and message.

LanceDB's Rust core reaches Python as builtin exceptions (ValueError, RuntimeError, OSError) whose
message names the engine's error; these patterns tell its kinds apart. Every part of the store
(:mod:`._store` and its ``_store_*`` modules) wraps its engine calls in :func:`engine_errors`, which
raises what this module decides.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from lancedb.remote.errors import LanceDBClientError

from .._errors import StoreConflictError, StoreError, StoreNotFoundError, StoreUnavailableError, TiermemError

__all__ = ["engine_errors", "store_error_type"]

# "incompatible with concurrent transaction": Lance would not rebase the write onto a commit that won (an
# update onto another process's Overwrite); nothing was committed, so it is a lost race to retry like the rest.
_CONFLICT = re.compile(
    r"commit conflict|write contention|concurrent writers|incompatible with concurrent transaction", re.IGNORECASE
)
_NOT_FOUND = re.compile(r"was not found|not found:|no such file", re.IGNORECASE)
_IO = re.compile(r"LanceError\(IO\)|object ?store|io error", re.IGNORECASE)


def store_error_type(exc: Exception, *, unavailable: tuple[type[Exception], ...] = ()) -> type[StoreError] | None:
    """Which StoreError ``exc`` is, or None for an exception of no known kind.

    ``unavailable``: the engine's own exception types that mean "could not reach the store" (its
    remote client's errors), passed in by :func:`engine_errors`.
    """
    text = str(exc)
    if isinstance(exc, (ValueError, RuntimeError, OSError)) and _CONFLICT.search(text):
        return StoreConflictError
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return StoreNotFoundError
    if isinstance(exc, ValueError) and _NOT_FOUND.search(text):
        return StoreNotFoundError  # "Table 'x' was not found"
    if isinstance(exc, (RuntimeError, OSError)) and _IO.search(text):
        return StoreNotFoundError if _NOT_FOUND.search(text) else StoreUnavailableError
    if isinstance(exc, (OSError, *unavailable)):  # disk, permissions, network; pyarrow's ArrowIOError too
        return StoreUnavailableError
    return None


@contextlib.contextmanager
def engine_errors(action: str) -> Iterator[None]:
    """Map what LanceDB / Arrow / the OS raise to StoreError subclasses, per kind.

    Our own errors pass through; an exception of no known kind (a bug, ours or the engine's)
    propagates unchanged rather than as a vague "store failed".
    """
    try:
        yield
    except TiermemError:
        raise
    except Exception as exc:
        error_type = store_error_type(exc, unavailable=(LanceDBClientError,))
        if error_type is None:
            raise
        raise error_type(f"store failed to {action}: {exc}") from exc
