"""The ``tiermem ingest`` command: documents (text, Markdown, HTML, PDF) into a user's memory, with a progress bar."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from .._records import MemoryContext
from .._write import IngestProgress, IngestReport, MemorySystem
from ._options import awaited, emit, for_user, open_system

__all__ = ["COMMANDS", "ingest"]


def _line(path: str, report: IngestReport) -> str:
    doc = report.document
    if report.duplicate:
        return f"{path}: unchanged ({doc.chunks} chunks) {doc.id}"
    replaced = f", replaced {len(report.replaced)} older version(s)" if report.replaced else ""
    return f"{path}: {doc.chunks} chunks ({report.written} written{replaced}) {doc.id} {doc.title!r}"


def _ingested(mem: MemorySystem, who: MemoryContext, path: str, *, max_tokens: int, overlap: int) -> IngestReport:
    """One file ingested, its chunks counted on a progress bar (stderr: stdout stays the report)."""
    with contextlib.ExitStack() as stack:
        bars: list[Any] = []  # entered at the first report: after the document was read and cut

        def progress(p: IngestProgress) -> None:
            if not bars:
                bar = click.progressbar(length=max(p.chunks_total, 1), label=path, file=sys.stderr)
                bars.append(stack.enter_context(bar))
            bars[0].update(p.chunks_done - bars[0].pos)

        return awaited(mem.ingest(who, path, max_tokens=max_tokens, overlap=overlap, on_progress=progress))


@click.command()
@for_user(by_id=False)
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--max-tokens", type=click.IntRange(16, 1500), default=256, show_default=True, help="tokens per chunk")
@click.option("--overlap", type=click.IntRange(0), default=32, show_default=True, help="tokens a cut chunk repeats")
def ingest(who: MemoryContext, paths: tuple[str, ...], max_tokens: int, overlap: int) -> None:
    """Ingest documents (PATHS: .txt, .md, .html, .pdf) as passages recall finds beside the user's memories.

    Ingesting a file again writes nothing; a changed file replaces its older version. Interrupted? Run it
    again: the chunks already written are kept.
    """
    mem = open_system(create=True)
    reports = [_ingested(mem, who, path, max_tokens=max_tokens, overlap=overlap) for path in paths]
    lines = [_line(path, report) for path, report in zip(paths, reports, strict=True)]
    emit(reports, "\n".join(lines))


COMMANDS = (ingest,)
