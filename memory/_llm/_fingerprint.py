"""The fingerprint of a model configuration: what a permanent failure happened under, to tell when it may be fixed."""

from __future__ import annotations

import hashlib
import json
import os

__all__ = ["config_fingerprint"]

# Environment settings that decide whether a provider accepts a call (keys, endpoints, projects).
_PROVIDER_ENV_SUFFIXES = (
    "_API_KEY",
    "_API_BASE",
    "_BASE_URL",
    "_API_VERSION",
    "_ACCESS_KEY_ID",
    "_SECRET_ACCESS_KEY",
    "_SESSION_TOKEN",
    "_REGION_NAME",
    "_PROFILE_NAME",
    "_PROJECT",
    "_LOCATION",
    "_CREDENTIALS",
)


def config_fingerprint(model: str, settings: dict[str, object] | None = None) -> str:
    """``"<model>#<digest>"``: what a permanent failure happened under, to tell when it may be fixed.

    The digest (SHA-256, 16 hex digits) covers ``settings`` and every provider setting in the
    environment (``*_API_KEY``, ``*_API_BASE``, ...), so a new key, endpoint or model changes it.
    Secrets enter only mixed into that one digest: no key, nor a hash of a key alone, is stored.
    """
    env = sorted((k, v) for k, v in os.environ.items() if k.endswith(_PROVIDER_ENV_SUFFIXES))
    blob = json.dumps([model, settings or {}, env], sort_keys=True, default=str)
    return f"{model}#{hashlib.sha256(blob.encode()).hexdigest()[:16]}"
