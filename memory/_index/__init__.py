"""In-process indexes of one user's rows: vectors, words (BM25), parsed records, and the searches over them.

Pure numpy and the standard library; the store (:mod:`.._store`) fills and invalidates them.
"""

from __future__ import annotations

from ._cached_search import CachedSearches, cached_searches
from ._lexical import pooled_scores, query_terms
from ._read_cache import ReadCache
from ._rows import (
    REPLY_VECTOR,
    SENTENCE_VECTORS,
    SPECS,
    EngineRow,
    Hit,
    TableName,
    Vectors,
    duplicate_losers,
    fts_columns,
    per_user,
    picked,
    records_in,
    row,
    unique,
)
from ._vectors import COLUMNS, VectorBlock, VectorCache, column_array, split_vectors, top_k

__all__ = [
    "COLUMNS",
    "REPLY_VECTOR",
    "SENTENCE_VECTORS",
    "SPECS",
    "CachedSearches",
    "EngineRow",
    "Hit",
    "ReadCache",
    "TableName",
    "VectorBlock",
    "VectorCache",
    "Vectors",
    "cached_searches",
    "column_array",
    "duplicate_losers",
    "fts_columns",
    "per_user",
    "picked",
    "pooled_scores",
    "query_terms",
    "records_in",
    "row",
    "split_vectors",
    "top_k",
    "unique",
]
