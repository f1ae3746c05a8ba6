"""PDF, read by pypdf (the ``documents`` extra): the only module that imports it, where its errors become ours.

A page's text is cut into paragraphs at blank lines; each paragraph knows its page. A PDF that cannot
be read (corrupt, truncated, encrypted with a password) raises DocumentError before anything is written.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

from .._errors import ConfigurationError, DocumentError
from ._parsed import Parsed, assembled, paragraphs

__all__ = ["parse_pdf"]


def parse_pdf(data: bytes) -> Parsed:
    """A PDF document: its pages' paragraphs in order; titled by its metadata when it has a title."""
    try:
        import pypdf
        from pypdf.errors import PyPdfError
    except ImportError as exc:
        raise ConfigurationError(f"reading PDF needs pypdf: pip install 'tiermem[documents]' ({exc})") from None
    if not data.startswith(b"%PDF-"):
        raise DocumentError("not a PDF: the data does not start with %PDF-")
    # pypdf logs every repair it makes of a damaged file; the outcome is what matters here (an error or text)
    quiet = logging.getLogger("pypdf")
    level, quiet.level = quiet.level, logging.ERROR
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError("the PDF is encrypted with a password; decrypt it first")

        def pieces() -> Iterator[tuple[str, str, int | None]]:
            for number, page in enumerate(reader.pages, start=1):
                for paragraph in paragraphs(page.extract_text() or ""):
                    yield paragraph, "", number

        blocks = list(pieces())  # read whole here: a page that fails to parse fails before any write
        title = reader.metadata.title if reader.metadata else None
        return assembled(blocks, title=str(title) if title else None, pages=len(reader.pages))
    except DocumentError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        # pypdf raises its own errors for most damage, and plain ones for objects it finds malformed mid-parse
        raise DocumentError(f"the PDF cannot be read ({type(exc).__name__}: {exc})") from None
    finally:
        quiet.level = level
