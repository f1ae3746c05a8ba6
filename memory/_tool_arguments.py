"""The arguments of the agent tools: the bounds on them as a model sends them, and the argument model
of each entry of the tool table (:data:`~._tools.TOOLS`).

Vocabulary, so the table can name the models without importing the folders that implement the tools.
Every model forbids extra fields: no argument can name another namespace, user or session. A model's
docstring and field descriptions are the tool's JSON schema as the model reads it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from ._policy import MAX_CATEGORIES, category_label
from ._subjects import MAX_SUBJECT_LENGTH, USER

__all__ = [
    "MAX_ARGUMENT_BYTES",
    "MAX_ARGUMENT_DEPTH",
    "ConnectArguments",
    "ForgetArguments",
    "RecallArguments",
    "RememberArguments",
    "parse_arguments",
    "recall_arguments",
]

MAX_ARGUMENT_BYTES = 64 * 1024
"""Largest tool arguments accepted, in bytes of JSON (a memory tool's arguments take a few hundred)."""
MAX_ARGUMENT_DEPTH = 20
"""Deepest nesting of objects and lists accepted in tool arguments (the schemas need two levels)."""

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
    since: datetime | None = Field(default=None, description="Only what was said from this date on (YYYY-MM-DD).")
    until: datetime | None = Field(default=None, description="Only what was said before this date (YYYY-MM-DD).")
    verbose: bool = Field(
        default=False, description="Return every field (confidence, scores, provenance, metadata), not just the text."
    )
    categories: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CATEGORIES,
        description="Only memories labelled with one of these categories (the application's labels); all when omitted.",
    )

    @field_validator("since", "until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        """A model writes dates without a timezone: read them as UTC."""
        return value if value is None or value.tzinfo is not None else value.replace(tzinfo=UTC)

    @field_validator("categories", mode="before")
    @classmethod
    def _labels(cls, value: object) -> object:
        """Labels as stored ("Work " is "work"); before a vocabulary's literals check them."""
        if isinstance(value, list):
            return [category_label(v) for v in value]
        return value


@functools.cache
def recall_arguments(vocabulary: tuple[str, ...] | None) -> type[RecallArguments]:
    """The recall tool's arguments over a memory whose policy has the labels ``vocabulary``: ``categories`` may
    name only those, and the schema a model is sent lists them (:class:`RecallArguments` without one)."""
    if not vocabulary:
        return RecallArguments
    allowed: Any = Literal.__getitem__(vocabulary)
    field: Any = Field(
        default=None,
        min_length=1,
        max_length=MAX_CATEGORIES,
        description=f"Only memories labelled with one of these categories: {', '.join(vocabulary)}; all when omitted.",
    )
    made: Any = create_model("RecallArguments", __base__=RecallArguments, categories=(list[allowed] | None, field))
    made.__doc__ = RecallArguments.__doc__
    return cast(type[RecallArguments], made)


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
    scope: Literal["user", "agent", "shared"] = Field(
        default="user",
        description="Whose memory: 'user' (the default), 'agent' for a lesson about how you work (your own "
        "procedures), 'shared' for the team's memory the context writes to.",
    )


class ForgetArguments(BaseModel):
    """Arguments of ``memory_forget``: which memory, by the id ``memory_recall`` returned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=256, description="The id of the memory to delete, as recall returned it.")


def parse_arguments(arguments: object) -> dict[str, object]:
    """Tool-call arguments (a JSON text or an object) as a dict, within the size and depth limits.

    Raises ValueError with a message for the model when they are not a JSON object or exceed a limit.
    """
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        # Characters first: a cheap bound before encoding, which can only make the text longer.
        if len(arguments) > MAX_ARGUMENT_BYTES or len(arguments.encode("utf-8", "surrogatepass")) > MAX_ARGUMENT_BYTES:
            raise ValueError(f"arguments are larger than {MAX_ARGUMENT_BYTES // 1024} KiB")
        try:
            raw: object = json.loads(arguments)
        except RecursionError:  # the decoder recurses per level; far deeper than the limit below
            raise ValueError(f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels") from None
    else:
        raw = arguments
    if not isinstance(raw, Mapping):
        raise ValueError("arguments must be a JSON object")
    _check_bounds(raw)
    return dict(raw)


def _check_bounds(arguments: Mapping[object, object]) -> None:
    """Walk the arguments without recursion (an object may even contain itself), counting depth and size."""
    size = 0
    stack: list[tuple[object, int]] = [(arguments, 1)]
    while stack:
        node, depth = stack.pop()
        size += 1
        if isinstance(node, str):
            try:
                size += len(node.encode("utf-8"))
            except UnicodeEncodeError:  # a lone surrogate ("\ud800") would fail later, in the store
                raise ValueError("arguments contain text that is not valid Unicode") from None
        elif isinstance(node, (Mapping, list, tuple)):
            if depth > MAX_ARGUMENT_DEPTH:
                raise ValueError(f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels")
            size += 2 * len(node) if isinstance(node, Mapping) else len(node)  # counted before it is copied
            if size > MAX_ARGUMENT_BYTES:
                raise ValueError(f"arguments are larger than {MAX_ARGUMENT_BYTES // 1024} KiB")
            children: list[object] = [*node.keys(), *node.values()] if isinstance(node, Mapping) else list(node)
            stack.extend((child, depth + 1) for child in children)
        if size > MAX_ARGUMENT_BYTES:
            raise ValueError(f"arguments are larger than {MAX_ARGUMENT_BYTES // 1024} KiB")
