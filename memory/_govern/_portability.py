"""Moving one user's memory: ``export`` to JSON Lines, ``import_`` from it, ``fork`` to another user.

The file: a header line (format, export version, store schema version, embedder id, tiermem version,
the source scope), then one line per record, ``{"kind": ..., "record": {...}}``: aliases, turns,
working entries, episodes, facts (with provenance and validity), edges, digests, documents and their
chunks. Vectors are not exported: an import embeds with the target's embedder, so a file moves between
embedders.

An import rewrites the scope to the target context and gives every record an id of the target scope:
the id the library writes it with (a fact's from its subject and text, a turn's from its session and
idempotency key...). A record keeps its id only when that is what a recipe gives it in the target scope
(a user importing their own export), so no file can name, and overwrite, another user's record.
A document's id hashes its chunking, which it does not keep: one the target already holds (the same
bytes from the same path or URL) is that one, else it is named by its content and its source id (a later
``ingest`` of the same path in the target replaces it, as a new version would). Provenance, supersession
links, edge support sets and a chunk's document are rewritten to match: importing the same file
twice writes nothing new, and later captures and consolidations find the imported records by id. A record
the target holds in a newer version (a later ``updated_at``) stays as it is: re-importing an older export
never re-activates a fact updated since.

The whole file is checked before anything is written (JSON without NaN, Infinity or repeated keys, nesting
and numbers within bounds, valid Unicode, every record valid): a bad file raises InvalidArgumentError
naming its line and writes nothing.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from importlib import metadata as _dist
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._blocking import run_blocking
from .._errors import InvalidArgumentError
from .._identity import (
    alias_id,
    chunk_id,
    digest_id,
    document_id,
    edge_id,
    episode_id,
    fact_id,
    observation_id,
    turn_id,
    working_entry_id,
)
from .._json_input import strict_json
from .._records import Alias, Chunk, Digest, Document, Edge, Episode, Fact, MemoryContext, Turn, WorkingEntry
from .._store import SCHEMA_VERSION, TableName, Where
from .._subjects import is_canonical_subject
from .._tiers import checked_context, scope
from ._governance import Governance

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "ExportReport", "ImportReport", "Portability"]

EXPORT_FORMAT = "tiermem-export"
EXPORT_VERSION = 1
MAX_LINE = 4_000_000
"""Characters one line of an export may have (a turn of many long messages fits; a flood does not)."""
Source: TypeAlias = "str | Path | IO[str] | Iterable[str]"
Destination: TypeAlias = "str | Path | IO[str]"

# Export order: what a record points at comes before it.
_KINDS: dict[str, tuple[TableName, type[BaseModel]]] = {
    "alias": ("aliases", Alias),
    "turn": ("turns", Turn),
    "working": ("working", WorkingEntry),
    "episode": ("episodes", Episode),
    "fact": ("facts", Fact),
    "edge": ("edges", Edge),
    "digest": ("digests", Digest),
    "document": ("documents", Document),
    "chunk": ("chunks", Chunk),
}
_UNEMBEDDED: frozenset[TableName] = frozenset({"aliases", "documents"})  # tables without vectors


class ExportReport(BaseModel):
    """What :meth:`Portability.export` wrote."""

    model_config = ConfigDict(frozen=True)
    records: dict[str, int] = Field(description="Lines written per kind (the header not counted).")


class ImportReport(BaseModel):
    """What :meth:`Portability.import_` read and wrote."""

    model_config = ConfigDict(frozen=True)
    records: dict[str, int] = Field(
        description="Records of the file per kind, imported (one the target holds in a newer version stays as it is)."
    )
    source: dict[str, str] = Field(description="The header of the file.")


def _version() -> str:
    try:
        return _dist.version("tiermem")
    except _dist.PackageNotFoundError:
        return "unknown"


# An observation's id hashes its turn and its position in the observer's answer, which the entry does not
# keep: positions below this are tried (answers are far shorter; a later one gets its content id instead).
_POSITIONS = 256


class _TurnRef(NamedTuple):
    """What an observation's id hashes of its turn."""

    namespace: str
    user_id: str
    session_id: str
    id: str


