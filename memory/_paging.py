"""Paging through a user's memories: ``list()``'s opaque cursors over ``(created_at, id)``, forward from a
page's last key or back from its first, the window of sorted keys a cursor picks, and the id and filter
arguments checked where they come in."""

from __future__ import annotations

import base64
import binascii
import json
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._errors import InvalidArgumentError

__all__ = ["Window", "checked_id", "checked_strings", "decode_cursor", "encode_cursor", "window"]

Key = tuple[datetime, str]
BACK = "before"
"""The third element of a cursor that pages back: the page ends at its key."""


def checked_id(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 256:
        raise InvalidArgumentError("id must be a non-empty string of at most 256 characters")
    return value


def checked_strings(value: object, what: str) -> list[str]:
    """One string or a list of strings, as a list."""
    values = [value] if isinstance(value, str) else list(value) if isinstance(value, list | tuple) else None
    if values is None or not all(isinstance(v, str) for v in values):
        raise InvalidArgumentError(f"{what} must be a string or a list of strings")
    return values


def encode_cursor(key: Key, *, back: bool = False) -> str:
    """The cursor of the page after ``key``, or with ``back`` of the page ending at ``key``."""
    raw = json.dumps([key[0].isoformat(), key[1], *([BACK] if back else [])]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[Key, bool]:
    """The key of ``cursor`` and whether it pages back."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        when, rid, *direction = json.loads(raw)
        if direction not in ([], [BACK]):
            raise ValueError("unknown direction")
        after = datetime.fromisoformat(when)
        if after.tzinfo is None:
            raise ValueError("naive time")
        return (after, checked_id(rid)), bool(direction)
    except (ValueError, TypeError, binascii.Error, InvalidArgumentError) as exc:
        raise InvalidArgumentError("cursor is not one returned by list()") from exc


@dataclass(frozen=True)
class Window:
    """The page ``keys[start:stop]`` and the cursors of its neighbours (None where there is none)."""

    start: int
    stop: int
    next_cursor: str | None
    prev_cursor: str | None


def window(keys: Sequence[tuple[Any, ...]], cursor: str | None, limit: int) -> Window:
    """The page ``cursor`` picks from ``keys``, sorted by their first two elements, ``(created_at, id)``.

    Paging back stops at the first page and fills it, so "previous" from the second page is the first
    page whole even after memories were added or removed in between."""
    heads = [(k[0], k[1]) for k in keys]
    if cursor is None:
        start = 0
    else:
        key, back = decode_cursor(cursor)
        start = bisect_right(heads, key) - (limit if back else 0)
    start = max(start, 0)
    stop = min(start + limit, len(heads))
    return Window(
        start=start,
        stop=stop,
        next_cursor=encode_cursor(heads[stop - 1]) if start < stop < len(heads) else None,
        prev_cursor=encode_cursor(heads[start - 1], back=True) if start > 0 else None,
    )
