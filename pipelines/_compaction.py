"""Semantic compaction: merge overlapping facts of ONE subject through the model.

The guard refuses (and counts) any merge that names a fact it was not shown or a fact of
another subject; merged sources are superseded, not deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tiermem.memory._identity import fact_id
from tiermem.memory._records import Fact, MemoryContext, retrieval_keys
from tiermem.prompts import compact

from ._model import StageModel

__all__ = ["CompactionPlan", "compact_subject"]


@dataclass(kw_only=True)
class CompactionPlan:
    """Facts to write (merged facts and superseded sources) and what the guard refused."""

    facts: list[Fact] = field(default_factory=list)
    merged_sources: int = 0
    refused: int = 0


async def compact_subject(
    model: StageModel, *, ctx: MemoryContext, subject: str, facts: Sequence[Fact], now: datetime
) -> CompactionPlan:
    """One model call for one subject's facts."""
    plan = CompactionPlan()
    own = {f.id: f for f in facts if f.subject == subject and f.status == "active"}
    if len(own) < 2:
        return plan
    output = await model.run(compact.STAGE, compact.Input(subject=subject, facts=list(own.values())))
    used: set[str] = set()
    for merge in output.merges:
        ids = list(dict.fromkeys(merge.source_ids))
        if len(ids) < 2 or any(i not in own or i in used for i in ids):
            plan.refused += 1  # unknown, foreign-subject or already merged facts
            continue
        sources = [own[i] for i in ids]
        text = " ".join(merge.text.split())
        new_id = fact_id(ctx, subject=subject, text=text)
        if new_id in own and new_id not in ids:
            plan.refused += 1  # the merged text is another, unmerged fact of this subject
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
