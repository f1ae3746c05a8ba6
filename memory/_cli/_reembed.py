"""``tiermem reembed``: move a store to another embedder or to this code's embedding recipe, one pass per table.

The records never change, only their vectors and the embedder and recipe the meta table records,
so an interrupted run resumes by running again (the store refuses to open half-moved meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._embed import resolve_embedder
from .._errors import ConfigurationError, StoreNotFoundError
from .._record_text import EMBED_RECIPE, changed_since
from .._store import REEMBEDDING, Store, recipe_of, stored_meta
from .._tiers import embedded_vectors

__all__ = ["reembed_store"]


def reembed_store(
    store: str, embedder: str | None, *, dimensions: int | None = None, echo: Callable[[str], None] = print
) -> int:
    """Re-embed every record of ``store`` with ``embedder`` (None: the shipped default); records re-embedded.

    A store already on that embedder is re-embedded only if its recorded recipe is not this code's, and
    then only the records whose embedded text the newer recipes changed (all, when that is not known).
    """
    meta = stored_meta(store)
    if not meta:
        raise StoreNotFoundError(f"no tiermem store at {store!r}")
    target = resolve_embedder(embedder, dimensions=dimensions)
    made, recipe = meta.get("embedder_id", ""), recipe_of(meta)
    if made == target.id and recipe == str(EMBED_RECIPE):
        echo(f"tiermem reembed: {store} already uses {target.id}; nothing to do")
        return 0
    if made.startswith(REEMBEDDING) and made != REEMBEDDING + target.id:
        raise ConfigurationError(
            f"{store} is part-way through a move to {made.removeprefix(REEMBEDDING)!r}; "
            "finish that one first (--embedder with that name)"
        )
    opened = Store(store, embedder_id=made, dimensions=int(meta.get("dimensions", "0")))

    def vectors(table: str, records: list[Any]) -> np.ndarray | list[np.ndarray]:
        echo(f"  {table}: {len(records)} records")
        return embedded_vectors(records, target.embed)

    # Same embedder, older recipe: the other records' vectors are already what this code would make.
    only = changed_since(recipe) if made == target.id else None
    recipes = "" if recipe == str(EMBED_RECIPE) else f", embedding recipe {recipe} -> {EMBED_RECIPE}"
    kinds = "" if only is None else f"; only {', '.join(sorted(t.__name__ for t in only))} records changed"
    echo(f"tiermem reembed: {store}: {made} -> {target.id} ({target.dimensions} dimensions){recipes}{kinds}")
    done = sum(opened.reembed(target.id, target.dimensions, vectors, only=only).values())
    echo(f"tiermem reembed: done, {done} records re-embedded; the store now uses {target.id}")
    return done
