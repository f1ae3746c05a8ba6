"""Episodes encoded at consolidation: a provisional episode at session end, its summary at consolidation.

With ``episodic={"encode": "consolidation"}`` ending a session makes no model call: the episode is
written at once with an extractive, provisional summary (its most salient observations, in order). Consolidation
then asks one stage per batch (:mod:`tiermem.prompts.encode_consolidate`) for both the summaries
and the fact operations, which go through the consolidator's guard as any other. A batch too
large for one call falls back to the two stages (each episode encoded, hierarchically if need be,
then the batch consolidated in the sub-batches that fit): more calls, nothing dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from tiermem.memory._options import RelationsOptions
from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Episode, Fact, MemoryContext, Turn, WorkingEntry
from tiermem.prompts import encode_consolidate, encode_episode

from . import _rules as rules
from ._budget import Budget, fitted
from ._consolidator import ConsolidationPlan, consolidate_episodes
from ._episodes import encode_session, episode_subjects, session_episode
from ._model import StageModel

__all__ = ["PROVISIONAL", "EncodedBatch", "encode_and_consolidate", "provisional_episode"]

_STAGE = encode_consolidate.STAGE
PROVISIONAL = "provisional"
"""Episode metadata key: True while the summary is extractive (no model has summarised the episode yet)."""


def provisional_episode(
    *,
    ctx: MemoryContext,
    session_id: str,
    entries: Sequence[WorkingEntry],
    turns: Sequence[Turn],
    user_names: Sequence[str] = (),
    aliases: Mapping[str, str],
    now: datetime,
    policy: MemoryPolicy | None = None,
) -> Episode:
    """The session's episode without a model call, marked provisional until consolidation summarises it.

    Its summary is extractive: the session's most salient observations, in order and clipped (else
    what its user messages say), as the offline rules model's encoder writes it; so with the rules
    model the episode, and the facts consolidation is shown beside it, are those of the two-call path.
    """
    times = [t.created_at for t in turns] or [e.created_at for e in entries] or [now]
    inputs = encode_episode.Input(
        entries=list(entries), turns=list(turns), user_names=list(user_names), started_at=min(times),
        ended_at=max(times), policy=policy,
    )  # fmt: skip
    extract = rules.encode_episode(inputs)
    subjects = episode_subjects([*extract.subjects, *(e.subject for e in entries)], aliases)
    return session_episode(
        ctx=ctx, session_id=session_id, turns=turns, times=times, now=now, summary=extract.summary,
        subjects=subjects, salience=extract.salience, metadata={PROVISIONAL: True},
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class EncodedBatch:
    """A batch after the combined stage: its episodes with the model's summaries (in the order given), the plan."""

    episodes: list[Episode]
    plan: ConsolidationPlan


async def encode_and_consolidate(
    model: StageModel,
    *,
    ctx: MemoryContext,
    episodes: Sequence[Episode],
    turns: Sequence[Turn],
    observations: Sequence[WorkingEntry],
    existing: Sequence[Fact],
    user_names: Sequence[str],
    aliases: Mapping[str, str],
    relations: RelationsOptions | None,
    now: datetime,
    known_subjects: Sequence[str] = (),
    policy: MemoryPolicy | None = None,
) -> EncodedBatch:
    """Summaries of the batch's provisional episodes and the batch's fact operations, in one call when it fits.

    ``episodes`` are as the consolidator should see them (an extended episode: its extension only);
    ``turns`` are the provisional episodes' turns not consolidated yet. An episode the model left out keeps
    its provisional summary (and its mark).
    """
    rel = relations if relations is not None and relations.enabled else None
    encode = [e.id for e in episodes if e.metadata.get(PROVISIONAL)]
    inputs = encode_consolidate.Input(
        episodes=list(episodes), observations=list(observations), existing=list(existing),
        user_names=list(user_names), relations=rel, now=now, encode=encode, turns=list(turns), policy=policy,
    )  # fmt: skip

    async def plan(encoded: list[Episode], answer: encode_consolidate.FactsOutput | None) -> ConsolidationPlan:
        return await consolidate_episodes(
            model, ctx=ctx, episodes=encoded, observations=observations, existing=existing, user_names=user_names,
            aliases=aliases, relations=relations, now=now, known_subjects=known_subjects, answer=answer, policy=policy,
        )  # fmt: skip

    async def run(budget: Budget) -> EncodedBatch:
        if budget.tokens is None or budget.fits(_STAGE.render(inputs)):
            output = await model.run(_STAGE, inputs)
            written = {o.id: o for o in output.episodes}
            encoded = [_written(e, written.get(e.id), aliases, model.name) if e.id in encode else e for e in episodes]
            return EncodedBatch(episodes=encoded, plan=await plan(encoded, output))
        # Too large for one call: the two stages, each fitting its own input (hierarchically if need be).
        encoded = [await _encoded(model, e, turns, observations, user_names, aliases, policy) if e.id in encode
                   else e for e in episodes]  # fmt: skip
        return EncodedBatch(episodes=encoded, plan=await plan(encoded, None))

    return await fitted(model, _STAGE, run, inputs)


def _written(
    episode: Episode, out: encode_consolidate.EpisodeOut | None, aliases: Mapping[str, str], model: str
) -> Episode:
    """``episode`` with the model's summary, subjects (and its observations' subjects) and salience."""
    if out is None:
        return episode
    meta = {k: v for k, v in episode.metadata.items() if k != PROVISIONAL}
    return episode.model_copy(
        update={
            "summary": " ".join(out.summary.split()),
            "subjects": episode_subjects([*out.subjects, *episode.subjects], aliases),
            "salience": out.salience,
            "metadata": {**meta, "prompt_version": encode_consolidate.VERSION, "model": model},
        }
    )


async def _encoded(
    model: StageModel,
    episode: Episode,
    turns: Sequence[Turn],
    observations: Sequence[WorkingEntry],
    user_names: Sequence[str],
    aliases: Mapping[str, str],
    policy: MemoryPolicy | None,
) -> Episode:
    """``episode`` encoded by the episode encoder alone (the fallback for a batch too large for one call)."""
    ctx = MemoryContext(namespace=episode.namespace, user_id=episode.user_id, session_id=episode.session_id)
    made = await encode_session(
        model, ctx=ctx, session_id=episode.session_id,
        entries=[o for o in observations if o.session_id == episode.session_id],
        turns=[t for t in turns if t.session_id == episode.session_id], user_names=user_names, aliases=aliases,
        now=episode.created_at, policy=policy,
    )  # fmt: skip
    meta = {k: v for k, v in episode.metadata.items() if k != PROVISIONAL}
    return episode.model_copy(
        update={
            "summary": made.summary,
            "subjects": episode_subjects([*made.subjects, *episode.subjects], aliases),
            "salience": made.salience,
            "metadata": {**meta, **{k: v for k, v in made.metadata.items() if k != "dia_ids"}},
        }
    )
