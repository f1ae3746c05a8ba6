"""One ranking over several scopes: the user's own memories and the shared scopes the context reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from .._items import MemoryItem, RankedMemoryItem

__all__ = ["labelled", "merged"]

Item = TypeVar("Item", bound=MemoryItem)


def labelled(item: Item, scope: str) -> Item:
    """``item`` with the scope it was read from in ``metadata["scope"]`` (shown in the context block)."""
    return item.model_copy(update={"metadata": {**item.metadata, "scope": scope}})


def merged(found: Sequence[tuple[str, list[RankedMemoryItem]]], *, limit: int) -> list[RankedMemoryItem]:
    """The best ``limit`` of each scope's ranked results, under one ranking by score, each labelled with its
    scope; the user's own alone (no shared scope read) comes back as it was ranked, unlabelled."""
    if len(found) == 1:
        return found[0][1][:limit]
    items = [labelled(item, scope) for scope, ranked in found for item in ranked]
    return sorted(items, key=lambda item: -item.score)[:limit]  # stable: a tie keeps the user's own first
