"""Documents: ``ingest`` of text, Markdown, HTML and PDF through the real store, recalled beside the tiers."""

from __future__ import annotations

import io
import itertools
import json
import math
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from tests.memory.documents import HANDBOOK_HTML, HANDBOOK_MD, HANDBOOK_PDF_PAGES, HANDBOOK_TXT, tiny_pdf
from tiermem import (
    Chunk,
    DocumentError,
    EmbedderError,
    IngestProgress,
    InvalidArgumentError,
    MemoryContext,
    MemoryNotFoundError,
    MemorySystem,
    approx_tokens,
    system,
)
from tiermem.memory._store import Where
from tiermem.memory.testing import FrozenClock, HashingEmbedder

pypdf = pytest.importorskip("pypdf")

FORMATS = {
    "handbook.txt": HANDBOOK_TXT.encode(),
    "handbook.md": HANDBOOK_MD.encode(),
    "handbook.html": HANDBOOK_HTML.encode(),
    "handbook.pdf": tiny_pdf(HANDBOOK_PDF_PAGES, title="Staff handbook"),
}


def _system(store: str, clock: FrozenClock, embedder: HashingEmbedder | None = None) -> MemorySystem:
    return system(model="rules", store=store, embedder=embedder or HashingEmbedder(256), clock=clock)


@pytest.fixture
def mem(store_path: str, clock: FrozenClock) -> MemorySystem:
    return _system(store_path, clock)


def _chunks(mem: MemorySystem, ctx: MemoryContext) -> list[Chunk]:
    found = mem.store.query("chunks", Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id}))
    return sorted(found, key=lambda c: (c.document_id, c.index))


# -- each format -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "title", "section", "page"),
    [
        ("handbook.txt", "handbook", "", None),
        ("handbook.md", "Staff handbook", "Staff handbook / Leave", None),
        ("handbook.html", "Staff handbook", "Staff handbook / Leave", None),
        ("handbook.pdf", "Staff handbook", "", 2),
    ],
    ids=["text", "markdown", "html", "pdf"],
)
async def test_each_format_is_recalled_with_its_provenance(
    mem: MemorySystem, ctx: MemoryContext, tmp_path: Path, name: str, title: str, section: str, page: int | None
) -> None:
    path = tmp_path / name
    path.write_bytes(FORMATS[name])
    report = await mem.ingest(ctx, path)
    assert (report.duplicate, report.written, report.document.status) == (False, report.document.chunks, "complete")
    assert report.document.title == title and report.document.origin == str(path.resolve())
    found = await mem.recall(ctx, "how many days of paid leave a year?", tiers=["document"])
    best = found[0]
    assert best.tier == "document" and "25 days of paid leave" in best.text
    meta = best.metadata
    assert (meta["document_id"], meta["title"], meta["section"], meta["page"]) == (
        report.document.id,
        title,
        section,
        page,
    )
    assert 0 <= meta["start"] < meta["end"] <= report.document.characters
    assert "var leave" not in " ".join(c.text for c in _chunks(mem, ctx))  # an HTML script is not text


async def test_plain_text_offsets_index_the_text(mem: MemorySystem, ctx: MemoryContext) -> None:
    await mem.ingest(ctx, HANDBOOK_TXT.encode(), content_type="text/plain", max_tokens=16, overlap=0)
    chunks = _chunks(mem, ctx)
    assert len(chunks) >= 4
    assert all(HANDBOOK_TXT[c.start : c.end] == c.text for c in chunks)  # paragraphs were one blank line apart


# -- chunking ----------------------------------------------------------------------------------


async def test_chunks_keep_to_sections_and_the_budget_with_overlap(mem: MemorySystem, ctx: MemoryContext) -> None:
    sentences = " ".join(f"Rule {i} says the office plant number {i} is watered on day {i}." for i in range(40))
    doc = f"# Office\n\n## Plants\n\n{sentences}\n\n## Kitchen\n\nThe kitchen closes at six.\n"
    await mem.ingest(ctx, doc.encode(), name="office.md", max_tokens=64, overlap=16)
    chunks = _chunks(mem, ctx)
    plants = [c for c in chunks if c.section == "Office / Plants"]
    assert [c.section for c in chunks[len(plants) :]] == ["Office / Kitchen"]
    assert chunks[-1].text == "The kitchen closes at six."  # a heading starts a chunk: nothing of the plants in it
    assert len(plants) > 3
    assert all(approx_tokens(c.text) <= 64 + 2 for c in plants)  # per unit counts, a separator or two apart
    for before, after in itertools.pairwise(plants):
        assert after.start < before.end  # the budget cut: the next chunk repeats the end of this one
        assert before.text.endswith(after.text[: before.end - after.start])
    assert [c.index for c in chunks] == list(range(len(chunks)))


