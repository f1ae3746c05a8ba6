"""A document as its parser leaves it: its text, cut into blocks (paragraphs, list items, code) that know
their section and page, and its title when the document names one.

Every parser (one module per format) hands its blocks to :func:`assembled`, the one place offsets are
counted: a block's ``start``/``end`` index the document's extracted text, its blocks joined by blank lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .._errors import DocumentError

__all__ = ["Block", "Parsed", "assembled", "paragraphs"]

_SEPARATOR = "\n\n"
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
_SPACE = re.compile(r"[ \t\r\f\v]+")


@dataclass(frozen=True, kw_only=True)
class Block:
    """One paragraph-like piece of a document, where it stands in the extracted text."""

    text: str
    section: str
    page: int | None
    start: int
    end: int


@dataclass(frozen=True, kw_only=True)
class Parsed:
    """A parsed document: its extracted text, its blocks in order, its own title (if any) and pages (PDF)."""

    text: str
    blocks: tuple[Block, ...]
    title: str | None
    pages: int | None = None


def paragraphs(text: str) -> list[str]:
    """``text`` cut at blank lines, each paragraph's spaces folded (its line breaks kept), empty ones dropped."""
    parts = (_SPACE.sub(" ", part).strip() for part in _BLANK_LINE.split(text.replace("\r\n", "\n")))
    return [part for part in parts if part]


def assembled(pieces: Iterable[tuple[str, str, int | None]], *, title: str | None, pages: int | None = None) -> Parsed:
    """A document from its ``(text, section, page)`` pieces in order; raises DocumentError when no text is left."""
    blocks: list[Block] = []
    offset = 0
    for text, section, page in pieces:
        if not text.strip():
            continue
        if blocks:
            offset += len(_SEPARATOR)
        blocks.append(Block(text=text, section=section, page=page, start=offset, end=offset + len(text)))
        offset += len(text)
    if not blocks:
        raise DocumentError("the document has no text to ingest (empty, or only images or markup)")
    full = _SEPARATOR.join(b.text for b in blocks)
    return Parsed(text=full, blocks=tuple(blocks), title=(title or "").strip() or None, pages=pages)
