"""The REST server: the operations of the CLI and the MCP server over HTTP, one user per API key.

FastAPI (``pip install 'tiermem[rest]'``) is imported here only; ``tiermem serve`` runs the app.
"""

from __future__ import annotations

from ._app import MAX_BODY_BYTES, build_app
from ._keys import ApiKeys, KeyGrant, load_keys
from ._statuses import STATUSES, ErrorBody, status_of

__all__ = ["MAX_BODY_BYTES", "STATUSES", "ApiKeys", "ErrorBody", "KeyGrant", "build_app", "load_keys", "status_of"]
