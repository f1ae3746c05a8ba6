"""Paging through a user's memories: ``list()``'s opaque cursor over ``(created_at, id)``, and the
id and filter arguments checked where they come in."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime

from ._errors import InvalidArgumentError

__all__ = ["checked_id", "checked_strings", "decode_cursor", "encode_cursor"]


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


def encode_cursor(key: tuple[datetime, str]) -> str:
    raw = json.dumps([key[0].isoformat(), key[1]]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        when, rid = json.loads(raw)
        after = datetime.fromisoformat(when)
        if after.tzinfo is None:
            raise ValueError("naive time")
        return after, checked_id(rid)
    except (ValueError, TypeError, binascii.Error, InvalidArgumentError) as exc:
        raise InvalidArgumentError("cursor is not one returned by list()") from exc
