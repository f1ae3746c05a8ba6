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

__all__ = [
    "MEMORY_TABLES",
    "REEMBEDDING",
    "SCHEMA_VERSION",
    "TIER_TABLES",
    "USER_TABLES",
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
]
