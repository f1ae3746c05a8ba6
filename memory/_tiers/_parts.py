"""What the session log and the working tier use of the repository that holds them.

:class:`~tiermem.memory._tiers._tiers.Tiers` satisfies it; the parts name this protocol, not the
class, so they never import the module that imports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .._clock import Clock
from .._embed import Embedder
from .._options import WorkingOptions
from .._record_text import Embedded
from .._records import MemoryContext
from .._secrets import Redactor
from .._store import Store, TableName

__all__ = ["TierParts"]


class TierParts(Protocol):
    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def working(self) -> WorkingOptions | None: ...

    @property
    def secrets(self) -> Redactor: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def write(self, table: TableName, records: Sequence[Embedded], *, new: bool = False) -> None: ...

    def subject(self, ctx: MemoryContext, subject: str) -> str: ...