@pytest.mark.parametrize(
    "blob",
    ["A" * 20_000, "data:image/png;base64," + "iVBORw0KGgo" * 2_000, "é" * 9_000],
    ids=["one-letter", "base64-uri", "non-ascii"],
)
async def test_a_word_longer_than_the_budget_is_cut_into_chunks_that_fit(
    mem: MemorySystem, ctx: MemoryContext, blob: str
) -> None:
    doc = f"Before the blob.\n\nThe payload: {blob} and after it.\n"
    await mem.ingest(ctx, doc.encode(), name="blob.txt", max_tokens=64, overlap=0)
    chunks = _chunks(mem, ctx)
    assert all(approx_tokens(c.text) <= 64 for c in chunks)  # before: the blob was one chunk of 5,000 tokens
    assert all(doc[c.start : c.end] == c.text for c in chunks)
    covered = {i for c in chunks for i in range(c.start, c.end)}
    assert covered >= set(range(doc.index(blob), doc.index(blob) + len(blob)))  # every character kept, in order


@pytest.mark.parametrize(
    "code",
    ["a" + " " * 4_000 + "b", "x = 1" + "\n" * 3_000 + "y = 2", "\n".join(" " * (8 * i) + "step" for i in range(200))],
    ids=["spaces-between-words", "blank-lines", "deep-indentation"],
)
async def test_white_space_inside_a_code_block_counts_against_the_budget(
    mem: MemorySystem, ctx: MemoryContext, code: str
) -> None:
    doc = f"# Setup\n\n```\n{code}\n```\n"
    await mem.ingest(ctx, doc.encode(), name="setup.md", max_tokens=64, overlap=8)
    chunks = _chunks(mem, ctx)
    assert chunks and all(approx_tokens(c.text) <= 64 for c in chunks)  # before: 4,000 spaces "cost" 1 token


async def test_a_pdf_chunk_never_crosses_a_page(mem: MemorySystem, ctx: MemoryContext) -> None:
    await mem.ingest(ctx, FORMATS["handbook.pdf"], content_type="application/pdf")
    assert [c.page for c in _chunks(mem, ctx)] == [1, 2, 3]


# -- dedup, replace, forget ------------------------------------------------------------------------


async def test_ingesting_the_same_document_again_changes_nothing(mem: MemorySystem, ctx: MemoryContext) -> None:
    first = await mem.ingest(ctx, FORMATS["handbook.md"], name="handbook.md")
    versions = {t: mem.store.version(t) for t in ("chunks", "documents")}
    again = await mem.ingest(ctx, FORMATS["handbook.md"], name="handbook.md")
    assert (again.duplicate, again.written, again.document.id) == (True, 0, first.document.id)
    assert {t: mem.store.version(t) for t in ("chunks", "documents")} == versions
    assert len(_chunks(mem, ctx)) == first.document.chunks


async def test_a_changed_document_replaces_its_chunks(mem: MemorySystem, ctx: MemoryContext, tmp_path: Path) -> None:
    path = tmp_path / "handbook.md"
    path.write_text(HANDBOOK_MD)
    old = await mem.ingest(ctx, path)
    path.write_text(HANDBOOK_MD.replace("25 days", "30 days"))
    new = await mem.ingest(ctx, path)
    assert new.replaced == [old.document.id] and new.document.id != old.document.id
    assert [d.id for d in await mem.documents(ctx)] == [new.document.id]
    texts = " ".join(c.text for c in _chunks(mem, ctx))
    assert "30 days" in texts and "25 days" not in texts
    assert {c.document_id for c in _chunks(mem, ctx)} == {new.document.id}


