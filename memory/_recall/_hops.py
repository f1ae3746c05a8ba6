"""A second retrieval hop: the first results' rarest words widen the cue, and the two lists merge.

A question whose evidence spans sessions names a topic each piece of evidence covers only in part;
the first results say in their own words what the topic is about here ("camping", "marshmallows"
for "what has Melanie done with her family?"). Each of the first ``hops`` results lends its rarest
informative word among the first list (the word that says what it is about, not what every result
shares) that the cue lacks; recall runs again with the widened cue, and the two lists merge by
reciprocal rank (no score of one search is comparable with the other's).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .._items import RankedMemoryItem
from .._text import STOP_WORDS, stem, terms, words

__all__ = ["merged", "widened"]

# Reciprocal-rank fusion's usual constant: ranks far down a list count nearly alike.
_RRF_K = 60


def widened(cue: str, first: Sequence[RankedMemoryItem], hops: int) -> str | None:
    """The cue plus the rarest word (among ``first``) of each of its first ``hops`` results, or None."""
    asked = terms(cue)
    df = Counter(t for item in first for t in terms(item.text))
    extra: list[str] = []
    for item in first[:hops]:
        fresh = [w for w in dict.fromkeys(words(item.text)) if w not in STOP_WORDS and len(w) > 2]
        fresh = [w for w in fresh if stem(w) not in asked and w not in extra and df.get(stem(w), 0) > 0]
        if fresh:  # the first of the rarest, in the order the memory says them
            extra.append(min(fresh, key=lambda w: df[stem(w)]))
    return f"{cue} {' '.join(extra)}" if extra else None


def merged(first: Sequence[RankedMemoryItem], second: Sequence[RankedMemoryItem], limit: int) -> list[RankedMemoryItem]:
    """Both lists by reciprocal rank (the first list's item wins a tie and keeps its own fields)."""
    fused: dict[str, float] = {}
    items: dict[str, RankedMemoryItem] = {}
    for ranked in (first, second):
        for rank, item in enumerate(ranked):
            fused[item.id] = fused.get(item.id, 0.0) + 1.0 / (_RRF_K + rank + 1)
            items.setdefault(item.id, item)
    order = sorted(fused, key=lambda rid: -fused[rid])
    return [items[rid] for rid in order[:limit]]
