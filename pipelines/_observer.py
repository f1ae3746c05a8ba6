"""Observer: one captured turn -> working-memory entries, each attributed to a subject."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tiermem.memory._errors import InvalidSubjectError
from tiermem.memory._identity import observation_id
from tiermem.memory._records import Turn, WorkingEntry
from tiermem.memory._subjects import canonical_subject
from tiermem.prompts import observe

from ._model import StageModel

__all__ = ["ObservedTurn", "observe_turn"]


@dataclass(frozen=True, kw_only=True)
class ObservedTurn:
    """The observer's result for one turn."""

    entries: list[WorkingEntry]
    dropped: int


async def observe_turn(
    model: StageModel,
    *,
    turn: Turn,
    user_names: Sequence[str],
    aliases: Mapping[str, str],
    known_subjects: Sequence[str],
) -> ObservedTurn:
    """One model call; observations with a subject that cannot be canonicalised are dropped and counted."""
    inputs = observe.Input(
        messages=list(turn.messages),
        user_names=list(user_names),
        known_subjects=list(known_subjects),
        now=turn.created_at,
    )
    output = await model.run(observe.STAGE, inputs)
    entries: list[WorkingEntry] = []
    dropped = 0
    for index, obs in enumerate(output.observations):
        try:
            subject = canonical_subject(obs.subject, aliases=aliases)
        except InvalidSubjectError:
            dropped += 1
            continue
        text = " ".join(obs.text.split())
        entries.append(
            WorkingEntry(
                id=observation_id(turn, index=index),
                namespace=turn.namespace,
                user_id=turn.user_id,
                session_id=turn.session_id,
                subject=subject,
                kind=obs.kind,
                text=text,
                salience=obs.salience,
                seq=turn.seq,
                created_at=turn.created_at,
                updated_at=turn.created_at,
                provenance=(turn.id,),
                metadata={"prompt_version": observe.STAGE.version, "model": model.name, **turn.metadata},
            )
        )
    return ObservedTurn(entries=entries, dropped=dropped)
