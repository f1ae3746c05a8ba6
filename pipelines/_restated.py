"""What a rollup may restate under a memory policy: the digest and a compaction are written from stored facts,
and neither may carry what the policy keeps out.

The filter is in code, whatever a model is told: a fact the policy does not admit by its stored labels
and subject (:meth:`~tiermem.memory._policy.MemoryPolicy.admits`) is never shown to the model, and a
relation goes with it when it is about an excluded subject or was derived only from facts kept out. The
offline rules model, which reads no free text, adds the labels it recognises in a fact's words
(``recognise``: a fact stored before the policy, or under another vocabulary, has none).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Edge, Fact

__all__ = ["Recognise", "kept_edges", "kept_facts"]

Recognise = Callable[[str, Sequence[str]], Iterable[str]]
"""(a fact's text, the policy's labels) -> the labels that apply to it."""


def kept_facts(policy: MemoryPolicy | None, facts: Sequence[Fact], recognise: Recognise | None = None) -> list[Fact]:
    """The ``facts`` ``policy`` keeps, by their stored labels (and those ``recognise`` finds) and subject."""
    if policy is None or policy.empty:
        return list(facts)
    labels = policy.labels

    def keeps(fact: Fact) -> bool:
        found = recognise(fact.text, labels) if recognise is not None and labels else ()
        return policy.admits(fact.subject, {*fact.categories, *found})

    return [f for f in facts if keeps(f)]


def kept_edges(
    policy: MemoryPolicy | None, edges: Sequence[Edge], facts: Sequence[Fact], kept: Sequence[Fact]
) -> list[Edge]:
    """The ``edges`` a rollup of ``kept`` (the facts of ``facts`` the policy keeps) may restate: none about an
    excluded subject, none derived only from facts kept out (an edge whose support is unknown stays)."""
    if policy is None or policy.empty:
        return list(edges)
    kept_ids = {f.id for f in kept}
    out = {f.id for f in facts} - kept_ids
    excluded = set(policy.exclude_subjects)

    def keeps(edge: Edge) -> bool:
        support = set(edge.support)
        only_kept_out = bool(support & out) and not support & kept_ids
        return edge.source not in excluded and edge.target not in excluded and not only_kept_out

    return [e for e in edges if keeps(e)]
