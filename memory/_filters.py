"""Filters for LanceDB queries: the one place a value becomes SQL, so no id can widen a query."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ._clock import utc
from ._errors import InvalidArgumentError

__all__ = [
    "MAX_FILTER_VALUE",
    "MAX_TEXT_CUE",
    "Where",
    "checked_column",
    "filter_key",
    "fts_cue",
    "sql_literal",
    "sql_timestamp",
]

MAX_FILTER_VALUE = 4096
# A full-text cue of more distinct words is cut: BM25 over hundreds of terms finds nothing better.
MAX_TEXT_CUE = 64
_WORD = re.compile(r"\w+(?:'\w+)*")
_FILTER_COLUMNS = frozenset({"id", "namespace", "user_id", "session_id", "subject", "status"})


def sql_literal(value: str) -> str:
    """Quote a value for a LanceDB (DataFusion SQL) filter; the one place this happens."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"filter value must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidArgumentError("filter value contains a NUL character")
    if len(value) > MAX_FILTER_VALUE:
        raise InvalidArgumentError(f"filter value is longer than {MAX_FILTER_VALUE} characters")
    return "'" + value.replace("'", "''") + "'"


def sql_timestamp(value: datetime) -> str:
    """A timezone-aware datetime as a DataFusion timestamp literal (UTC, microseconds)."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgumentError(f"a timestamp filter needs an aware datetime, not {value!r}")
    return "TIMESTAMP '" + utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ") + "'"


def fts_cue(text: str) -> str:
    """The words of a full-text cue, without what the engine would read as query syntax.

    Quotes (phrases), operators, brackets, field prefixes (``a:b``) and escapes are dropped; words,
    digits and any script's letters stay, so ``'"Lisbon"'`` still finds Lisbon.
    """
    unique: dict[str, str] = {}
    for word in _WORD.findall(text):
        unique.setdefault(word.casefold(), word)  # a repeated word adds nothing
    return " ".join(list(unique.values())[:MAX_TEXT_CUE])


@dataclass(frozen=True, kw_only=True)
class Where:
    """A conjunction of equality / membership tests on known columns, rendered safely."""

    eq: Mapping[str, str]
    isin: Mapping[str, Sequence[str]] | None = None
    ne: Mapping[str, str] | None = None

    def sql(self) -> str:
        parts: list[str] = []
        for column, value in self.eq.items():
            parts.append(f"{checked_column(column)} = {sql_literal(value)}")
        for column, value in (self.ne or {}).items():
            parts.append(f"({checked_column(column)} IS NULL OR {checked_column(column)} <> {sql_literal(value)})")
        for column, values in (self.isin or {}).items():
            if not values:
                return "false"
            parts.append(f"{checked_column(column)} IN ({', '.join(sql_literal(v) for v in values)})")
        return " AND ".join(parts) if parts else "true"

    def key(self) -> tuple[object, ...]:
        """The same tests in any order give the same key (for results kept per filter)."""
        return filter_key(self.eq, self.isin or {}, self.ne or {})

    def admits(self, row: Mapping[str, object]) -> bool:
        """Whether a table row passes these tests as :meth:`sql` would have the engine decide (NULL equals nothing)."""
        if any(row.get(column) != value for column, value in self.eq.items()):
            return False
        if any(row.get(column) not in values for column, values in (self.isin or {}).items()):
            return False
        return all(row.get(column) is None or row.get(column) != value for column, value in (self.ne or {}).items())


def filter_key(eq: Mapping[str, str], isin: Mapping[str, Sequence[str]], ne: Mapping[str, str]) -> tuple[object, ...]:
    """A hashable key of equality, membership and inequality tests, whatever their order."""
    return (
        tuple(sorted(eq.items())),
        tuple(sorted((k, tuple(v)) for k, v in isin.items())),
        tuple(sorted(ne.items())),
    )


def checked_column(name: str) -> str:
    if name not in _FILTER_COLUMNS:
        raise InvalidArgumentError(f"cannot filter on column {name!r}")
    return name
