"""The LanceDB adapter: the only folder that imports lancedb and pyarrow, where their errors become ours.

Tables and their versions, reads, writes, search, the meta table, leases and maintenance.
"""

from __future__ import annotations

from ._holders import process_holder
from ._leases import Lease, Leases
from ._meta import REEMBEDDING, SCHEMA_VERSION, recipe_of
from ._meta_table import stored_meta
from ._recorded import resolve_options
from ._store import Store, TableName, Where
from ._user_tables import MEMORY_TABLES, TIER_TABLES, USER_TABLES, TierTable
from ._user_writes import WRITE_TTL, user_writes, user_writes_async

__all__ = [
    "MEMORY_TABLES",
    "REEMBEDDING",
    "SCHEMA_VERSION",
    "TIER_TABLES",
    "USER_TABLES",
    "WRITE_TTL",
    "Lease",
    "Leases",
    "Store",
    "TableName",
    "TierTable",
    "Where",
    "process_holder",
    "recipe_of",
    "resolve_options",
    "stored_meta",
    "user_writes",
    "user_writes_async",
]