def _turn_key(record: Turn) -> str:
    """The idempotency key naming an imported turn: its own when it has one, else its source id's."""
    return record.key or f"import\x1f{record.id}"


def _derived_id(kind: str, record: Any, target: MemoryContext) -> str:
    """The id the library gives this record in the target scope (the recipes of ``_identity``)."""
    if kind == "fact":
        return fact_id(target, subject=record.subject, text=record.text)
    if kind == "alias":
        return alias_id(target, name=record.name)
    if kind == "digest":
        return digest_id(target)
    if kind == "turn":
        return turn_id(target, session_id=record.session_id, key=_turn_key(record))
    if kind == "episode":
        return episode_id(target, session_id=record.session_id)
    if kind == "edge":
        return edge_id(target, source=record.source, relation=record.relation, target=record.target)
    if kind == "document":
        return document_id(target, content=record.content_hash, chunking=f"imported:{record.id}")
    # An observation's id hashes its turn and position; in the new scope it is keyed by its content.
    return working_entry_id(target, session_id=record.session_id, subject=record.subject, text=record.text)


def _target_id(kind: str, record: Any, target: MemoryContext, ids: dict[str, str], held: dict[str, str]) -> str:
    """The record's id if a recipe gives it that id in the target scope (an observation's, by its turn and
    position), else :func:`_derived_id`; a chunk's by its document's id in ``ids`` and its index; a document
    the target holds (``held``, by :func:`_same_document`) keeps the target's id. Every recipe hashes the
    scope, so another user's id is never kept."""
    if kind == "chunk":
        return chunk_id(target, document_id=ids.get(record.document_id, record.document_id), index=record.index)
    if kind == "document" and _same_document(record) in held:
        return held[_same_document(record)]
    if kind == "working" and record.provenance and record.id.startswith("wm_"):
        turn = _TurnRef(target.namespace, target.user_id, record.session_id, record.provenance[0])
        if any(observation_id(turn, index=i) == record.id for i in range(_POSITIONS)):
            return str(record.id)
    return _derived_id(kind, record, target)


def _same_document(record: Document) -> str:
    """What makes two documents one: the same bytes from the same path or URL."""
    return f"{record.content_hash}\x1f{record.origin}"


def _remap(value: object, ids: dict[str, str]) -> object:
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, list | tuple):
        return type(value)(_remap(v, ids) for v in value)
    return value


def _json_line(line: str) -> dict[str, Any]:
    """One line as a JSON object, or InvalidArgumentError: strict JSON a store can hold, nothing Python
    refuses to build (deep nesting, a 5,000-digit number) escaping as another error."""
    if len(line) > MAX_LINE:
        raise InvalidArgumentError(f"longer than {MAX_LINE} characters")
    row = strict_json(line)
    if not isinstance(row, dict):
        raise InvalidArgumentError("not a JSON object")
    return row


class _Header(BaseModel):
    """The user a header names: both ids required (a MemoryContext would default the namespace)."""

    namespace: str
    user_id: str


def _header(row: dict[str, Any]) -> dict[str, object]:
    if row.get("kind") != "header" or row.get("format") != EXPORT_FORMAT:
        raise InvalidArgumentError("not a tiermem export: the first line must be its header")
    if row.get("export_version") != EXPORT_VERSION:
        raise InvalidArgumentError(f"export version {str(row.get('export_version'))[:40]!r} is not supported")
    try:
        header = _Header.model_validate(row)
        MemoryContext(namespace=header.namespace, user_id=header.user_id)
    except ValidationError as exc:
        raise InvalidArgumentError(f"the header does not name its user: {_first_error(exc)}") from exc
    return row


