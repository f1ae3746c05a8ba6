"""Typed, keyword-only records for every tier, the graph and the turn journal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from ._clock import utc
from ._context import SHARED_KINDS, MemoryContext, shared_kind
from ._errors import ErrorKind
from ._identity import Scope, fact_id
from ._policy import MemoryPolicy, categories_of
from ._retrieval_keys import retrieval_keys
from ._text import encodable

__all__ = [
    "SHARED_KINDS",
    "Alias",
    "Chunk",
    "Digest",
    "Document",
    "Edge",
    "Episode",
    "Fact",
    "MemoryContext",
    "Message",
    "StoredRecord",
    "Tier",
    "Turn",
    "WorkingEntry",
    "consolidation_order",
    "mentions",
    "shared_kind",
]

Tier = Literal["working", "episodic", "semantic", "digest", "relation", "document"]
"""Where a memory lives; "relation" marks an edge of the relations graph rendered as an item, "document"
a passage of a document the user ingested."""

Instant = Annotated[datetime, AfterValidator(utc)]
"""A record's datetime field: always aware, in UTC. On the datetime fields only, not a validator of
every field: records are parsed on every recall, and a Python call per field doubled a fact's parse."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


class Message(_Record):
    """One OpenAI-style chat message as captured."""

    role: Literal["user", "assistant", "system", "tool"] = Field(description="Who produced the message.")
    content: str = Field(description="The message text.")
    name: str | None = Field(default=None, description="Which person spoke, when known.")

    @field_validator("content", "name")
    @classmethod
    def _encodable(cls, value: str | None) -> str | None:
        return None if value is None else encodable(value, "message text")


