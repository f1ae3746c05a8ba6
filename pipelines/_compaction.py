"""Semantic compaction: merge overlapping facts of ONE subject through the model.

The guard refuses (and counts) any merge that names a fact it was not shown or a fact of
another subject; merged sources are superseded, not deleted.

A subject with more facts than the model's input budget holds is compacted in parts (one call each):
its facts ordered so that facts sharing words sit together (by the rarest word each shares with
another fact), then cut into consecutive parts that fit. A merge joins facts of one part only, so
facts never shown together stay apart until a later run, when the merges have changed the parts.
Facts are never clipped (a merge must keep every detail): a fact longer than a merged fact may be
(``compact.MAX_TEXT``), or left alone in its part (too long to share a call with its neighbours), is
not shown, and counted (``CompactionPlan.left_out``).

Under a memory policy, facts it keeps out are not shown (a merge cannot carry them into a fact the
policy keeps: :mod:`._restated`), and counted (``CompactionPlan.kept_out``); the call is told the policy.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tiermem.memory._identity import fact_id
from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Fact, MemoryContext
from tiermem.memory._retrieval_keys import retrieval_keys
from tiermem.prompts import compact

from ._budget import Budget, fitted
from ._model import StageModel
from ._restated import kept_facts

__all__ = ["CompactionPlan", "compact_subject", "compaction_parts"]

_STAGE = compact.STAGE
_WORD = re.compile(r"[^\W_]{3,}")


@dataclass(kw_only=True)
class CompactionPlan:
    """Facts to write (merged facts and superseded sources) and what the guard refused."""

    facts: list[Fact] = field(default_factory=list)
    merged_sources: int = 0
    refused: int = 0
    calls: int = 0
    """Model calls made: one per part of the subject's facts."""
    left_out: int = 0
    """Facts not shown to the model: longer than a merged fact may be, or too long to share a call."""
    kept_out: int = 0
    """Facts not shown to the model because the memory policy keeps them out (they stay as they are)."""


async def compact_subject(
    model: StageModel,
    *,
    ctx: MemoryContext,
    subject: str,
    facts: Sequence[Fact],
    now: datetime,
    policy: MemoryPolicy | None = None,
) -> CompactionPlan:
    """One model call for one subject's facts (one per part when they do not fit one call).

    ``policy``: facts it keeps out are not shown, so no merge carries them.
    """
    active = [f for f in facts if f.subject == subject and f.status == "active"]
    own = {f.id: f for f in kept_facts(policy, active)}
    kept_out, stored = len(active) - len(own), {f.id for f in active}
    if len(own) < 2:
        return CompactionPlan(kept_out=kept_out)
    mergeable = [f for f in own.values() if len(f.text) <= compact.MAX_TEXT]
    if len(mergeable) < 2:
        return CompactionPlan(left_out=len(own), kept_out=kept_out)
    inputs = compact.Input(subject=subject, facts=mergeable, policy=policy)

    async def run(budget: Budget) -> list[tuple[set[str], compact.Output]]:
        parts = compaction_parts(budget, inputs)
        return [({f.id for f in part.facts}, await model.run(_STAGE, part)) for part in parts]

    answers = await fitted(model, _STAGE, run, inputs)
    left_out = len(own) - sum(len(shown) for shown, _ in answers)
    plan = CompactionPlan(calls=len(answers), left_out=left_out, kept_out=kept_out)
    used: set[str] = set()
    for shown, merge in ((shown, m) for shown, output in answers for m in output.merges):
        ids = list(dict.fromkeys(merge.source_ids))
        if len(ids) < 2 or any(i not in shown or i in used for i in ids):
            plan.refused += 1  # unknown, foreign-subject, already merged facts, or facts not shown in this call
            continue
        sources = [own[i] for i in ids]
        text = " ".join(merge.text.split())
        new_id = fact_id(ctx, subject=subject, text=text)
        if new_id in stored and new_id not in ids:
            plan.refused += 1  # the merged text is another, unmerged fact of this subject (maybe one kept out)
            continue
        used.update(ids)
        # When the merged text is one of the sources, that fact survives (same id) and absorbs the others.
        plan.facts.append(
            Fact.new(
                ctx,
                subject=subject,
                text=text,
                now=now,
                confidence=max(s.confidence for s in sources),
                created_at=min(s.created_at for s in sources),
                reinforced_at=max(s.reinforced_at for s in sources),
                stored_at=max((s.stored_at for s in sources if s.stored_at is not None), default=None),
                reinforcements=sum(s.reinforcements for s in sources),
                provenance=dict.fromkeys(p for s in sources for p in s.provenance),
                keys=retrieval_keys([k for s in sources for k in s.keys]),  # the sources' keys, first ones first
                categories=dict.fromkeys(c for s in sources for c in s.categories),  # every source's labels
                metadata={"prompt_version": compact.STAGE.version, "merged_from": ids},
            )
        )
        superseded = [s for s in sources if s.id != new_id]
        plan.facts += [
            s.model_copy(update={"status": "superseded", "superseded_by": new_id, "valid_to": now, "updated_at": now})
            for s in superseded
        ]
        plan.merged_sources += len(superseded)
    return plan


def compaction_parts(budget: Budget, inputs: compact.Input) -> list[compact.Input]:
    """``inputs`` whole when it fits ``budget``; else parts of at least two facts that each fit, facts that
    share words together. A fact that fits no part beside another is in none."""
    if budget.tokens is None or budget.fits(_STAGE.render(inputs)):
        return [inputs]
    base = inputs.model_copy(update={"facts": []})
    room = budget.room(_STAGE, _STAGE.render(base))
    facts = _neighbours_together(inputs.facts)
    costs = [budget.count(f"- id={f.id} {f.text}") + 1 for f in facts]
    return [
        base.model_copy(update={"facts": [facts[i] for i in group]})
        for group in budget.pack(costs, room)
        if len(group) > 1  # a group of one is a fact too long to share a call: nothing to merge it with
    ]


def _neighbours_together(facts: Sequence[Fact]) -> list[Fact]:
    """``facts`` ordered by the words they share with other facts, rarest first, so that facts that overlap
    (share a rare word: a name, a place, a number) are neighbours; facts sharing no word come last."""
    words = [{w.lower() for w in _WORD.findall(f.text)} for f in facts]
    seen = Counter(w for ws in words for w in ws)

    def signature(index: int) -> tuple[int, list[tuple[int, str]]]:
        shared = sorted((seen[w], w) for w in words[index] if seen[w] > 1)
        return (0 if shared else 1), shared[:3]

    order = sorted(range(len(facts)), key=lambda i: (*signature(i), facts[i].id))
    return [facts[i] for i in order]
