"""The argument models of the agent tools, one per entry of the tool table (:data:`~._tools.TOOLS`).

Vocabulary, so the table can name them without importing the folders that implement the tools. Every
model forbids extra fields: no argument can name another namespace, user or session. A model's
docstring and field descriptions are the tool's JSON schema as the model reads it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._subjects import MAX_SUBJECT_LENGTH, USER

__all__ = ["ConnectArguments", "ForgetArguments", "RecallArguments", "RememberArguments"]

Kind = Literal["fact", "preference", "event", "plan", "note"]


class RecallArguments(BaseModel):
    """Arguments of ``memory_recall``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1, max_length=2000, description="What to look for, in natural language.")
    limit: int = Field(default=10, ge=1, le=50, description="How many memories to return.")
    tiers: list[Literal["working", "episodic", "semantic", "digest"]] | None = Field(
        default=None, description="Only these tiers; all enabled tiers when omitted."
    )
    subject: str | None = Field(
        default=None, max_length=64, description="Only memories about this subject ('user', 'moni', 'acme-corp')."
    )
    verbose: bool = Field(
        default=False, description="Return every field (confidence, scores, provenance, metadata), not just the text."
    )


class ConnectArguments(BaseModel):
    """Arguments of ``memory_connect``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    from_: str = Field(alias="from", min_length=1, max_length=64, description="Entity to start from ('user', 'moni').")
    to: str | None = Field(default=None, max_length=64, description="Entity to reach; omit to list all connections.")
    max_hops: int = Field(default=3, ge=1, le=6, description="Longest path to consider.")
    as_of: datetime | None = Field(default=None, description="Answer as things stood then (ISO 8601); default now.")
    include_history: bool = Field(default=False, description="Also show relations that no longer hold.")


class RememberArguments(BaseModel):
    """Arguments of ``memory_remember``: what to store and whom it is about; never whose memory it goes to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1, max_length=2000, description="The fact to remember, one sentence.")
    subject: str = Field(
        default=USER,
        min_length=1,
        max_length=MAX_SUBJECT_LENGTH,
        description="Whom it is about: 'user' (the default), a lowercase first name ('moni') or a "
        "lowercase-hyphenated organisation ('acme-corp').",
    )
    kind: Kind | None = Field(default=None, description="What sort of memory it is, when clear.")


class ForgetArguments(BaseModel):
    """Arguments of ``memory_forget``: which memory, by the id ``memory_recall`` returned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=256, description="The id of the memory to delete, as recall returned it.")