async def test_forget_document_removes_it_from_every_table_and_index(mem: MemorySystem, ctx: MemoryContext) -> None:
    kept = await mem.ingest(ctx, b"The car park opens at seven.", name="parking.txt")
    gone = await mem.ingest(ctx, FORMATS["handbook.html"], name="handbook.html")
    assert (await mem.recall(ctx, "paid leave days", tiers=["document"]))[0].metadata["document_id"] == gone.document.id
    assert await mem.forget_document(ctx, gone.document.id) == gone.document.chunks
    where = Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})
    assert [c.document_id for c in _chunks(mem, ctx)] == [kept.document.id]
    assert [d.id for d in await mem.documents(ctx)] == [kept.document.id]
    assert mem.store.lance_text_search("chunks", "paid leave", where, limit=10) == []  # LanceDB's full-text index
    assert mem.store.text_search("chunks", "paid leave", where, limit=10) == []  # this process's word index
    assert not [i for i in await mem.recall(ctx, "paid leave days") if i.tier == "document"]
    with pytest.raises(MemoryNotFoundError):
        await mem.forget_document(ctx, gone.document.id)


async def test_documents_are_per_user(mem: MemorySystem, ctx: MemoryContext) -> None:
    report = await mem.ingest(ctx, FORMATS["handbook.md"], name="handbook.md")
    other = MemoryContext(user_id="u-2", session_id="s-1")
    assert await mem.recall(other, "paid leave days", tiers=["document"]) == []
    with pytest.raises(MemoryNotFoundError):
        await mem.forget_document(other, report.document.id)
    again = await mem.ingest(other, FORMATS["handbook.md"], name="handbook.md")
    assert again.document.id != report.document.id and not again.duplicate


# -- resumable -------------------------------------------------------------------------------------


class _FailingEmbedder(HashingEmbedder):
    """The hashing embedder, failing from its ``fail_at``-th call on (a provider that went down mid-way)."""

    def __init__(self, fail_at: int) -> None:
        super().__init__(256)
        self.calls = 0
        self.fail_at = fail_at

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls >= self.fail_at:
            raise EmbedderError("embedder went away")
        return super().embed(texts)


async def test_a_crashed_ingestion_resumes_without_doubling(
    store_path: str, clock: FrozenClock, ctx: MemoryContext
) -> None:
    doc = "\n\n".join(f"Paragraph {i}: the archive box {i} holds the letters of year {1900 + i}." for i in range(80))
    failing = _system(store_path, clock, _FailingEmbedder(fail_at=2))
    with pytest.raises(EmbedderError):
        await failing.ingest(ctx, doc.encode(), name="archive.txt", max_tokens=16, overlap=0)
    (pending,) = await failing.documents(ctx)
    written = len(_chunks(failing, ctx))
    assert pending.status == "pending" and 0 < written < pending.chunks  # one batch in, the rest not
    healthy = _system(store_path, clock)
    seen: list[IngestProgress] = []
    report = await healthy.ingest(
        ctx, doc.encode(), name="archive.txt", max_tokens=16, overlap=0, on_progress=seen.append
    )
    assert (report.duplicate, report.written, report.document.status) == (False, pending.chunks - written, "complete")
    assert seen[0].chunks_done == written and seen[-1].chunks_done == seen[-1].chunks_total == pending.chunks
    chunks = _chunks(healthy, ctx)
    assert len(chunks) == len({c.id for c in chunks}) == pending.chunks
    assert [c.index for c in chunks] == list(range(pending.chunks))


# -- recall and the context block ------------------------------------------------------------------


async def test_recall_ranks_chunks_with_conversation_memories(mem: MemorySystem, ctx: MemoryContext) -> None:
    await mem.add_semantic_fact(ctx, "The user plans to take paid leave in August.")
    await mem.ingest(ctx, FORMATS["handbook.md"], name="handbook.md")
    found = await mem.recall(ctx, "paid leave")
    assert {"semantic", "document"} <= {i.tier for i in found}
    block = await mem.format_context(ctx, "How many days of paid leave do I get?")
    assert '<section tier="document" title="Documents">' in block
    assert "- [Staff handbook: Leave] Everyone gets 25 days of paid leave a year." in block
    assert "paid leave in August" in block


async def test_a_metadata_filter_matches_a_passage_by_its_documents_metadata(
    mem: MemorySystem, ctx: MemoryContext
) -> None:
    await mem.ingest(ctx, FORMATS["handbook.md"], name="handbook.md", metadata={"team": "people"})
    await mem.ingest(ctx, b"Paid leave for contractors is agreed per contract.", name="contractors.txt")
    found = await mem.recall(ctx, "paid leave", tiers=["document"], where={"team": "people"})
    assert found and {i.metadata["title"] for i in found} == {"Staff handbook"}
    assert await mem.recall(ctx, "paid leave", where={"team": "sales"}) == []
    assert await mem.recall(ctx, "paid leave", where={"channel": "chat"}) == []  # a key no document was given