class Turn(_Record):
    """A captured turn, journaled before any model work."""

    id: str = Field(description="Deterministic id from scope and sequence number.")
    namespace: str = Field(description="Scope: namespace.")
    user_id: str = Field(description="Scope: user.")
    session_id: str = Field(description="Scope: session.")
    seq: int = Field(ge=0, description="Position of the turn in its session.")
    messages: tuple[Message, ...] = Field(description="The messages of the turn.")
    subject: str = Field(default="user", description="Canonical subject of the person who spoke first.")
    context: str = Field(default="", description="The previous turn's text: answers often reply to it.")
    created_at: Instant = Field(description="Capture time (from the injected clock).")
    status: Literal["pending", "observed", "failed"] = Field(
        default="pending", description='Observer state; "failed" is parked: out of retries until asked.'
    )
    error: str | None = Field(default=None, description="Last observer error, if any.")
    error_kind: ErrorKind | None = Field(
        default=None, description="Whether the last error is permanent (fix the configuration) or transient."
    )
    error_config: str | None = Field(
        default=None, description="Model configuration fingerprint the last error happened under."
    )
    attempts: int = Field(default=0, ge=0, description="Observer attempts so far.")
    retry_at: Instant | None = Field(default=None, description="Not retried by scheduled jobs before this time.")
    key: str | None = Field(default=None, description="The idempotency key the turn was captured under.")
    dated: bool = Field(
        default=False, description="Captured with its real time (an import): what derives from it is dated by it."
    )
    policy: MemoryPolicy | None = Field(
        default=None, description="The capture's own policy override, kept so a later or retried observation obeys it."
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Caller metadata (e.g. dia_id).")

    @property
    def text(self) -> str:
        """The turn as one line per message, speaker first."""
        return "\n".join(f"{m.name or m.role}: {m.content}" for m in self.messages)

    @property
    def search_text(self) -> str:
        """What the session log is searched by: the date, then the turn (dates answer "when" questions)."""
        return f"[{self.created_at.day} {self.created_at:%B %Y}] {self.text}"


class WorkingEntry(_Record):
    """An observation from the current session with a decaying salience."""

    id: str = Field(description="Deterministic id.")
    namespace: str = Field(description="Scope: namespace.")
    user_id: str = Field(description="Scope: user.")
    session_id: str = Field(description="Scope: session.")
    subject: str = Field(description="Canonical subject the observation is about.")
    kind: str = Field(default="note", description="fact, preference, event, plan, note ...")
    text: str = Field(description="The observation.")
    salience: float = Field(default=0.5, ge=0.0, le=1.0, description="Importance when observed.")
    seq: int = Field(default=0, ge=0, description="Session turn number it was observed at.")
    created_at: Instant = Field(description="When observed.")
    updated_at: Instant = Field(description="Last change.")
    status: Literal["active", "overflow", "closed"] = Field(default="active", description="Lifecycle state.")
    provenance: tuple[str, ...] = Field(default=(), description="Turn ids it came from.")
    keys: tuple[str, ...] = Field(
        default=(), description="Retrieval keys: broader terms a later cue may use (searched, never shown)."
    )
    categories: tuple[str, ...] = Field(
        default=(), description="Labels of the policy's vocabulary the model assigned (none for older records)."
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form metadata.")

    @field_validator("keys", mode="before")
    @classmethod
    def _keys(cls, value: object) -> tuple[str, ...]:
        return retrieval_keys(value)

    @field_validator("categories", mode="before")
    @classmethod
    def _categories(cls, value: object) -> tuple[str, ...]:
        return categories_of(value)


class Episode(_Record):
    """A past session encoded as a discrete episode."""

    id: str = Field(description="Deterministic id (one per session).")
    namespace: str = Field(description="Scope: namespace.")
    user_id: str = Field(description="Scope: user.")
    session_id: str = Field(description="The session it encodes.")
    summary: str = Field(description="What happened, in a few sentences.")
    subjects: tuple[str, ...] = Field(default=("user",), description="Canonical subjects involved.")
    started_at: Instant = Field(description="First turn time.")
    ended_at: Instant = Field(description="Last turn time.")
    created_at: Instant = Field(description="When encoded.")
    updated_at: Instant = Field(description="Last change.")
    salience: float = Field(default=0.5, ge=0.0, le=1.0, description="Importance of the episode.")
    status: Literal["pending", "consolidated", "failed", "expired", "parked"] = Field(
        default="pending",
        description='Consolidation state; "failed": encoding failed; "parked": out of retries until asked.',
    )
    error: str | None = Field(default=None, description="Last encoding or consolidation error, if any.")
    error_kind: ErrorKind | None = Field(
        default=None, description="Whether the last error is permanent (fix the configuration) or transient."
    )
    error_config: str | None = Field(
        default=None, description="Model configuration fingerprint the last error happened under."
    )
    provenance: tuple[str, ...] = Field(default=(), description="Turn ids it covers.")
    attempts: int = Field(default=0, ge=0, description="Failed encoding or consolidation attempts in a row.")
    retry_at: Instant | None = Field(default=None, description="Not retried by scheduled jobs before this time.")
    pinned: bool = Field(default=False, description="Pinned by the user: never expires.")
    stored_at: Instant | None = Field(
        default=None, description="When an import took it in (its other times are the history's): TTL counts from it."
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form metadata.")


def consolidation_order(episode: Episode) -> tuple[datetime, str]:
    """The order pending episodes are consolidated in (and batched, and cut by ``limit``): earliest session first."""
    return episode.started_at, episode.id


class Fact(_Record):
    """A consolidated fact about one subject."""

    id: str = Field(description="Deterministic id.")
    namespace: str = Field(description="Scope: namespace.")
    user_id: str = Field(description="Scope: user.")
    subject: str = Field(description="Canonical subject the fact is about.")
    text: str = Field(description="The fact, one sentence.")
    confidence: float = Field(default=0.8, ge=0.0, le=1.0, description="Confidence at the last reinforcement.")
    created_at: Instant = Field(description="When first recorded.")
    updated_at: Instant = Field(description="Last change.")
    reinforced_at: Instant = Field(description="Last time evidence repeated it; decay counts from here.")
    reinforcements: int = Field(default=0, ge=0, description="How often it was reinforced.")
    valid_from: Instant | None = Field(default=None, description="Start of validity, when known.")
    valid_to: Instant | None = Field(default=None, description="End of validity (set when superseded).")
    superseded_by: str | None = Field(default=None, description="Id of the fact that replaced it.")
    status: Literal["active", "superseded", "archived"] = Field(default="active", description="Lifecycle state.")
    provenance: tuple[str, ...] = Field(
        default=(), description="Turn ids it came from; a correction also names the fact it corrects."
    )
    pinned: bool = Field(default=False, description="Pinned by the user: never decays, archived or compacted away.")
    stored_at: Instant | None = Field(
        default=None, description="When an import last took in evidence for it (its other times are the history's)."
    )
    keys: tuple[str, ...] = Field(
        default=(), description="Retrieval keys: broader terms a later cue may use (searched, never shown)."
    )
    categories: tuple[str, ...] = Field(
        default=(), description="Labels of the policy's vocabulary the model assigned (none for older records)."
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form metadata.")

    @field_validator("keys", mode="before")
    @classmethod
    def _keys(cls, value: object) -> tuple[str, ...]:
        return retrieval_keys(value)

    @field_validator("categories", mode="before")
    @classmethod
    def _categories(cls, value: object) -> tuple[str, ...]:
        return categories_of(value)

    @classmethod
    def new(
        cls,
        scope: Scope,
        *,
        subject: str,
        text: str,
        now: datetime,
        confidence: float = 0.8,
        provenance: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        valid_from: datetime | None = None,
        created_at: datetime | None = None,
        reinforced_at: datetime | None = None,
        reinforcements: int = 0,
        pinned: bool = False,
        keys: Iterable[str] = (),
        stored_at: datetime | None = None,
        categories: Iterable[str] = (),
    ) -> Fact:
        """A new active fact of ``scope``'s user, with its deterministic id (:func:`fact_id`).

        The one way tiermem builds a fact; ``created_at`` and ``reinforced_at`` default to ``now``
        (compaction passes its sources' instead).
        """
        return cls(
            id=fact_id(scope, subject=subject, text=text),
            namespace=scope.namespace,
            user_id=scope.user_id,
            subject=subject,
            text=text,
            confidence=confidence,
            created_at=now if created_at is None else created_at,
            updated_at=now,
            reinforced_at=now if reinforced_at is None else reinforced_at,
            reinforcements=reinforcements,
            valid_from=valid_from,
            provenance=tuple(provenance),
            pinned=pinned,
            keys=tuple(keys),
            stored_at=stored_at,
            categories=tuple(categories),
            metadata=dict(metadata or {}),
        )


def mentions(fact: Fact, entity: str) -> bool:
    """Whether ``fact`` is about ``entity`` or names it (a subject slug's words, in order)."""
    return fact.subject == entity or entity.replace("-", " ") in fact.text.lower().replace("-", " ")


class Digest(_Record):
    """A narrative rollup of the primary user."""

    id: str = Field(description="Deterministic id.")
    namespace: str = Field(description="Scope: namespace.")
    user_id: str = Field(description="Scope: user.")
    subject: str = Field(default="user", description="Always the primary user.")
    text: str = Field(description="The narrative.")
    created_at: Instant = Field(description="When written.")
    updated_at: Instant = Field(description="Last change.")
    provenance: tuple[str, ...] = Field(default=(), description="Fact ids it was written from.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form metadata.")


class Edge(_Record):
    """A typed, directed relation between two subjects."""

    id: str = Field(description="Deterministic id from scope, endpoints and relation.")
    namespace: str = Field(description="Scope: namespace.")
    user_id: str = Field(description="Scope: user.")
    source: str = Field(description="Canonical subject the edge starts at.")
    relation: str = Field(description="Relation type, e.g. 'married to'.")
    target: str = Field(description="Canonical subject the edge ends at.")
    confidence: float = Field(default=0.8, ge=0.0, le=1.0, description="Confidence.")
    created_at: Instant = Field(description="When first recorded.")
    updated_at: Instant = Field(description="Last change.")
    reinforcements: int = Field(default=0, ge=0, description="How often it was seen again.")
    provenance: tuple[str, ...] = Field(default=(), description="Turn or fact ids it came from.")
    valid_from: Instant | None = Field(
        default=None, description="Start of validity (None: since ``created_at``, for edges stored before it)."
    )
    valid_to: Instant | None = Field(
        default=None, description="End of validity: None while current; set when its last supporting fact ended."
    )
    support: tuple[str, ...] = Field(
        default=(),
        description="Ids of the facts it was derived from; empty when unknown (then only its endpoints keep it).",
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form metadata.")

    @property
    def text(self) -> str:
        """The edge as a sentence-like line."""
        return f"{self.source} --{self.relation}--> {self.target}"

    @property
    def current(self) -> bool:
        """True while the edge holds (it has not been closed)."""
        return self.valid_to is None

    def valid_at(self, when: datetime) -> bool:
        """Whether the edge held at ``when``: ``valid_from`` (else ``created_at``) <= when < ``valid_to``."""
        when = utc(when)
        start = self.valid_from or self.created_at
        return start <= when and (self.valid_to is None or when < self.valid_to)


class Alias(_Record):
    """A display name that stands for a subject of one user (e.g. "Caroline" for "user")."""

    id: str = Field(description="Deterministic id from scope and name.")
    namespace: str = Field(description="Scope: namespace.")
    user_id: str = Field(description="Scope: user.")
    name: str = Field(description="The display name, lowercased.")
    subject: str = Field(description="The canonical subject it stands for.")
    created_at: Instant = Field(description="When recorded.")


class Chunk(_Record):
    """A passage of an ingested document: searched like any memory, citing where in the document it is."""

    id: str = Field(description="Deterministic id from scope, document and position.")
    namespace: str = Field(description="Scope: namespace.")
    user_id: str = Field(description="Scope: user.")
    document_id: str = Field(description="The document (one version of it) the passage belongs to.")
    title: str = Field(description="The document's title, cited with the passage.")
    section: str = Field(default="", description='Headings above the passage, outermost first ("Install / Linux").')
    page: int | None = Field(default=None, ge=1, description="PDF page the passage starts on.")
    index: int = Field(ge=0, description="Position of the passage in the document.")
    start: int = Field(ge=0, description="Offset of its first character in the document's extracted text.")
    end: int = Field(ge=0, description="Offset just past its last character.")
    text: str = Field(description="The passage.")
    subject: str = Field(default="user", description="Whose document it is: the user who ingested it.")
    status: Literal["active"] = Field(default="active", description="Always active: a document leaves whole.")
    created_at: Instant = Field(description="When ingested.")
    updated_at: Instant = Field(description="Last change.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="The caller's metadata of the document.")

    @property
    def context(self) -> str:
        """Searched with the passage, never shown: the title and headings a question may name."""
        return f"{self.title} {self.section}".strip()


class Document(_Record):
    """One version of an ingested document: what its chunks are, and whether all of them are written."""

    id: str = Field(description="Deterministic id from scope, content hash and chunking.")
    namespace: str = Field(description="Scope: namespace.")
    user_id: str = Field(description="Scope: user.")
    title: str = Field(description="Title: the document's own (first heading, <title>, PDF metadata) or its name.")
    origin: str = Field(default="", description="Path or URL it was read from; a new version of it replaces this.")
    content_type: str = Field(description='What it was parsed as: "text/plain", "text/markdown", "text/html" ...')
    content_hash: str = Field(description="Digest of its bytes.")
    chunks: int = Field(ge=0, description="How many chunks it has.")
    pages: int | None = Field(default=None, ge=0, description="PDF pages.")
    characters: int = Field(ge=0, description="Length of its extracted text.")
    status: Literal["pending", "complete"] = Field(
        default="pending", description='"complete" once every chunk is written; "pending" while (or if) a run stops.'
    )
    created_at: Instant = Field(description="When its ingestion began.")
    updated_at: Instant = Field(description="Last change.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="The caller's metadata.")


StoredRecord = WorkingEntry | Episode | Fact | Digest | Edge | Turn | Alias | Chunk | Document
"""A record some store table holds (one type per table): what reading a table not known until run time gives."""
