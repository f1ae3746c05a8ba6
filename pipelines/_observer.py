"""Observer: one captured turn -> working-memory entries, each attributed to a subject.

A turn too large for the model's input budget is observed in parts (:data:`MAX_PARTS` calls at most;
a longer turn keeps its start and its end) and the parts' observations are merged, numbered on from
one part to the next so that each keeps its own stable id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tiermem.memory._errors import InvalidSubjectError
from tiermem.memory._identity import observation_id
from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Message, Turn, WorkingEntry
from tiermem.memory._subjects import canonical_subject
from tiermem.prompts import observe

from ._budget import Budget, fitted
from ._model import StageModel

__all__ = ["MAX_PARTS", "ObservedTurn", "observe_turn", "observed_turn", "turn_parts"]

MAX_PARTS = 8
"""At most this many observer calls for one turn; the middle of a longer turn is left out."""
_GAP = "[...] "


@dataclass(frozen=True, kw_only=True)
class ObservedTurn:
    """The observer's result for one turn."""

    entries: list[WorkingEntry]
    dropped: int
    parts: int = 1
    """Observer calls the turn took (more than one for a turn too large for the model's input budget)."""


async def observe_turn(
    model: StageModel,
    *,
    turn: Turn,
    user_names: Sequence[str],
    aliases: Mapping[str, str],
    known_subjects: Sequence[str],
    policy: MemoryPolicy | None = None,
) -> ObservedTurn:
    """One model call (one per part for an oversized turn); observations with a subject that cannot be
    canonicalised are dropped and counted, and so are those ``policy`` keeps out."""
    inputs = observe.Input(
        messages=list(turn.messages),
        user_names=list(user_names),
        known_subjects=list(known_subjects),
        now=turn.created_at,
        policy=policy,
    )

    async def run(budget: Budget) -> list[observe.Output]:
        return [await model.run(observe.STAGE, part) for part in turn_parts(budget, inputs)]

    outputs = await fitted(model, observe.STAGE, run)
    observations = list(outputs[0].observations)
    if len(outputs) > 1:  # parts overlap in what they say: one entry per subject and text
        seen: set[tuple[str, str]] = set()
        observations = []
        for obs in (o for output in outputs for o in output.observations):
            key = (obs.subject.lower(), " ".join(obs.text.lower().split()))
            if key not in seen:
                seen.add(key)
                observations.append(obs)
    extra = {"parts": len(outputs)} if len(outputs) > 1 else {}
    return observed_turn(turn, observations, aliases=aliases, model=model.name, version=observe.STAGE.version,
                         extra=extra, parts=len(outputs), policy=policy)  # fmt: skip


def observed_turn(
    turn: Turn,
    observations: Sequence[observe.Observation],
    *,
    aliases: Mapping[str, str],
    model: str,
    version: str,
    extra: Mapping[str, object] | None = None,
    parts: int = 1,
    policy: MemoryPolicy | None = None,
) -> ObservedTurn:
    """``turn``'s entries from its observations, in order: numbered per turn, dated and attributed to it.

    An observation whose subject cannot be canonicalised is dropped and counted, and so is one ``policy``
    keeps out (its subject or labels excluded, whatever the model was told); the others keep their
    position as their index, so an entry's id does not depend on its neighbours' subjects.
    """
    entries: list[WorkingEntry] = []
    dropped = 0
    for index, obs in enumerate(observations):
        try:
            subject = canonical_subject(obs.subject, aliases=aliases)
        except InvalidSubjectError:
            dropped += 1
            continue
        labels = policy.assigned(obs.categories) if policy is not None else ()
        if policy is not None and not policy.admits(subject, labels):
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
                keys=tuple(obs.keys),
                categories=labels,
                metadata={"prompt_version": version, "model": model, **(extra or {}), **turn.metadata},
            )
        )
    return ObservedTurn(entries=entries, dropped=dropped, parts=parts)


def turn_parts(budget: Budget, inputs: observe.Input) -> list[observe.Input]:
    """``inputs`` whole when it fits ``budget``; else the turn in consecutive parts that each fit.

    A message longer than a part is split; past :data:`MAX_PARTS` parts the first and last ones are
    kept and the first after the gap starts with ``[...]``.
    """
    if budget.tokens is None or budget.fits(observe.STAGE.render(inputs)):
        return [inputs]
    base = _fewer_subjects(budget, budget.tokens, inputs.model_copy(update={"messages": []}))
    room = budget.room(observe.STAGE, observe.STAGE.render(base))
    pieces: list[Message] = []
    for message in inputs.messages:
        speaker = budget.count(f"{message.name or message.role}: ") + 1
        for text in budget.split(message.content, max(room - speaker, 1), limit=MAX_PARTS):
            pieces.append(message.model_copy(update={"content": text}))
    costs = [budget.count(f"{p.name or p.role}: {p.content}") + 1 for p in pieces]
    groups = budget.pack(costs, room)
    if len(groups) > MAX_PARTS:
        tail = groups[len(groups) - MAX_PARTS // 2 :]
        groups = [*groups[: MAX_PARTS - MAX_PARTS // 2], *tail]
        first = tail[0][0]
        pieces[first] = pieces[first].model_copy(update={"content": _GAP + pieces[first].content})
    return [base.model_copy(update={"messages": [pieces[i] for i in group]}) for group in groups]


def _fewer_subjects(budget: Budget, tokens: int, base: observe.Input) -> observe.Input:
    """``base`` with as many known subjects as fit a quarter of the budget, when they would crowd out the turn."""
    if budget.messages_tokens(observe.STAGE.render(base)) <= tokens // 2:
        return base
    kept: list[str] = []
    used = 0
    for subject in base.known_subjects:
        used += budget.count(subject) + 1
        if used > tokens // 4:
            break
        kept.append(subject)
    return base.model_copy(update={"known_subjects": kept})
