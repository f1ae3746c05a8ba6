"""Relations between subjects: the edges, the networkx graph over them, and the connect tool."""

from __future__ import annotations

from ._relations import ConnectArguments, Relations

__all__ = ["ConnectArguments", "Relations"]
