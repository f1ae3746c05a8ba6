"""Digester: a user's facts -> a narrative about the primary user.

Facts too many (or too long) for the model's input budget are digested in parts and the part digests
merged (:func:`~._budget.merged`, the recipe the episode encoder shares): every fact given is read, a
fact longer than a third of a call in consecutive pieces. The facts come most confident first,
so the first part holds the most confident ones; the previous digest is shown to the final call only.
Under a memory policy, facts and relations it keeps out are never shown (:mod:`._restated`), and every
call is told the policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Edge, Fact
from tiermem.prompts import digest

from ._budget import PART_SHARE, Budget, fitted, merged
from ._model import StageModel
from ._restated import kept_edges, kept_facts

__all__ = ["WrittenDigest", "digest_parts", "write_digest"]

_STAGE = digest.STAGE


@dataclass(frozen=True, kw_only=True)
class WrittenDigest:
    """The digest's text and how it was written."""

    text: str
    calls: int = 1
    """Model calls it took: more than one when the facts were digested in parts and merged."""
    parts: int = 1
    """Parts the facts were cut into (1: shown whole)."""
    kept_out: int = 0
    """Facts given that the memory policy keeps out of the digest (not shown to the model)."""


async def write_digest(
    model: StageModel,
    *,
    facts: Sequence[Fact],
    edges: Sequence[Edge],
    user_names: Sequence[str],
    previous: str | None,
    policy: MemoryPolicy | None = None,
) -> WrittenDigest:
    """One model call, or one per part and the merges of their digests for facts too many for one.

    ``policy``: what the digest may not restate; the facts and relations it keeps out are not shown.
    """
    kept = kept_facts(policy, facts)
    inputs = digest.Input(
        facts=kept, edges=kept_edges(policy, edges, facts, kept), user_names=list(user_names), previous=previous,
        policy=policy,
    )  # fmt: skip

    async def run(budget: Budget) -> tuple[int, list[digest.Output]]:
        parts = digest_parts(budget, inputs)
        outputs = [await model.run(_STAGE, part) for part in parts]
        if len(parts) == 1:
            return 1, outputs
        base = inputs.model_copy(update={"facts": [], "edges": [], "previous": None})
        room = budget.room(_STAGE, _STAGE.render(base))
        last = budget.clip(previous, room // PART_SHARE) if previous else None  # a third, as each part's text

        def make(texts: list[str], final: bool) -> digest.Input:
            return base.model_copy(update={"parts": texts, "previous": last if final else None})

        merges = await merged(budget, _STAGE, [o.text for o in outputs], make=make,
                              ask=lambda part: model.run(_STAGE, part), text_of=lambda o: o.text)  # fmt: skip
        return len(parts), outputs + merges

    parts, outputs = await fitted(model, _STAGE, run, inputs)
    text = " ".join(outputs[-1].text.split())
    return WrittenDigest(text=text, calls=len(outputs), parts=parts, kept_out=len(facts) - len(kept))


def digest_parts(budget: Budget, inputs: digest.Input) -> list[digest.Input]:
    """``inputs`` whole when it fits ``budget``; else its facts, then its relations, in consecutive parts that fit.

    A fact longer than a :data:`~._budget.PART_SHARE` of a part's room is split into consecutive pieces,
    each a line of its own: nothing is left out.
    A part is shown no previous digest (the merge of the parts is).
    """
    if budget.tokens is None or budget.fits(_STAGE.render(inputs)):
        return [inputs]
    base = inputs.model_copy(update={"facts": [], "edges": [], "previous": None})
    room = budget.room(_STAGE, _STAGE.render(base))
    share = room // PART_SHARE
    items: list[Fact | Edge] = [
        *(
            f.model_copy(update={"text": piece})
            for f in inputs.facts
            for piece in budget.split(f.text, share, limit=len(f.text))
        ),  # no limit: a fact has 8,000 characters
        *inputs.edges,  # a relation is a short line: subject, relation, subject
    ]
    # A line's cost: its text, its subject tag and newline; a part holding relations also pays their heading.
    costs = [budget.count(f"- [{i.subject}] {i.text}" if isinstance(i, Fact) else f"- {i.text}") + 1 for i in items]
    heading = budget.count("\n\nRelations:") + 1
    return [
        base.model_copy(
            update={
                "facts": [items[i] for i in group if isinstance(items[i], Fact)],
                "edges": [items[i] for i in group if isinstance(items[i], Edge)],
            }
        )
        for group in budget.pack(costs, room - heading)
    ]
