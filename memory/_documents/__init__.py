"""Documents for ``ingest``: read a file or bytes, parse it by its format, cut it into passages on its structure.

One module per format; the third-party parsers (markdown-it-py, pypdf) are imported only there, and only
when a document of their format comes.
"""

from __future__ import annotations

from ._chunking import Passage, checked_budget, chunked, chunking_recipe
from ._parsed import Block, Parsed
from ._sources import CONTENT_TYPES, Loaded, load, parse

__all__ = [
    "CONTENT_TYPES",
    "Block",
    "Loaded",
    "Parsed",
    "Passage",
    "checked_budget",
    "chunked",
    "chunking_recipe",
    "load",
    "parse",
]
