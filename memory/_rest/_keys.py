"""API keys: which namespace and user each key the operator issued acts as.

The operator writes a keys file (``tiermem serve --keys FILE``), a JSON list of
``{"key": ..., "user_id": ..., "namespace": ...}`` (namespace optional, ``"default"``). A request names
its key only (``Authorization: Bearer KEY``); whose memory it reaches comes from this table, never from
the request. Keys are kept as SHA-256 digests and compared in constant time with every key on file, so
neither the answer's timing nor any message or log line tells anything about a key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._errors import ConfigurationError
from .._records import MemoryContext

__all__ = ["MIN_KEY_LENGTH", "ApiKeys", "KeyGrant", "load_keys"]

MIN_KEY_LENGTH = 16
"""Shortest key accepted: a key is a secret, not a password someone has to type."""
KEY = re.compile(r"^[A-Za-z0-9._~+/=-]+$")
"""A bearer token's characters (RFC 6750's token68): no space or comma, so one header holds one key."""


class KeyGrant(BaseModel):
    """One line of the keys file: a key and the user it acts as."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(min_length=MIN_KEY_LENGTH, max_length=512, pattern=KEY.pattern)
    user_id: str
    namespace: str = "default"
    read_scopes: tuple[str, ...] = ()
    """Shared scopes the key's requests recall with the user's own; each needs the grant in the store."""
    write_scope: str | None = None
    agent_id: str | None = None


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


class ApiKeys:
    """The keys on file, each mapped to the context it acts as."""

    def __init__(self, grants: Sequence[KeyGrant]) -> None:
        if not grants:
            raise ConfigurationError("the keys file grants no key: add at least one")
        digests = [_digest(g.key) for g in grants]
        if len(set(digests)) != len(digests):
            raise ConfigurationError("the keys file lists a key twice: each key must act as exactly one user")
        self._grants = [
            (digest, MemoryContext(**g.model_dump(exclude={"key"}))) for digest, g in zip(digests, grants, strict=True)
        ]

    def __len__(self) -> int:
        return len(self._grants)

    def context(self, presented: str) -> MemoryContext | None:
        """The context ``presented`` acts as; None for a key not on file.

        Every key on file is compared, matched or not: the time taken does not say which one matched."""
        digest = _digest(presented)
        found: MemoryContext | None = None
        for known, ctx in self._grants:
            if hmac.compare_digest(digest, known):
                found = ctx
        return found


def load_keys(path: str | Path) -> ApiKeys:
    """The keys file at ``path``; ConfigurationError saying what is wrong with it, never quoting a key."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"cannot read the keys file {str(path)!r}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:  # the message of neither quotes the file's text
        raise ConfigurationError(f"the keys file {str(path)!r} is not JSON: {exc}") from None
    if not isinstance(raw, list):
        raise ConfigurationError('the keys file must be a JSON list of {"key", "user_id", "namespace"} objects')
    grants = []
    for number, entry in enumerate(raw, start=1):
        try:
            grants.append(KeyGrant.model_validate(entry))
            MemoryContext(**grants[-1].model_dump(exclude={"key"}))
        except ValidationError as exc:  # where and what only: the input may be a key
            error = exc.errors(include_input=False, include_url=False)[0]
            where = ".".join(str(p) for p in error["loc"]) or "entry"
            if where == "key" and error["type"] == "string_too_short":
                message = f"a key must have at least {MIN_KEY_LENGTH} characters"
            elif where == "key" and error["type"] == "string_pattern_mismatch":
                message = "a key may hold letters, digits and . _ ~ + / = - only"
            else:
                message = error["msg"]
            raise ConfigurationError(f"the keys file's entry {number}: {where}: {message}") from None
    return ApiKeys(grants)
