"""The scope of a call, checked: the caller's ``MemoryContext``, the columns it confines a read or write to,
and the plain string arguments of the read API."""

from __future__ import annotations

from ._errors import InvalidArgumentError
from ._records import MemoryContext

__all__ = ["checked_context", "checked_string", "scope"]


def checked_context(ctx: object, *, session: str | None = None) -> MemoryContext:
    """``ctx`` if it is a MemoryContext (with a session_id when ``session`` names the caller)."""
    if not isinstance(ctx, MemoryContext):
        raise InvalidArgumentError(f"ctx must be a MemoryContext, not {type(ctx).__name__}")
    if session is not None and ctx.session_id is None:
        raise InvalidArgumentError(f"{session} needs a MemoryContext with a session_id")
    return ctx


def scope(ctx: MemoryContext) -> dict[str, str]:
    """The columns that confine a read or write to one user (checked: every repository call passes here)."""
    checked_context(ctx)
    return {"namespace": ctx.namespace, "user_id": ctx.user_id}


def checked_string(value: object, what: str) -> str:
    """``value`` if it is a string (``what`` names the argument in the error)."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a string, not {type(value).__name__}")
    return value
