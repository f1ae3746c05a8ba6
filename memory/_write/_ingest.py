"""``ingest``: documents (text, Markdown, HTML, PDF) as passages recall finds beside the tiers.

A document is read, parsed and cut into passages (:mod:`.._documents`) before anything is written,
so a bad one writes nothing. Its id names its bytes and the way they were cut (:func:`document_id`),
so ingesting it again is a no-op; a new version of the same path or URL replaces the older one once
it is whole. Writing is resumable: the document is recorded ``pending`` first, its chunks (ids from
the document and their position) are written in batches, only the missing ones on a rerun, and it is
marked ``complete`` last. Secrets in a passage (and the title) are replaced by their placeholders
(the capability's redaction, ``redact=``) before it is embedded or stored; offsets stay the document's.

Facts are drawn from a document only when asked (``extract_facts``): its passages go through the
pipeline as one imported conversation (observer, consolidation, digest), one model call per observer
window of passages; :meth:`Ingestion.estimate` says what that costs before it runs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from .._blocking import run_blocking
from .._documents import Passage, checked_budget, chunked, chunking_recipe, load, parse
from .._errors import InvalidArgumentError, MemoryNotFoundError
from .._govern import Access
from .._identity import chunk_id, content_hash, document_id
from .._records import Chunk, Document, MemoryContext
from .._scope import checked_context, scope
from .._store import Where
from .._text import encodable, encodable_values
from .._tiers import Tiers
from ._conversation_import import OBSERVE_WINDOW, HistoryReport


class _Importer(Protocol):
    """The write side's history import, which ``extract_facts`` feeds the passages to."""

    async def import_conversations(
        self, ctx: MemoryContext, conversations: Sequence[Mapping[str, object]]
    ) -> HistoryReport: ...


__all__ = ["DEFAULT_CHUNK_TOKENS", "DEFAULT_OVERLAP", "IngestEstimate", "IngestProgress", "IngestReport", "Ingestion"]

DEFAULT_CHUNK_TOKENS = 256
"""Tokens a passage holds at most, by default: a few paragraphs, small enough to rank on one topic."""
DEFAULT_OVERLAP = 32
"""Tokens of a passage cut by the budget that the next one repeats, by default."""
MAX_CHUNK_TOKENS = 1500  # a passage is stored as one memory text (at most 8000 characters)
BATCH = 32  # chunks per write: what a crash can leave to redo


@dataclass(frozen=True, kw_only=True)
class IngestProgress:
    """Where an ingestion is: chunks written (or found written by an earlier run) of the document's total."""

    document_id: str
    chunks_done: int
    chunks_total: int


@dataclass(frozen=True, kw_only=True)
class IngestReport:
    """What ``ingest`` did with one document."""

    document: Document
    written: int
    """Chunks written by this run (the rest were written by an interrupted earlier one, or it is a duplicate)."""
    duplicate: bool
    """The same bytes were ingested the same way before, whole: nothing was written."""
    replaced: list[str]
    """Ids of the older versions of the same path or URL removed."""
    facts: HistoryReport | None = None
    """The fact extraction's report, when ``extract_facts`` asked for one."""


@dataclass(frozen=True, kw_only=True)
class IngestEstimate:
    """What ingesting a document would write and what drawing facts from it would cost (nothing is written)."""

    document_id: str
    title: str
    chunks: int
    pages: int | None
    ingested: bool
    """Already ingested whole: ``ingest`` would write nothing."""
    tokens: int
    """Tokens of its passages: what the observer reads, at the least, to draw facts from it."""
    model_calls: int
    """Model calls of the extraction: one per observer window of passages, a consolidation and a digest."""


@dataclass(frozen=True, kw_only=True)
class _Prepared:
    document: Document
    chunks: list[Chunk]


