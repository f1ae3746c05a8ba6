"""Scopes in one ranking: each memory recalled from several scopes (the user's own and the shared ones the
context reads, searched as one pool by :class:`._search.Search`) says which it came from."""

from __future__ import annotations

from typing import TypeVar

from .._items import MemoryItem

__all__ = ["labelled"]

Item = TypeVar("Item", bound=MemoryItem)


def labelled(item: Item, scope: str) -> Item:
    """``item`` with the scope it was read from in ``metadata["scope"]`` (shown in the context block)."""
    return item.model_copy(update={"metadata": {**item.metadata, "scope": scope}})