async def test_a_time_window_admits_the_passages_of_documents_ingested_within_it(
    store_path: str, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = _system(store_path, clock)
    await mem.ingest(ctx, b"The old office closed its doors for good.", name="old.txt")
    clock.advance(days=30)
    ingested = clock.now()
    await mem.ingest(ctx, b"The new office opens its doors at eight.", name="new.txt")
    clock.advance(days=1)
    found = await mem.recall(ctx, "office doors", tiers=["document"], since=ingested - timedelta(hours=1))
    assert [i.metadata["title"] for i in found] == ["new"]
    before = await mem.recall(ctx, "office doors", tiers=["document"], until=ingested - timedelta(days=1))
    assert [i.metadata["title"] for i in before] == ["old"]
    assert await mem.recall(ctx, "office doors", categories=["work"]) == []  # passages carry no labels


async def test_a_document_whose_ingestion_stopped_is_not_recalled_until_it_completes(
    store_path: str, clock: FrozenClock, ctx: MemoryContext
) -> None:
    doc = "\n\n".join(f"Paragraph {i}: the archive box {i} holds the letters of year {1900 + i}." for i in range(80))
    failing = _system(store_path, clock, _FailingEmbedder(fail_at=2))
    with pytest.raises(EmbedderError):
        await failing.ingest(ctx, doc.encode(), name="archive.txt", max_tokens=16, overlap=0)
    assert _chunks(failing, ctx)  # a batch of its passages is stored...
    healthy = _system(store_path, clock)
    assert await healthy.recall(ctx, "archive box letters", tiers=["document"]) == []  # ...and none recalled
    await healthy.ingest(ctx, doc.encode(), name="archive.txt", max_tokens=16, overlap=0)
    assert await healthy.recall(ctx, "archive box letters", tiers=["document"])


# -- bad input writes nothing ----------------------------------------------------------------------


def _encrypted_pdf() -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(FORMATS["handbook.pdf"])))
    writer.encrypt("secret", algorithm="RC4-40")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("html", "title", "texts"),
    [
        ("<html><head><title>Rota</title><body><p>Nina opens on Mondays.</p>", "Rota", ["Nina opens on Mondays."]),
        ("<head><meta charset=utf-8><title>Rota</title><h1>Week</h1><p>Tom closes.</p>", "Rota", ["Tom closes."]),
        ("<head><title>Rota</title>Loose text opens the body.<p>Then a paragraph.</p>", "Rota",
         ["Loose text opens the body.", "Then a paragraph."]),
        ("<p>Before.</p><svg><text>axis label</text><p>After an unclosed svg.</p>", None,
         ["Before.", "After an unclosed svg."]),
        ("<head><title>Rota</title><style>p { color: red }</style></head><p>Kept.</p>", "Rota", ["Kept."]),
    ],
    ids=["unclosed-head-then-body", "unclosed-head-then-heading", "unclosed-head-then-text", "unclosed-svg",
         "closed-head"],
)  # fmt: skip
async def test_html_whose_head_or_svg_is_never_closed_keeps_its_body(
    mem: MemorySystem, ctx: MemoryContext, html: str, title: str | None, texts: list[str]
) -> None:
    """Browsers end an unclosed head at the first body element; before, the whole page was skipped."""
    report = await mem.ingest(ctx, html.encode(), name="rota.html")
    assert report.document.title == (title or "rota")
    assert [c.text for c in _chunks(mem, ctx)] == ["\n\n".join(texts)]