class Ingestion:
    """Ingest, estimate, list and forget documents of one store's users."""

    def __init__(self, *, tiers: Tiers, importer: _Importer, count: Callable[[str], int], access: Access) -> None:
        self.tiers = tiers
        self.importer = importer
        self.count = count
        self.access = access

    def owner(self, ctx: object, shared: object) -> MemoryContext:
        """Whose documents a call reads or writes: ``ctx``'s user's own, or (``shared``) its write scope's,
        which needs a write grant; checked at the one choke point either way."""
        if not isinstance(shared, bool):
            raise InvalidArgumentError(f"shared must be a bool, not {type(shared).__name__}")
        checked = self.access.check(ctx)
        return self.access.writable(checked, checked.write_scope) if shared else checked

    def prepare(
        self,
        ctx: MemoryContext,
        source: object,
        *,
        content_type: str | None,
        name: str | None,
        title: str | None,
        metadata: Mapping[str, object] | None,
        max_tokens: int,
        overlap: int,
    ) -> _Prepared:
        """The document and its chunks, read, parsed and cut; raises before anything is written."""
        max_tokens, overlap = checked_budget(max_tokens, overlap)
        if max_tokens > MAX_CHUNK_TOKENS:
            raise InvalidArgumentError(f"max_tokens must be at most {MAX_CHUNK_TOKENS}, not {max_tokens}")
        if title is not None and (not isinstance(title, str) or not title.strip()):
            raise InvalidArgumentError("title must be a non-empty string")
        encodable(title or "", "title")
        if metadata is not None and not (isinstance(metadata, Mapping) and all(isinstance(k, str) for k in metadata)):
            raise InvalidArgumentError("metadata must be a mapping with string keys")
        encodable_values(metadata, "metadata")
        loaded = load(source, content_type=content_type, name=name)
        parsed = parse(loaded)
        passages = chunked(parsed, max_tokens=max_tokens, overlap=overlap, count=self.count)
        now = self.tiers.clock.now()
        named = self.tiers.secrets.for_user(ctx, " ".join((title or parsed.title or loaded.name_title).split()))
        doc = Document(
            id=document_id(ctx, content=content_hash(loaded.data), chunking=chunking_recipe(max_tokens, overlap)),
            namespace=ctx.namespace, user_id=ctx.user_id, title=named, origin=loaded.origin,
            content_type=loaded.content_type, content_hash=content_hash(loaded.data), chunks=len(passages),
            pages=parsed.pages, characters=len(parsed.text), created_at=now, updated_at=now,
            metadata=dict(metadata or {}),
        )  # fmt: skip
        return _Prepared(document=doc, chunks=[self._chunk(ctx, doc, i, p) for i, p in enumerate(passages)])

    def _chunk(self, ctx: MemoryContext, doc: Document, index: int, passage: Passage) -> Chunk:
        text = encodable(self.tiers.secrets.for_user(ctx, passage.text), "document text")
        return Chunk(
            id=chunk_id(ctx, document_id=doc.id, index=index), namespace=ctx.namespace, user_id=ctx.user_id,
            document_id=doc.id, title=doc.title, section=passage.section, page=passage.page, index=index,
            start=passage.start, end=passage.end, text=text,
            created_at=doc.created_at, updated_at=doc.created_at, metadata=dict(doc.metadata),
        )  # fmt: skip

    async def ingest(
        self,
        ctx: MemoryContext,
        source: str | os.PathLike[str] | bytes,
        *,
        content_type: str | None = None,
        name: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, object] | None = None,
        max_tokens: int = DEFAULT_CHUNK_TOKENS,
        overlap: int = DEFAULT_OVERLAP,
        extract_facts: bool = False,
        on_progress: Callable[[IngestProgress], None] | None = None,
        shared: bool = False,
    ) -> IngestReport:
        """Ingest a document (text, Markdown, HTML, PDF) as passages recall ranks with the other memories.

        ``source``: a file path, or bytes already fetched with their ``content_type`` or a ``name`` (file name
        or URL) whose suffix says it. Cut on its structure (headings, paragraphs, pages) into chunks of at most
        ``max_tokens``, ``overlap`` tokens repeated where the budget cuts. Each chunk cites the document's
        title, its section, page and character offsets. Ingesting the same bytes again writes nothing; a new
        version of the same path or URL replaces the old one. Resumable: a rerun after a crash writes only
        the missing chunks. Bad input (no such file, an unknown type, a corrupt PDF) raises DocumentError and
        writes nothing. ``extract_facts``: also draw facts from it through the pipeline (model calls: see
        :meth:`estimate_ingest`). ``shared``: into the context's ``write_scope`` (a write grant), for everyone
        reading that scope.
        """
        ctx = await run_blocking(self.owner, ctx, shared)
        if not isinstance(extract_facts, bool):
            raise InvalidArgumentError(f"extract_facts must be a bool, not {type(extract_facts).__name__}")
        prepared = await run_blocking(
            self.prepare, ctx, source, content_type=content_type, name=name, title=title, metadata=metadata,
            max_tokens=max_tokens, overlap=overlap,
        )  # fmt: skip
        doc, chunks = prepared.document, prepared.chunks
        store = self.tiers.store
        where = Where(eq=scope(ctx))
        found = await run_blocking(store.get, "documents", where, [doc.id])
        if found and found[0].status == "complete":
            if on_progress is not None:
                on_progress(IngestProgress(document_id=doc.id, chunks_done=len(chunks), chunks_total=len(chunks)))
            facts = await self._extract(ctx, found[0], chunks) if extract_facts else None
            return IngestReport(document=found[0], written=0, duplicate=True, replaced=[], facts=facts)
        if found:  # an interrupted run's: it began then
            doc = doc.model_copy(update={"created_at": found[0].created_at})
        else:
            await run_blocking(store.upsert, "documents", [doc])
        ids = [c.id for c in chunks]
        present = set(await run_blocking(store.column_values, "chunks", Where(eq=scope(ctx), isin={"id": ids}), "id"))
        missing = [c for c in chunks if c.id not in present]
        done = len(chunks) - len(missing)
        for start in range(0, len(missing), BATCH):
            if on_progress is not None:
                on_progress(IngestProgress(document_id=doc.id, chunks_done=done, chunks_total=len(chunks)))
            batch = missing[start : start + BATCH]
            await run_blocking(self.tiers.write, "chunks", batch)
            done += len(batch)
        if on_progress is not None:
            on_progress(IngestProgress(document_id=doc.id, chunks_done=done, chunks_total=len(chunks)))
        replaced = await run_blocking(self._replace_older, ctx, doc)
        complete = doc.model_copy(update={"status": "complete", "updated_at": self.tiers.clock.now()})
        await run_blocking(store.upsert, "documents", [complete])
        facts = await self._extract(ctx, complete, chunks) if extract_facts else None
        return IngestReport(document=complete, written=len(missing), duplicate=False, replaced=replaced, facts=facts)

    async def estimate_ingest(
        self,
        ctx: MemoryContext,
        source: str | os.PathLike[str] | bytes,
        *,
        content_type: str | None = None,
        name: str | None = None,
        title: str | None = None,
        max_tokens: int = DEFAULT_CHUNK_TOKENS,
        overlap: int = DEFAULT_OVERLAP,
        observe_window: int = OBSERVE_WINDOW,
        shared: bool = False,
    ) -> IngestEstimate:
        """What :meth:`ingest` would write, and the tokens and model calls ``extract_facts`` costs; writes nothing.

        ``observe_window``: the passages per observer call (as ``import_conversations`` sends them);
        ``shared``: as :meth:`ingest`'s."""
        ctx = await run_blocking(self.owner, ctx, shared)
        if isinstance(observe_window, bool) or not isinstance(observe_window, int) or observe_window < 1:
            raise InvalidArgumentError(f"observe_window must be an int >= 1, not {observe_window!r}")
        prepared = await run_blocking(
            self.prepare, ctx, source, content_type=content_type, name=name, title=title, metadata=None,
            max_tokens=max_tokens, overlap=overlap,
        )  # fmt: skip
        doc, chunks = prepared.document, prepared.chunks
        found = await run_blocking(self.tiers.store.get, "documents", Where(eq=scope(ctx)), [doc.id])
        return IngestEstimate(
            document_id=doc.id, title=doc.title, chunks=len(chunks), pages=doc.pages,
            ingested=bool(found) and found[0].status == "complete",
            tokens=sum(self.count(_turn_text(doc, c)) for c in chunks),
            model_calls=math.ceil(len(chunks) / observe_window) + 2,  # observer windows, a consolidation, a digest
        )  # fmt: skip

    async def _extract(self, ctx: MemoryContext, doc: Document, chunks: Sequence[Chunk]) -> HistoryReport:
        """Draw facts from the passages: one imported conversation (turns already journaled are skipped)."""
        turns = [{"at": doc.created_at, "messages": [{"role": "user", "content": _turn_text(doc, c)}]} for c in chunks]
        return await self.importer.import_conversations(ctx, [{"session_id": doc.id, "turns": turns}])

    async def documents(self, ctx: MemoryContext, *, shared: bool = False) -> list[Document]:
        """The user's ingested documents (``shared``: its write scope's), the latest first (``status``
        "pending": an ingestion that stopped)."""
        return await run_blocking(lambda: self.listed(self.owner(ctx, shared)))

    async def forget_document(self, ctx: MemoryContext, document_id: str, *, shared: bool = False) -> int:
        """Delete a document whole (its chunks, its record, facts drawn from it alone); returns the chunks deleted.

        ``shared``: one of the context's write scope (a write grant)."""
        return await run_blocking(lambda: self.forget(self.owner(ctx, shared), document_id))

    def listed(self, ctx: MemoryContext) -> list[Document]:
        """The user's documents (every version still stored), the latest ingested first."""
        found = self.tiers.store.query("documents", Where(eq=scope(checked_context(ctx))))
        return sorted(found, key=lambda d: (d.created_at, d.id), reverse=True)

    def forget(self, ctx: MemoryContext, doc_id: str) -> int:
        """Delete a document whole: its chunks, its record, and what facts extraction derived from it alone.

        Returns the chunks deleted. Chunks first, the record last: a crash between leaves the record, and a rerun
        finishes.
        """
        checked_context(ctx)
        if not isinstance(doc_id, str) or not doc_id:
            raise InvalidArgumentError("document_id must be a non-empty string")
        found = self.tiers.store.get("documents", Where(eq=scope(ctx)), [doc_id])
        if not found:
            raise MemoryNotFoundError(f"no document {doc_id!r} for this user")
        return self._remove(ctx, found[0])

    def _remove(self, ctx: MemoryContext, doc: Document) -> int:
        store = self.tiers.store
        where = scope(ctx)
        ids = [chunk_id(ctx, document_id=doc.id, index=i) for i in range(doc.chunks)]
        chunks = store.count("chunks", Where(eq=where, isin={"id": ids})) if ids else 0
        if chunks:
            store.delete("chunks", Where(eq=where, isin={"id": ids}))
        self._remove_extraction(ctx, doc)
        store.delete("documents", Where(eq=where, isin={"id": [doc.id]}))
        return chunks

    def _remove_extraction(self, ctx: MemoryContext, doc: Document) -> None:
        """The conversation ``extract_facts`` imported (session: the document id) and the facts only it supports."""
        store = self.tiers.store
        session = Where(eq={**scope(ctx), "session_id": doc.id})
        turns = {t.id for t in store.query("turns", session)}
        if not turns:
            return
        facts = [
            f.id for f in self.tiers.facts(ctx, include_inactive=True) if f.provenance and set(f.provenance) <= turns
        ]
        if facts:
            store.delete("facts", Where(eq=scope(ctx), isin={"id": facts}))
        for table in ("working", "episodes", "turns"):
            if store.count(table, session):
                store.delete(table, session)

    def _replace_older(self, ctx: MemoryContext, doc: Document) -> list[str]:
        """Remove the other versions of the document's path or URL (none when it came without a name)."""
        if not doc.origin:
            return []
        older = [d for d in self.listed(ctx) if d.origin == doc.origin and d.id != doc.id]
        for old in older:
            self._remove(ctx, old)
        return [d.id for d in older]


def _turn_text(doc: Document, chunk: Chunk) -> str:
    """A passage as the user's message to the observer: whose document it is from, and where in it."""
    where = f" ({chunk.section})" if chunk.section else ""
    page = f", page {chunk.page}" if chunk.page else ""
    return f'From my document "{doc.title}"{where}{page}: {chunk.text}'
