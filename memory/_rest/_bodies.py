"""The REST server's request and response bodies that the library has no model of already.

Recall's body is the recall tool's own argument model (:class:`~tiermem.memory._tools.RecallArguments`);
the answers of the governance calls are the library's own views (``MemoryPage``, ``MemoryVersion``,
``ForgetReport`` ...). Like the tools' arguments, every body forbids extra fields: none can name a
namespace or a user, and a field the schema does not list is refused, never ignored. Values are checked
by the operation they reach (the same checks, the same messages as for the library's callers).
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue

from .._records import Tier, Turn, WorkingEntry
from .._subjects import MAX_SUBJECT_LENGTH

__all__ = [
    "CaptureReply",
    "CaptureRequest",
    "ContextReply",
    "ContextRequest",
    "EraseRequest",
    "ForgetQuery",
    "Identity",
    "ListQuery",
    "RecallReply",
    "UpdateRequest",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaptureRequest(_Strict):
    """One turn of a conversation, as the model API saw it, for ``MemorySystem.capture``."""

    session_id: str = Field(description="The conversation the turn is in.")
    messages: list[dict[str, JsonValue]] = Field(
        min_length=1, description="OpenAI-style messages: {role, content}, tool calls and results included."
    )
    metadata: dict[str, JsonValue] | None = Field(
        default=None, description="Kept with the turn; recall and list can filter on it."
    )
    at: AwareDatetime | None = Field(default=None, description="The turn's real time (importing history).")
    idempotency_key: str | None = Field(default=None, description="Names the turn: sending it again adds nothing.")


class CaptureReply(_Strict):
    """What capture did with the turn."""

    turn: Turn = Field(description="The journaled turn.")
    entries: list[WorkingEntry] = Field(description="What was observed in it.")
    deferred: bool = Field(description="Observing it failed; it stays pending and is retried later.")
    duplicate: bool = Field(description="The turn was captured before (same idempotency key): nothing added.")
    error: str | None = Field(default=None, description="Why observing it was deferred.")


class RecallReply(_Strict):
    """Recall's results, best first: compact (id, tier, subject, date, text) unless the request was verbose."""

    results: list[dict[str, JsonValue]]


class ContextRequest(_Strict):
    """The input of this turn, for ``format_context``."""

    input: str = Field(description="What the user just said.")
    session_id: str | None = Field(default=None, description="Adds this conversation's working memory.")
    max_tokens: int | None = Field(default=None, description="The block's budget, 16 or more [default: the store's].")


class ContextReply(_Strict):
    context: str = Field(description="The <memory> block to put in the prompt.")


class ListQuery(_Strict):
    """The query of ``GET /v1/memories``: a page of the user's memories, oldest first."""

    tier: list[Tier] | None = Field(default=None, description="Only these tiers.")
    subject: str | None = Field(default=None, max_length=MAX_SUBJECT_LENGTH, description="Only about this subject.")
    status: list[str] | None = Field(default=None, description="Only these statuses: active, superseded ...")
    since: AwareDatetime | None = Field(default=None, description="Only what was said from this time on.")
    until: AwareDatetime | None = Field(default=None, description="Only what was said before this time.")
    limit: int = Field(default=50, ge=1, le=1000, description="At most this many.")
    cursor: str | None = Field(default=None, max_length=4096, description="A page's next_cursor or prev_cursor.")
    scope: str | None = Field(
        default=None, max_length=300, description="A shared scope the key reads ('team:eng'), not the user's own."
    )


class UpdateRequest(_Strict):
    """A correction of a fact: the new version supersedes it."""

    text: str | None = Field(default=None, description="The corrected fact.")
    subject: str | None = Field(default=None, description="Whom it is about.")


class ForgetQuery(_Strict):
    """The query of ``DELETE /v1/memories/{id}``."""

    include_turns: bool = Field(default=False, description="Also delete the captured turns it came from.")


class EraseRequest(_Strict):
    confirm: bool = Field(description="Must be true: every record of the user is deleted for good.")


class Identity(_Strict):
    """Whose memory the request's key reaches."""

    namespace: str
    user_id: str
