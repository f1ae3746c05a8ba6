"""Subjects: who a memory is about, in one canonical spelling."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from ._errors import InvalidSubjectError

__all__ = ["USER", "canonical_subject", "is_canonical_subject"]

USER = "user"
MAX_SUBJECT_LENGTH = 64
_CANONICAL = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
# What a raw name may contain before canonicalisation; anything else is a mistake, not a name.
_RAW_ALLOWED = re.compile(r"^[\w .,'&-]+$")
_SELF = {"user", "i", "me", "myself", "the user", "self"}


def is_canonical_subject(value: str) -> bool:
    """True for "user", a lowercase first name or a lowercase-hyphenated organisation."""
    return len(value) <= MAX_SUBJECT_LENGTH and bool(_CANONICAL.match(value))


def canonical_subject(raw: str, *, aliases: Mapping[str, str] | None = None) -> str:
    """Canonicalise a subject: "I" -> "user", "Moni" -> "moni", "Acme Corp" -> "acme-corp".

    ``aliases`` maps lowercased display names (e.g. the user's own name) to subjects.
    Raises InvalidSubjectError for anything that cannot be a person or an organisation.
    """
    if not isinstance(raw, str):
        raise InvalidSubjectError(f"subject must be a string, not {type(raw).__name__}")
    text = " ".join(raw.split())
    if not text or len(text) > MAX_SUBJECT_LENGTH or not _RAW_ALLOWED.match(text):
        raise InvalidSubjectError(
            f"invalid subject {raw[:80]!r}: use 'user', a first name ('moni') or an organisation ('acme-corp')"
        )
    lowered = text.lower()
    if lowered in _SELF:
        return USER
    if aliases and lowered in aliases:
        return aliases[lowered]
    ascii_text = unicodedata.normalize("NFKD", lowered).encode("ascii", "ignore").decode()
    ascii_text = ascii_text.replace("&", " and ").replace("'s ", " ").replace("'", "")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")
    if not is_canonical_subject(slug):
        raise InvalidSubjectError(
            f"invalid subject {raw[:80]!r}: use 'user', a first name ('moni') or an organisation ('acme-corp')"
        )
    if aliases and slug in aliases:
        return aliases[slug]
    return slug