@pytest.mark.parametrize(
    ("source", "kwargs", "message"),
    [
        (b"%PDF-1.4\n1 0 obj << /Type /Catalog", {"content_type": "application/pdf"}, "cannot be read"),
        (FORMATS["handbook.pdf"][:200], {"name": "cut.pdf"}, "cannot be read"),
        (b"just text", {"content_type": "application/pdf"}, "not a PDF"),
        ("encrypted", {"content_type": "application/pdf"}, "encrypted"),
        (b"some words", {}, "content_type or a name"),
        (b"some words", {"name": "notes.docx"}, "cannot tell the format"),
        (b"some words", {"content_type": "image/png"}, "unsupported content type"),
        (b"\n\n  \n", {"content_type": "text/plain"}, "no text"),
        (b"<html><script>x()</script></html>", {"content_type": "text/html"}, "no text"),
        (b"caf\xe9", {"content_type": "text/plain"}, "not UTF-8"),
        ("missing", {}, "no such file"),
        (42, {}, "a path or bytes"),
    ],
    ids=[
        "corrupt-pdf", "truncated-pdf", "not-a-pdf", "encrypted-pdf", "no-type", "unknown-suffix", "unknown-type",
        "empty", "markup-only", "bad-encoding", "missing-file", "not-a-source",
    ],
)  # fmt: skip
async def test_bad_input_raises_and_writes_nothing(
    mem: MemorySystem, ctx: MemoryContext, tmp_path: Path, source: object, kwargs: dict[str, str], message: str
) -> None:
    if source == "encrypted":
        source = _encrypted_pdf()
    elif source == "missing":
        source = tmp_path / "nowhere.md"
    with pytest.raises(DocumentError, match=message):
        await mem.ingest(ctx, source, **kwargs)  # type: ignore[arg-type]
    assert _chunks(mem, ctx) == [] and await mem.documents(ctx) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_tokens": 8}, {"max_tokens": 5000}, {"overlap": 200}, {"title": ""}, {"title": "Notes \ud800"},
        {"metadata": {"source": "crm \udfff"}}, {"metadata": {"\ud800": "key"}}, {"name": "notes\ud800.txt"},
    ],
    ids=["tiny", "huge", "overlap", "title", "title-surrogate", "metadata-surrogate", "metadata-key-surrogate",
         "name-surrogate"],
)  # fmt: skip
async def test_bad_options_raise_before_writing(
    mem: MemorySystem, ctx: MemoryContext, kwargs: dict[str, object]
) -> None:
    with pytest.raises(DocumentError.__mro__[1]):  # InvalidArgumentError
        await mem.ingest(ctx, b"Some words.", content_type="text/plain", **kwargs)  # type: ignore[arg-type]
    assert await mem.documents(ctx) == []


# -- old stores, fact extraction -------------------------------------------------------------------


async def test_a_store_made_before_documents_opens_and_ingests(
    store_path: str, clock: FrozenClock, ctx: MemoryContext
) -> None:
    import lancedb  # only to drop the new tables, leaving the store as an older tiermem left it

    mem = _system(store_path, clock)
    await mem.add_semantic_fact(ctx, "The user likes tea.")
    db = lancedb.connect(store_path)
    for table in ("chunks", "documents"):
        if table in db.list_tables().tables:
            db.drop_table(table)
    reopened = _system(store_path, clock)
    assert [i.text for i in await reopened.recall(ctx, "tea")] == ["The user likes tea."]
    await reopened.ingest(ctx, b"Green tea is kept in the top drawer.", name="kitchen.txt")
    assert {i.tier for i in await reopened.recall(ctx, "tea")} == {"semantic", "document"}


async def test_facts_are_drawn_only_when_asked_with_an_estimate_first(mem: MemorySystem, ctx: MemoryContext) -> None:
    await mem.ingest(ctx, FORMATS["handbook.md"], name="handbook.md")
    assert await mem.facts(ctx) == [] and mem.store.count("turns") == 0  # off by default: nothing observed
    doc = "\n\n".join(f"My colleague number {i} is called Person{i}." for i in range(20))
    estimate = await mem.estimate_ingest(ctx, doc.encode(), name="team.txt", max_tokens=16, overlap=0)
    assert (estimate.ingested, estimate.chunks) == (False, 20)
    assert estimate.model_calls == math.ceil(20 / 8) + 2 and estimate.tokens > 20 * 8
    assert len(await mem.documents(ctx)) == 1  # the estimate wrote nothing
    report = await mem.ingest(ctx, doc.encode(), name="team.txt", max_tokens=16, overlap=0, extract_facts=True)
    assert report.facts is not None and report.facts.turns == 20
    assert any("Person3" in f.text for f in await mem.facts(ctx))  # the rules model's observer and consolidator
    assert await mem.forget_document(ctx, report.document.id) == 20
    assert not [
        t for t in mem.store.query("turns", Where(eq={"user_id": ctx.user_id})) if t.session_id == report.document.id
    ]


async def test_secrets_in_a_document_are_never_stored(mem: MemorySystem, ctx: MemoryContext) -> None:
    key = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    doc = f"# Setup\n\nThe deploy key is {key} and the router password is hunter2x9.\n"
    await mem.ingest(ctx, doc.encode(), name="setup.md")
    (chunk,) = _chunks(mem, ctx)
    assert key not in chunk.text and "[secret:api-key]" in chunk.text
    where = Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})
    assert mem.store.text_search("chunks", key, where, limit=5) == []


