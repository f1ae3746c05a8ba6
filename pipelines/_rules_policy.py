"""The rules model's reading of a memory policy: the labels it can recognise, and what it keeps out.

Part of the offline rules model (:mod:`tiermem.pipelines._rules`): it reads no free-text instructions, so
it honours a policy through its labels and subjects. A label is recognised when it names an observation
kind ("preference", "plan", "event", "relationship", "fact") or one of a few topics by a small vocabulary
(:data:`TOPICS`: health, work, family and their synonyms); a label it cannot recognise is never assigned
(under ``include_categories`` of such labels only, the rules model keeps nothing: it cannot tell).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tiermem.memory._policy import MemoryPolicy

from ._sentences import HEALTH, RELATIONS, WORK, kind_of

__all__ = ["TOPICS", "recognised", "screened"]

_FAMILY_WORDS = {w for w, rel in RELATIONS.items() if rel.split()[0] not in {"friend", "colleague", "boss"}}
_FAMILY = re.compile(
    r"\b(?:" + "|".join(sorted(map(re.escape, _FAMILY_WORDS | {"family", "kids", "children", "parents"}))) + r")s?\b",
    re.IGNORECASE,
)
TOPICS: dict[str, re.Pattern[str]] = {
    "health": HEALTH,
    "medical": HEALTH,
    "work": WORK,
    "job": WORK,
    "career": WORK,
    "family": _FAMILY,
}
"""Topic labels the rules model recognises, each by a small vocabulary."""


def recognised(text: str, labels: Sequence[str], kind: str | None = None) -> tuple[str, ...]:
    """The ``labels`` that apply to ``text`` (of observation ``kind``, else the kind its words suggest)."""
    kind = kind or kind_of(text)
    return tuple(
        label for label in labels if label == kind or ((topic := TOPICS.get(label)) is not None and topic.search(text))
    )


def screened(policy: MemoryPolicy | None, subject: str, text: str, kind: str | None = None) -> tuple[str, ...] | None:
    """The labels of a memory the policy keeps; None when it keeps the memory out (no policy: no labels)."""
    if policy is None:
        return ()
    labels = recognised(text, policy.labels, kind)
    return labels if policy.admits(subject, labels) else None
