"""Plain text: paragraphs at blank lines, no sections."""

from __future__ import annotations

from ._parsed import Parsed, assembled, paragraphs

__all__ = ["parse_text"]


def parse_text(text: str) -> Parsed:
    """A plain-text document: one block per paragraph."""
    return assembled(((p, "", None) for p in paragraphs(text)), title=None)
