"""Who a read or write is for: :class:`MemoryContext`, its ids and the shared scopes it may ask to reach.

Not a stored record (:mod:`._records` holds those, and names this class too), but validated the same
way: frozen, no unknown fields, ids bounded and free of control characters.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["MAX_ID_LENGTH", "SHARED_KINDS", "MemoryContext", "shared_kind"]

MAX_ID_LENGTH = 256


def _check_id(value: str, what: str) -> str:
    """Ids are opaque strings, but bounded and free of control characters."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{what} is longer than {MAX_ID_LENGTH} characters")
    if any(unicodedata.category(ch) in {"Cc", "Cs"} for ch in value):
        raise ValueError(f"{what} contains control characters")
    return value


SHARED_KINDS = ("team", "org", "agent")
"""The kinds of shared scope: a team's or an organisation's memory, and an agent's own (its procedures)."""


def shared_kind(value: str) -> str | None:
    """The kind of shared scope ``value`` names (``team:eng`` is "team"), None for a user id."""
    kind, sep, rest = value.partition(":")
    return kind if sep and rest and kind in SHARED_KINDS else None


def _check_scope(value: str) -> str:
    if not isinstance(value, str) or shared_kind(value) is None:
        raise ValueError(f"a shared scope is 'team:<id>', 'org:<id>' or 'agent:<id>', not {value!r}")
    return _check_id(value, "scope")


class MemoryContext(BaseModel):
    """Who a read or write is for, and which shared scopes it asks to reach; tools take their authority
    from this alone. A shared scope is reached only if the operator granted it to the user (else
    AccessDeniedError)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)  # as every record's

    namespace: str = Field(default="default", description="Application or tenant; nothing crosses it.")
    user_id: str = Field(description="Durable identity of the primary user.")
    session_id: str | None = Field(default=None, description="One conversation; needed to capture turns.")
    read_scopes: Sequence[str] = Field(
        default=(),
        description="Shared scopes recalled with the user's own ('team:<id>', 'org:<id>'); each needs a grant.",
    )
    write_scope: str | None = Field(
        default=None, description="The shared scope share() and remember(scope='shared') write to; needs a write grant."
    )
    agent_id: str | None = Field(
        default=None, description="The agent acting: its own memory is the scope 'agent:<id>' (needs a grant)."
    )

    @field_validator("namespace")
    @classmethod
    def _ids(cls, value: str) -> str:
        return _check_id(value, "id")

    @field_validator("user_id")
    @classmethod
    def _user(cls, value: str) -> str:
        if shared_kind(_check_id(value, "id")) is not None:
            raise ValueError(f"user_id {value!r} names a shared scope: name it in read_scopes or write_scope")
        return value

    @field_validator("session_id", "agent_id")
    @classmethod
    def _session(cls, value: str | None) -> str | None:
        return None if value is None else _check_id(value, "id")

    @field_validator("read_scopes", mode="before")
    @classmethod
    def _read_scopes(cls, value: object) -> tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ValueError("read_scopes must be a list of scopes")
        return tuple(dict.fromkeys(_check_scope(v) for v in value))

    @field_validator("write_scope")
    @classmethod
    def _write_scope(cls, value: str | None) -> str | None:
        return None if value is None else _check_scope(value)

    @property
    def agent_scope(self) -> str | None:
        """The agent's own scope, ``agent:<agent_id>``, when an agent is named."""
        return None if self.agent_id is None else f"agent:{self.agent_id}"

    @property
    def shared(self) -> tuple[str, ...]:
        """Every shared scope this context asks to reach (read, write and its agent's)."""
        asked = (*self.read_scopes, self.write_scope, self.agent_scope)
        return tuple(dict.fromkeys(s for s in asked if s is not None))
