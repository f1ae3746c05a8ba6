"""Consolidation batches cut to the model's input budget.

A batch of episodes whose prompt (summaries, their observations, the existing facts shown) is too
large for one call is cut into sub-batches that fit: each episode keeps its summary and its most
salient observations, each sub-batch the nearest existing facts of its episodes' subjects that fit.
The sub-batches' operations and edges are joined into one answer, which the consolidator's guard
then checks as it checks any other.
"""

from __future__ import annotations

from typing import Any

from tiermem.memory._records import Episode, Fact, WorkingEntry
from tiermem.prompts import consolidate

from ._budget import Budget, fitted
from ._model import StageModel

__all__ = ["consolidation_parts", "run_consolidation"]

_STAGE = consolidate.STAGE


async def run_consolidation(model: StageModel, inputs: consolidate.Input) -> consolidate.FactsOutput:
    """The consolidator's answer to ``inputs``: one call, or one per sub-batch that fits the model's budget."""

    async def run(budget: Budget) -> consolidate.FactsOutput:
        outputs = [await model.run(_STAGE, part) for part in consolidation_parts(budget, inputs)]
        if len(outputs) == 1:
            return outputs[0]
        joined: dict[str, Any] = {"operations": _joined([o.operations for o in outputs])}
        kind = _STAGE.output_for(inputs)
        if issubclass(kind, consolidate.Output):
            joined["edges"] = [e for o in outputs if isinstance(o, consolidate.Output) for e in o.edges]
        return kind.model_construct(**joined)  # each part validated; joined, they may pass the per-call caps

    return await fitted(model, _STAGE, run, inputs)


def _joined(parts: list[list[consolidate.Operation]]) -> list[consolidate.Operation]:
    """The parts' operations in one list; a part's "#N" (its own N-th operation) renumbered to match."""
    out: list[consolidate.Operation] = []
    for ops in parts:
        offset = len(out)
        for op in ops:
            ref = consolidate.operation_ref(op.target_id)
            out.append(op if ref is None or not offset else op.model_copy(update={"target_id": f"#{ref + offset}"}))
    return out


def consolidation_parts(budget: Budget, inputs: consolidate.Input) -> list[consolidate.Input]:
    """``inputs`` whole when it fits ``budget``; else sub-batches of its episodes that each fit.

    Half of a sub-batch's room goes to its episodes with their observations (all of them, over as many
    sub-batches as they need), half to existing facts of their subjects (in the order given: nearest first).
    """
    if budget.tokens is None or budget.fits(_STAGE.render(inputs)):
        return [inputs]
    base = inputs.model_copy(update={"episodes": [], "observations": [], "existing": []})
    room = budget.room(_STAGE, _STAGE.render(base))
    half = room // 2
    units = [unit for episode in inputs.episodes for unit in _units(budget, episode, inputs.observations, half)]
    groups = budget.pack([cost for _, _, cost in units], half)
    parts: list[consolidate.Input] = []
    for group in groups:
        episodes = [units[i][0] for i in group]
        subjects = {s for e in episodes for s in e.subjects}
        facts = _facts(budget, [f for f in inputs.existing if f.subject in subjects], half)
        observations = [o for i in group for o in units[i][1]]
        parts.append(inputs.model_copy(update={"episodes": episodes, "observations": observations, "existing": facts}))
    return parts


def _units(
    budget: Budget, episode: Episode, observations: list[WorkingEntry], tokens: int
) -> list[tuple[Episode, list[WorkingEntry], int]]:
    """One episode (summary clipped to a quarter of ``tokens``) with its observations, in as many units of at
    most ``tokens`` as they need: an episode too long for one call is consolidated in parts, none dropped.
    """
    summary = budget.clip(episode.summary, tokens // 4)
    shown = episode.model_copy(update={"summary": summary}) if summary != episode.summary else episode
    head = budget.count(f"- id={episode.id} (2026-01-01) {summary}") + 1
    units: list[tuple[Episode, list[WorkingEntry], int]] = []
    chunk: list[WorkingEntry] = []
    used = head
    for obs in (o for o in observations if o.session_id == episode.session_id):
        cost = budget.count(f"    - [{obs.subject}] {obs.text}") + 1  # observations are short (the observer caps them)
        if chunk and used + cost > tokens:
            units.append((shown, chunk, used))
            # Later parts carry only the episode's further observations: the summary, said once, is not
            # consolidated again from every part.
            shown = episode.model_copy(update={"summary": "(continued: more observations of this episode)"})
            chunk, used = [], head
        chunk.append(obs)
        used += cost
    units.append((shown, chunk, used))
    return units


def _facts(budget: Budget, facts: list[Fact], tokens: int) -> list[Fact]:
    """The first ``facts`` whose lines fit ``tokens``."""
    kept: list[Fact] = []
    used = 0
    for fact in facts:
        used += budget.count(f"- id={fact.id} [{fact.subject}] {fact.text}") + 1
        if used > tokens:
            break
        kept.append(fact)
    return kept
