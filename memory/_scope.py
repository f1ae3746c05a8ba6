"""The scope of a repository call: the caller's checked ``MemoryContext`` and the columns it confines to."""

from __future__ import annotations

from ._errors import InvalidArgumentError
from ._records import MemoryContext

__all__ = ["checked_context", "scope"]


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