def _first_error(exc: ValidationError) -> str:
    """A validation error in one line: where and what, without the (possibly huge) input."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "record"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}"[:300] + more


def _lines(source: Source) -> Iterator[str]:
    """The lines of a path (a ``str`` is a path), an open text file or an iterable of strings."""
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.is_file():
            raise InvalidArgumentError(f"no export file at {str(path)!r}")
        try:
            with path.open(encoding="utf-8") as handle:
                yield from handle
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgumentError(f"cannot read {str(path)!r}: {exc}") from exc
        return
    if isinstance(source, bytes | bytearray) or not isinstance(source, Iterable):
        raise InvalidArgumentError(f"source must be a path, a text file or lines, not {type(source).__name__}")
    try:
        for line in source:
            if not isinstance(line, str):
                raise InvalidArgumentError(f"source must yield text lines, not {type(line).__name__}")
            yield line
    except UnicodeDecodeError as exc:  # a text stream (stdin) of bytes that are not UTF-8
        raise InvalidArgumentError(f"cannot read the export: {exc}") from exc


class Portability:
    """Export, import and fork over a :class:`Governance` (its store, embedder and clock)."""

    def __init__(self, governance: Governance) -> None:
        self.governance = governance
        self.store = governance.store

    async def export(self, ctx: MemoryContext, destination: Destination) -> ExportReport:
        """Write the user's memory as JSON Lines to a path or an open text file."""
        return await run_blocking(self.export_sync, checked_context(ctx), destination)

    async def import_(self, ctx: MemoryContext, source: Source) -> ImportReport:
        """Read an export into ``ctx``'s user (validated whole first: a bad line writes nothing); idempotent."""
        return await run_blocking(self.import_sync, checked_context(ctx), source)

    async def fork(self, src: MemoryContext, dst: MemoryContext) -> ImportReport:
        """Copy one user's memory to a new user or namespace; the copies are independent."""
        return await run_blocking(self.fork_sync, checked_context(src), checked_context(dst))

    def _export(self, ctx: MemoryContext) -> Iterator[tuple[str, str]]:
        header = {
            "kind": "header",
            "format": EXPORT_FORMAT,
            "export_version": EXPORT_VERSION,
            "schema_version": SCHEMA_VERSION,
            "embedder_id": self.store.embedder_id,
            "tiermem_version": _version(),
            "namespace": ctx.namespace,
            "user_id": ctx.user_id,
            "exported_at": self.governance.clock.now().isoformat(),
        }
        yield "header", json.dumps(header, sort_keys=True)
        where = Where(eq=scope(ctx))
        for kind, (table, _) in _KINDS.items():
            for record in sorted(self.store.query(table, where), key=lambda r: (r.created_at, r.id)):
                yield kind, json.dumps({"kind": kind, "record": record.model_dump(mode="json")}, sort_keys=True)

    def export_lines(self, ctx: MemoryContext) -> Iterator[str]:
        """The export as JSON lines (without newlines), header first."""
        return (line for _, line in self._export(ctx))

    def export_sync(self, ctx: MemoryContext, destination: Destination) -> ExportReport:
        """The blocking body of ``export``."""
        if isinstance(destination, str | Path):
            try:
                with Path(destination).open("w", encoding="utf-8") as handle:
                    return self._write(ctx, handle)
            except OSError as exc:
                raise InvalidArgumentError(f"cannot write {str(destination)!r}: {exc}") from exc
        if not callable(getattr(destination, "write", None)):
            raise InvalidArgumentError(f"destination must be a path or a text file, not {type(destination).__name__}")
        return self._write(ctx, destination)

    def _write(self, ctx: MemoryContext, handle: IO[str]) -> ExportReport:
        counts: dict[str, int] = {}
        for kind, line in self._export(ctx):
            handle.write(line + "\n")
            if kind != "header":
                counts[kind] = counts.get(kind, 0) + 1
        return ExportReport(records=counts)

    def _parse(self, source: Source) -> tuple[dict[str, object], list[tuple[str, Any]]]:
        """Every line validated before anything is written."""
        header: dict[str, object] | None = None
        records: list[tuple[str, Any]] = []
        for number, line in enumerate(_lines(source), start=1):
            if not line.strip():
                continue
            try:
                row = _json_line(line)
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(f"line {number}: {exc}") from exc
            if header is None:
                header = _header(row)
                continue
            kind = row.get("kind")
            if not isinstance(kind, str) or kind not in _KINDS:
                raise InvalidArgumentError(f"line {number}: unknown kind {str(kind)[:40]!r}")
            try:
                record = _KINDS[kind][1].model_validate(row.get("record"))
            except ValidationError as exc:
                raise InvalidArgumentError(f"line {number}: invalid {kind}: {_first_error(exc)}") from exc
            rec: Any = record
            if (rec.namespace, rec.user_id) != (header.get("namespace"), header.get("user_id")):
                raise InvalidArgumentError(f"line {number}: a {kind} of another user than the header's")
            for subject in _subjects(kind, rec):
                if not is_canonical_subject(subject):
                    raise InvalidArgumentError(f"line {number}: {subject[:80]!r} is not a canonical subject")
            records.append((kind, record))
        if header is None:
            raise InvalidArgumentError("the export is empty: no header line")
        documents = {r.id for kind, r in records if kind == "document"}
        for kind, r in records:
            if kind == "chunk" and r.document_id not in documents:  # it would be recalled with no document to cite
                raise InvalidArgumentError(f"chunk {r.id[:80]!r} names a document the file does not hold")
        return header, records

    def import_sync(self, ctx: MemoryContext, source: Source) -> ImportReport:
        """The blocking body of ``import_``."""
        header, parsed = self._parse(source)
        secrets = self.governance.secrets  # an export from elsewhere may say what this store never keeps
        records = [(kind, secrets.record(ctx, record)) for kind, record in parsed]
        held = {_same_document(d): d.id for d in self.store.query("documents", Where(eq=scope(ctx)))}
        ids: dict[str, str] = {}
        for kind, r in records:  # in the file's order: a chunk's document is named before it
            ids[r.id] = _target_id(kind, r, ctx, ids, held)
        by_table: dict[TableName, list[Any]] = {}
        counts: dict[str, int] = {}
        kept = set(held.values())  # a document the target holds already: neither it nor its chunks again
        for kind, record in records:
            counts[kind] = counts.get(kind, 0) + 1
            if ids[record.id] in kept or (kind == "chunk" and ids[record.document_id] in kept):
                continue
            update: dict[str, object] = {"id": ids[record.id], "namespace": ctx.namespace, "user_id": ctx.user_id}
            if kind == "turn":  # the key its id is derived from, so a later import of it finds it
                update["key"] = _turn_key(record)
            for field in ("provenance", "superseded_by", "support", "document_id"):
                if hasattr(record, field):
                    update[field] = _remap(getattr(record, field), ids)
            if hasattr(record, "metadata"):
                update["metadata"] = {k: _remap(v, ids) for k, v in record.metadata.items()}
            by_table.setdefault(_KINDS[kind][0], []).append(record.model_copy(update=update))
        for table, rows in by_table.items():
            unique = self._newer(ctx, table, list({r.id: r for r in rows}.values()))
            if not unique:
                continue
            if table in _UNEMBEDDED:
                self.store.upsert(table, unique)
            else:
                self.governance.put(table, unique)
        return ImportReport(records=counts, source={k: str(v) for k, v in header.items()})

    def _newer(self, ctx: MemoryContext, table: TableName, rows: list[Any]) -> list[Any]:
        """The rows the target does not hold in a newer version (a later ``updated_at``; a turn or an alias,
        which has none, is never newer than the file's)."""
        stored: dict[str, Any] = {r.id: r for r in self.store.get(table, Where(eq=scope(ctx)), [r.id for r in rows])}
        return [
            r
            for r in rows
            if r.id not in stored or not hasattr(r, "updated_at") or r.updated_at >= stored[r.id].updated_at
        ]

    def fork_sync(self, src: MemoryContext, dst: MemoryContext) -> ImportReport:
        """The blocking body of ``fork``."""
        if (src.namespace, src.user_id) == (dst.namespace, dst.user_id):
            raise InvalidArgumentError("fork needs another user or namespace than its source")
        where = Where(eq=scope(dst))
        if any(self.store.count(table, where) for _, (table, _) in _KINDS.items()):
            raise InvalidArgumentError(f"user {dst.user_id!r} in namespace {dst.namespace!r} already has memories")
        buffer = io.StringIO("\n".join(self.export_lines(src)))
        return self.import_sync(dst, buffer)


def _subjects(kind: str, record: Any) -> list[str]:
    if kind == "edge":
        return [record.source, record.target]
    if kind == "episode":
        return list(record.subjects)
    return [record.subject] if kind in {"fact", "working", "alias", "digest", "turn"} else []
