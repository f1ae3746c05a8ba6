"""JSON from outside (an export's line, a history file), parsed strictly: what a store can hold, or one clear error.

No ``NaN`` or ``Infinity``, no key twice in one object, no lone surrogate (a ``"\\ud800"`` escape decodes to
one), and nothing Python refuses to build (deep nesting, a 5,000-digit number) escaping as another error:
every refusal is an :class:`InvalidArgumentError`.
"""

from __future__ import annotations

import json
from collections import Counter

from ._errors import InvalidArgumentError, TiermemError
from ._text import encodable

__all__ = ["strict_json"]


def _reject_constant(name: str) -> object:
    raise InvalidArgumentError(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    row = dict(pairs)
    if len(row) < len(pairs):
        repeated = next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)
        raise InvalidArgumentError(f"the key {repeated[:80]!r} appears twice in one object")
    return row


def strict_json(text: str) -> object:
    """``text`` parsed as strict JSON (see the module), or InvalidArgumentError."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
        encodable(json.dumps(value, ensure_ascii=False), "text")
    except RecursionError as exc:
        raise InvalidArgumentError("nested too deeply") from exc
    except TiermemError:
        raise
    except ValueError as exc:  # JSONDecodeError, and a number too long to convert
        raise InvalidArgumentError(f"not JSON: {str(exc)[:200]}") from exc
    return value
