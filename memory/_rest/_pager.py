"""The inspector's paging: where a list's page stands ("items X to Y of N") and the links to its neighbours.

A list of memories pages by ``list()``'s own cursors (see :mod:`.._paging`); the users, held whole in memory,
by an offset. A link changes only its own list's place in the address: every filter and every other list's
place on the page is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.requests import Request

from .._govern import MemoryPage

__all__ = ["Pager", "href", "offset_pager", "page_pager"]


@dataclass(frozen=True)
class Pager:
    """Items ``first`` to ``last`` (from 1; both 0 when none) of ``total`` shown; the pages around, or None."""

    first: int
    last: int
    total: int
    prev: str | None
    next: str | None


def href(request: Request, anchor: str, **changes: str | None) -> str:
    """This page's address with ``changes`` to its query (None drops a value), scrolled to ``anchor``."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k not in changes]
    query += [(k, v) for k, v in changes.items() if v is not None]
    return request.url.path + (f"?{urlencode(query)}" if query else "") + f"#{anchor}"


def page_pager(request: Request, param: str, page: MemoryPage, size: int) -> Pager:
    """The pager of a ``list()`` page of ``size`` whose cursor the query holds as ``param`` (also the
    section's anchor); the page before the second is the first, at its own plain address."""

    def to(cursor: str | None, first: bool = False) -> str | None:
        return None if cursor is None else href(request, param, **{param: None if first else cursor})

    shown = len(page.items)
    first, last = (page.offset + 1, page.offset + shown) if shown else (0, 0)
    return Pager(first, last, page.total, to(page.prev_cursor, page.offset <= size), to(page.next_cursor))


def offset_pager(request: Request, param: str, start: int, shown: int, total: int, size: int) -> Pager:
    """The pager of ``shown`` items from ``start`` (0-based) of ``total``, pages of ``size``, the offset in
    ``param``; a start past the end (the list shrank) links back to the last page."""
    before = min(start, max(total - 1, 0) // size * size + size) - size
    return Pager(
        start + 1 if shown else 0, start + shown if shown else 0, total,
        href(request, param, **{param: str(before) if before > 0 else None}) if start > 0 else None,
        href(request, param, **{param: str(start + size)}) if start + size < total else None,
    )  # fmt: skip
