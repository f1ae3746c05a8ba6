"""Structured output: the JSON schema of a stage's output model, the prompt that asks for it, and the
reply's JSON with any Markdown fence taken off."""

from __future__ import annotations

import json
import weakref

from pydantic import BaseModel

__all__ = ["schema_json", "schema_prompt", "strip_fences"]

# Per output class, the compact JSON schema and the pydantic core schema it was built from: building a
# schema costs ~1 ms of event-loop CPU and every call needs it; a rebuilt class (``model_rebuild``) gets a
# new core schema, so it is built afresh. Weak keys: classes made at run time are not kept alive.
_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], tuple[object, str]] = weakref.WeakKeyDictionary()


def schema_json(output: type[BaseModel]) -> str:
    """``output``'s JSON schema, compact (``output.model_json_schema()``, built once per class)."""
    core = output.__pydantic_core_schema__
    cached = _SCHEMAS.get(output)
    if cached is not None and cached[0] is core:
        return cached[1]
    text = json.dumps(output.model_json_schema(), separators=(",", ":"))
    _SCHEMAS[output] = (core, text)
    return text


def schema_prompt(output: type[BaseModel]) -> str:
    return f"Reply with a single JSON object, no prose, matching this JSON schema:\n{schema_json(output)}"


def strip_fences(raw: str) -> str:
    text = raw.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text.strip()
