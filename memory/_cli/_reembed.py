"""``tiermem reembed``: move a store to another embedder, one pass over each table.

The records never change, only their vectors and the embedder the meta table records, so an
interrupted run resumes by running again (the store refuses to open half-moved meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._embed import resolve_embedder
from .._errors import ConfigurationError, StoreNotFoundError
from .._store import REEMBEDDING, Store, stored_meta
from .._tiers import embedded_text

__all__ = ["reembed_store"]


def reembed_store(
    store: str, embedder: str | None, *, dimensions: int | None = None, echo: Callable[[str], None] = print
) -> int:
    """Re-embed every record of ``store`` with ``embedder`` (None: the shipped default); records re-embedded."""
    meta = stored_meta(store)
    if not meta:
        raise StoreNotFoundError(f"no tiermem store at {store!r}")
    target = resolve_embedder(embedder, dimensions=dimensions)
    made = meta.get("embedder_id", "")
    if made == target.id:
        echo(f"tiermem reembed: {store} already uses {target.id}; nothing to do")
        return 0
    if made.startswith(REEMBEDDING) and made != REEMBEDDING + target.id:
        raise ConfigurationError(
            f"{store} is part-way through a move to {made.removeprefix(REEMBEDDING)!r}; "
            "finish that one first (--embedder with that name)"
        )
    opened = Store(store, embedder_id=made, dimensions=int(meta.get("dimensions", "0")))

    def vectors(table: str, records: list[Any]) -> np.ndarray:
        echo(f"  {table}: {len(records)} records")
        return target.embed([embedded_text(r) for r in records])

    echo(f"tiermem reembed: {store}: {made} -> {target.id} ({target.dimensions} dimensions)")
    done = sum(opened.reembed(target.id, target.dimensions, vectors).values())
    echo(f"tiermem reembed: done, {done} records re-embedded; the store now uses {target.id}")
    return done