# -- export, import, fork ----------------------------------------------------------------------------


async def _exported(mem: MemorySystem, ctx: MemoryContext) -> list[str]:
    buffer = io.StringIO()
    await mem.export(ctx, buffer)
    return buffer.getvalue().splitlines()


@pytest.mark.parametrize("target", ["u-1", "u-2"], ids=["same-user-fresh-store", "another-user"])
async def test_export_then_import_carries_documents_and_their_chunks(
    mem: MemorySystem, ctx: MemoryContext, store_path: str, clock: FrozenClock, target: str
) -> None:
    await mem.ingest(ctx, FORMATS["handbook.md"], name="handbook.md", metadata={"team": "people"})
    lines = await _exported(mem, ctx)
    kinds = [json.loads(line)["kind"] for line in lines[1:]]
    assert kinds.index("document") < kinds.index("chunk")  # what a record points at comes before it
    fresh = _system(store_path + "-fresh", clock, HashingEmbedder(128))  # another embedder: re-embedded
    into = MemoryContext(user_id=target)

    report = await fresh.import_(into, lines)
    (doc,) = await fresh.documents(into)
    assert report.records["document"] == 1 and report.records["chunk"] == doc.chunks == len(_chunks(mem, ctx))
    assert (doc.title, doc.status, doc.metadata) == ("Staff handbook", "complete", {"team": "people"})
    assert {c.document_id for c in _chunks(fresh, into)} == {doc.id}
    found = await fresh.recall(into, "how many days of paid leave?", tiers=["document"], where={"team": "people"})
    assert found and "25 days of paid leave" in found[0].text
    versions = {t: fresh.store.version(t) for t in ("chunks", "documents")}
    await fresh.import_(into, lines)  # a second import writes nothing
    assert {t: fresh.store.version(t) for t in ("chunks", "documents")} == versions
    again = await fresh.ingest(into, FORMATS["handbook.md"], name="handbook.md")  # the path again: replaces it
    assert [d.id for d in await fresh.documents(into)] == [again.document.id]


async def test_an_import_leaves_a_document_the_target_already_holds_as_it_is(
    mem: MemorySystem, ctx: MemoryContext
) -> None:
    other = MemoryContext(user_id="u-2")
    await mem.ingest(ctx, FORMATS["handbook.md"], name="handbook.md", max_tokens=64, overlap=8)
    held = await mem.ingest(other, FORMATS["handbook.md"], name="handbook.md")  # chunked otherwise
    chunks = _chunks(mem, other)
    await mem.import_(other, await _exported(mem, ctx))
    assert [d.id for d in await mem.documents(other)] == [held.document.id]
    assert _chunks(mem, other) == chunks  # nothing of the other chunking mixed in


async def test_fork_copies_documents(mem: MemorySystem, ctx: MemoryContext) -> None:
    await mem.ingest(ctx, FORMATS["handbook.md"], name="handbook.md")
    copy = MemoryContext(user_id="u-copy")
    await mem.fork(ctx, copy)
    assert [d.title for d in await mem.documents(copy)] == ["Staff handbook"]
    await mem.forget_document(ctx, (await mem.documents(ctx))[0].id)  # the copy is independent
    assert await mem.recall(copy, "paid leave", tiers=["document"])


@pytest.mark.parametrize("change", ["orphan-chunk", "chunk-of-another-user"], ids=["orphan", "other-user"])
async def test_an_export_with_a_chunk_of_no_document_in_it_is_refused(
    mem: MemorySystem, ctx: MemoryContext, change: str
) -> None:
    await mem.ingest(ctx, FORMATS["handbook.md"], name="handbook.md")
    lines = await _exported(mem, ctx)
    rows = [json.loads(line) for line in lines]
    if change == "orphan-chunk":
        rows = [r for r in rows if r["kind"] != "document"]
        message = "names a document the file does not hold"
    else:
        next(r for r in rows if r["kind"] == "chunk")["record"]["user_id"] = "u-9"
        message = "another user"
    target = MemoryContext(user_id="u-3")
    with pytest.raises(InvalidArgumentError, match=message):
        await mem.import_(target, [json.dumps(r) for r in rows])
    assert await mem.documents(target) == [] and _chunks(mem, target) == []
