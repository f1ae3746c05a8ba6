"""Session diversity: one session must not fill the list when the answer is spread over several.

A question whose evidence spans sessions ("what activities has Melanie done with her family?")
matches one line in each of several conversations; the session context of the ranking lifts every
turn of the best-matching session together, so its near-duplicates crowd the others out. Greedy,
MMR over sessions: each memory already ranked from a session discounts that session's next one
(``RecallOptions.session_diversity``), and ``per_session`` caps how many come before every other
session's. Memories without a session (facts, digests, edges) are never discounted.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["Scored", "diversified"]

# (score, memory id, position among the candidates)
Scored = tuple[float, str, int]


def diversified(
    scored: Sequence[Scored], sessions: Sequence[object], *, discount: float, cap: int | None
) -> list[Scored]:
    """``scored`` (best first; ``sessions[i]`` is the session of candidate ``i``, None for none) reordered.

    Within a session the order is kept; each step takes the best head over sessions at its
    discounted score, so the scores stay in descending order.
    """
    if discount <= 0 and cap is None:
        return list(scored)
    queues: dict[object, list[Scored]] = {}
    for entry in scored:
        session = sessions[entry[2]]
        queues.setdefault(("one", entry[2]) if session is None else session, []).append(entry)
    taken = dict.fromkeys(queues, 0)
    heads = [(-entry[0], entry[1], key) for key, entry in ((k, q[0]) for k, q in queues.items())]
    heapq.heapify(heads)
    out: list[Scored] = []
    deferred: list[Scored] = []
    keep = 1.0 - discount
    while heads:
        neg, _, key = heapq.heappop(heads)
        queue = queues[key]
        entry = queue.pop(0)
        out.append((-neg, entry[1], entry[2]))
        taken[key] += 1
        if cap is not None and taken[key] >= cap:
            deferred += queue
            continue
        if queue:
            nxt = queue[0]
            heapq.heappush(heads, (-(nxt[0] * keep ** taken[key]), nxt[1], key))
    floor = out[-1][0] if out else 0.0
    deferred.sort(key=lambda e: (-e[0], e[1]))
    return out + [(min(score, floor), rid, i) for score, rid, i in deferred]
