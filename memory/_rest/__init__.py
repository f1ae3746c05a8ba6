"""The REST server: the operations of the CLI and the MCP server over HTTP, one user per API key; and the web
inspector, pages over the same operations.

FastAPI (``pip install 'tiermem[rest]'``, with Jinja2 for the inspector: ``tiermem[ui]``) is imported here
only; ``tiermem serve`` and ``tiermem ui`` run the apps.
"""

from __future__ import annotations

from ._app import MAX_BODY_BYTES, build_app
from ._guard import is_loopback
from ._inspector import build_inspector
from ._keys import ApiKeys, KeyGrant, load_keys
from ._statuses import STATUSES, ErrorBody, status_of

__all__ = [
    "MAX_BODY_BYTES",
    "STATUSES",
    "ApiKeys",
    "ErrorBody",
    "KeyGrant",
    "build_app",
    "build_inspector",
    "is_loopback",
    "load_keys",
    "status_of",
]
