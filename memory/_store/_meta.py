"""What a store's meta table must say before anything reads or writes it, and what to tell the user if not.

The meta table pins the schema version and the embedder (id and dimensions) that wrote the vectors,
and records the embedding recipe (which text of a record was embedded, :data:`EMBED_RECIPE`).
The engine work (reading, creating, stamping it) is in :mod:`._meta_table`; the decisions and messages are here.

Creating a table is not atomic in Lance (lance#4451): a process that found no meta table, and whose create
commits after another's, commits it as an Overwrite of whatever the table holds by then, stamps included.
So each creation stamps a fresh ``store_id`` with its values, the creation that committed version 1 made
the store, and :func:`settled_meta` reads the table as every process agrees (see there).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence

from .._embedder_ids import embedder_name
from .._errors import StoreMismatchError, StoreNotFoundError
from .._record_text import EMBED_RECIPE

__all__ = [
    "RECIPE",
    "REEMBEDDING",
    "SCHEMA_VERSION",
    "STORE_ID",
    "check_meta",
    "meta_values",
    "mismatch",
    "recipe_mismatch",
    "recipe_of",
    "settled_meta",
    "stamp",
    "wanted_meta",
    "width_mismatch",
]

SCHEMA_VERSION = "2"
# The meta table's embedder_id while ``tiermem reembed`` runs: no embedder opens a half-migrated store.
REEMBEDDING = "reembedding:"
# The meta key naming the creation that made the store; nothing rewrites it (stores made before it lack it).
STORE_ID = "store_id"
# The meta key of the embedding recipe the vectors were made with; written at creation and by reembed.
RECIPE = "embed_recipe"


def wanted_meta(embedder_id: str, dimensions: int) -> dict[str, str]:
    return {"schema_version": SCHEMA_VERSION, "embedder_id": embedder_id, "dimensions": str(dimensions)}


def stamp(wanted: Mapping[str, str]) -> list[dict[str, str]]:
    """The rows a new meta table is made with: ``wanted``, this code's recipe and a store id of its own."""
    stamped = {**wanted, RECIPE: str(EMBED_RECIPE), STORE_ID: uuid.uuid4().hex}
    return [{"key": k, "value": v} for k, v in stamped.items()]


def settled_meta(
    uri: str, latest: int, read: Callable[[int], Sequence[Mapping[str, str]] | None]
) -> tuple[dict[str, str], bool]:
    """The meta table's values as every process reads them, and whether its latest version must be restored to them.

    ``read(version)`` gives the rows of one version of the table (None if cleaned up); ``latest`` is the
    newest. Version 1 is committed once, so its store id names the creation that made the store; a later
    version with another store id (or none) is a racing create's Overwrite, and the store's values are those
    of the newest version that still carries the store id of version 1. Versions are immutable, so every
    process, whenever it reads, picks the same one.
    """
    values = meta_values(uri, read(latest) or [])
    first = meta_values(uri, rows) if latest > 1 and (rows := read(1)) is not None else {}
    made = first.get(STORE_ID)
    if made is None or values.get(STORE_ID) == made:  # no race (or an older store, or history cleaned up)
        return values, False
    for version in range(latest - 1, 1, -1):
        if (rows := read(version)) is not None and (older := meta_values(uri, rows)).get(STORE_ID) == made:
            return older, True
    return first, True


def meta_values(uri: str, rows: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The meta rows as a dict; StoreMismatchError if one key holds two values (two writers stamped it)."""
    values: dict[str, str] = {}
    for row in rows:
        key, value = row["key"], row["value"]
        if values.setdefault(key, value) != value:
            raise StoreMismatchError(
                f"store {uri!r} has an inconsistent meta table: {key!r} is both {values[key]!r} and {value!r}; "
                "it cannot tell which embedder wrote its vectors, so use another store"
            )
    return values


def check_meta(
    uri: str, stored: Mapping[str, str], wanted: Mapping[str, str], *, tables: Collection[str], create: bool
) -> bool:
    """Whether the meta table must be stamped with ``wanted`` (a new store); raise if it cannot be opened.

    ``stored`` is the meta table's content ({} when missing), ``tables`` the store's tier tables.
    """
    if not stored:
        if not create:
            raise StoreNotFoundError(
                f"no tiermem store at {uri!r} (no meta table); check the path, or create the store by "
                "opening it once with a writing capability"
            )
        if tables:
            raise StoreMismatchError(
                f"store {uri!r} has tables {sorted(tables)} but no meta table naming the embedder that wrote "
                "them, so opening it could mix two embedders' vectors; restore its meta table or use another store"
            )
        return True
    for key, value in wanted.items():
        if stored.get(key) != value:
            raise StoreMismatchError(mismatch(uri, key, stored, wanted))
    return False


def mismatch(uri: str, key: str, stored: Mapping[str, str], wanted: Mapping[str, str]) -> str:
    """Say which embedder made the store and how to open or migrate it."""
    if key not in {"embedder_id", "dimensions"}:
        return (
            f"store {uri!r} was written with {key}={stored.get(key)!r}, not {wanted[key]!r}; "
            "open it with the same tiermem version or use another store"
        )
    made = stored.get("embedder_id", "")
    if made.startswith(REEMBEDDING):
        return (
            f"store {uri!r} is part-way through `tiermem reembed` to {made.removeprefix(REEMBEDDING)!r} "
            f"(interrupted?); run `tiermem reembed --store {uri}` again to finish it"
        )
    name = embedder_name(made)
    how = f"embedder={name!r}" if name else "the embedder that made it"
    return (
        f"store {uri!r} was made with the embedder {made!r} ({stored.get('dimensions')} dimensions), "
        f"not {wanted['embedder_id']!r} ({wanted['dimensions']} dimensions), and vectors of two embedders cannot "
        f"be mixed. Open it with {how} (the same embedder), migrate it once with `tiermem reembed --store {uri} "
        "--embedder NAME` (re-embeds every table and records the new embedder), or use another store"
    )


def recipe_of(stored: Mapping[str, str]) -> str:
    """The embedding recipe a store's vectors were made with; a store recording none predates recipes: version 1."""
    return stored.get(RECIPE, "1")


def recipe_mismatch(uri: str, stored: Mapping[str, str]) -> str | None:
    """What to tell the user about a store embedded by another recipe than this code's, or None.

    Its vectors still search (same embedder, same space), but were made from other text than new
    records' and the cue's are, so they match worse: a WARNING, not a refusal.
    """
    recorded = recipe_of(stored)
    if recorded == str(EMBED_RECIPE):
        return None
    made = stored.get("embedder_id", "")
    name = embedder_name(made)
    how = f"--embedder {name}" if name else "--embedder NAME (the embedder that made it)"
    if name == "hashing":  # its width is not in its name
        how += f" --embedder-dimensions {stored.get('dimensions')}"
    return (
        f"store {uri!r} was embedded with recipe {recorded} (which text of a record is embedded), this tiermem "
        f"embeds with recipe {EMBED_RECIPE}, so its older vectors match cues worse than new ones; "
        f"re-embed it once with `tiermem reembed --store {uri} {how}` (keeps its embedder {made!r}, "
        "records the current recipe)"
    )


def width_mismatch(uri: str, table: str, width: int | None, dimensions: int) -> str:
    return (
        f"table {table!r} in {uri!r} holds vectors of {width} dimensions but the store's meta table says "
        f"{dimensions}: the store is inconsistent (a table copied from another store?); use another store"
    )
