"""Records as memory items: the uniform view recall, the context block and governance hand out.

One conversion per record class, with its confidence as it stands ``now`` (decayed facts and edges,
turn-decayed working entries), built without a second validation (the records were validated when read).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from .._decay import effective_confidence, turn_decay
from .._items import MemoryItem
from .._options import SemanticOptions, WorkingOptions
from .._records import Chunk, Digest, Edge, Episode, Fact, Turn, WorkingEntry
from .._subjects import USER
from ._lineage import Past

__all__ = ["built", "edge_to_memory_item", "marked_past", "to_memory_item"]

_Item = TypeVar("_Item", bound=MemoryItem)
_set = object.__setattr__


def built(cls: type[_Item], /, **values: Any) -> _Item:
    """``cls.model_construct(**values)`` for values naming every field in order, without its per-field loop.

    Recall builds one item per candidate and one ranked item per winner from records validated when
    read; ``model_construct`` looks up aliases and defaults field by field, which cost more than the
    rest of the conversion (tests/memory/test_recall_fast_path.py holds the two equal).
    """
    item = cls.__new__(cls)
    _set(item, "__dict__", values)
    _set(item, "__pydantic_fields_set__", set(values))
    _set(item, "__pydantic_extra__", None)
    _set(item, "__pydantic_private__", None)
    return item


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def edge_to_memory_item(edge: Edge, now: datetime, *, half_life: SemanticOptions | None = None) -> MemoryItem:
    """An edge of the relations graph as a memory item of tier "relation"."""
    opts = half_life or SemanticOptions()
    return built(
        MemoryItem,
        id=edge.id,
        tier="relation",
        subject=edge.source,
        text=edge.text,
        confidence=effective_confidence(edge, now, half_life=opts.half_life),
        created_at=edge.created_at,
        updated_at=edge.updated_at,
        provenance=edge.provenance,
        metadata={
            "source": edge.source,
            "relation": edge.relation,
            "target": edge.target,
            "current": edge.current,  # False: a closed edge, shown only with history asked for
            "valid_from": _iso(edge.valid_from or edge.created_at),
            "valid_to": _iso(edge.valid_to),
        },
    )


def to_memory_item(
    record: WorkingEntry | Episode | Fact | Digest | Edge | Turn | Chunk,  # validated when read: no second validation
    now: datetime,
    *,
    semantic: SemanticOptions | None = None,
    working: WorkingOptions | None = None,
    session_seq: int = 0,
) -> MemoryItem:
    """The uniform view of a record, with its confidence as it stands ``now``."""
    # Facts first: most of what recall converts.
    if isinstance(record, Fact):
        opts = semantic or SemanticOptions()
        return built(
            MemoryItem,
            id=record.id,
            tier="semantic",
            subject=record.subject,
            text=record.text,
            confidence=effective_confidence(record, now, half_life=opts.half_life),
            created_at=record.created_at,
            updated_at=record.updated_at,
            provenance=record.provenance,
            metadata={
                "status": record.status,
                "reinforcements": record.reinforcements,
                "valid_from": _iso(record.valid_from),
                "valid_to": _iso(record.valid_to),
                "superseded_by": record.superseded_by,
                **({"superseded": True} if record.status == "superseded" else {}),
                **record.metadata,
                **({"categories": list(record.categories)} if record.categories else {}),
            },
        )
    if isinstance(record, Edge):
        return edge_to_memory_item(record, now, half_life=semantic)
    if isinstance(record, Turn):
        return built(
            MemoryItem,
            id=record.id,
            tier="episodic",
            subject=record.subject,
            text=record.text,
            confidence=0.5,
            created_at=record.created_at,
            updated_at=record.created_at,
            provenance=(record.id,),
            metadata={"kind": "turn", "session_id": record.session_id, "seq": record.seq, **record.metadata},
        )
    if isinstance(record, WorkingEntry):
        half = (working or WorkingOptions()).salience_half_life
        return built(
            MemoryItem,
            id=record.id,
            tier="working",
            subject=record.subject,
            text=record.text,
            confidence=turn_decay(record.salience, session_seq - record.seq, half_life_turns=half),
            created_at=record.created_at,
            updated_at=record.updated_at,
            provenance=record.provenance,
            metadata={
                "kind": record.kind,
                "session_id": record.session_id,
                **record.metadata,
                **({"categories": list(record.categories)} if record.categories else {}),
            },
        )
    if isinstance(record, Chunk):
        return chunk_to_memory_item(record)
    if isinstance(record, Episode):
        return built(
            MemoryItem,
            id=record.id,
            tier="episodic",
            subject=USER if USER in record.subjects or not record.subjects else record.subjects[0],
            text=record.summary,
            confidence=record.salience,
            created_at=record.created_at,
            updated_at=record.updated_at,
            provenance=record.provenance,
            metadata={
                "session_id": record.session_id,
                "subjects": list(record.subjects),
                "started_at": _iso(record.started_at),
                "ended_at": _iso(record.ended_at),
                **record.metadata,
            },
        )
    return built(
        MemoryItem,
        id=record.id,
        tier="digest",
        subject=record.subject,
        text=record.text,
        confidence=1.0,
        created_at=record.created_at,
        updated_at=record.updated_at,
        provenance=record.provenance,
        metadata=dict(record.metadata),
    )


def chunk_to_memory_item(chunk: Chunk) -> MemoryItem:
    """A passage of a document as a memory item of tier "document", with what the context block cites."""
    return built(
        MemoryItem,
        id=chunk.id,
        tier="document",
        subject=chunk.subject,
        text=chunk.text,
        confidence=1.0,  # the document as the user gave it: nothing decays it
        created_at=chunk.created_at,
        updated_at=chunk.updated_at,
        provenance=(chunk.document_id,),
        metadata={
            **chunk.metadata,
            "document_id": chunk.document_id,
            "title": chunk.title,
            "section": chunk.section,
            "page": chunk.page,
            "index": chunk.index,
            "start": chunk.start,
            "end": chunk.end,
        },
    )


def marked_past(item: MemoryItem, past: Past) -> MemoryItem:
    """``item`` with its past state in ``metadata``: superseded, by what, until when, what holds now."""
    meta = {
        **item.metadata,
        "superseded": True,
        "superseded_by": past.superseded_by,
        "replaced_by": list(past.replaced_by),
        "valid_to": _iso(past.valid_to),
    }
    return item.model_copy(update={"metadata": meta})
