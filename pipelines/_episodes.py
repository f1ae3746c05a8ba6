"""Episode encoder: a session's entries and turns -> one Episode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from tiermem.memory._errors import InvalidSubjectError
from tiermem.memory._identity import episode_id
from tiermem.memory._records import Episode, MemoryContext, Turn, WorkingEntry
from tiermem.memory._subjects import canonical_subject
from tiermem.prompts import encode_episode

from ._model import StageModel

__all__ = ["encode_session"]


async def encode_session(
    model: StageModel,
    *,
    ctx: MemoryContext,
    session_id: str,
    entries: Sequence[WorkingEntry],
    turns: Sequence[Turn],
    user_names: Sequence[str],
    aliases: Mapping[str, str],
    now: datetime,
) -> Episode:
    """One model call; subjects are canonicalised and invalid ones dropped."""
    times = [t.created_at for t in turns] or [e.created_at for e in entries] or [now]
    inputs = encode_episode.Input(
        entries=list(entries),
        turns=list(turns),
        user_names=list(user_names),
        started_at=min(times),
        ended_at=max(times),
    )
    output = await model.run(encode_episode.STAGE, inputs)
    subjects: list[str] = []
    for raw in [*output.subjects, *(e.subject for e in entries)]:
        try:
            subject = canonical_subject(raw, aliases=aliases)
        except InvalidSubjectError:
            continue
        if subject not in subjects:
            subjects.append(subject)
    dia = [str(t.metadata["dia_id"]) for t in turns if "dia_id" in t.metadata]
    return Episode(
        id=episode_id(ctx, session_id=session_id),
        namespace=ctx.namespace,
        user_id=ctx.user_id,
        session_id=session_id,
        summary=" ".join(output.summary.split()),
        subjects=tuple(subjects or ["user"]),
        started_at=min(times),
        ended_at=max(times),
        created_at=now,
        updated_at=now,
        salience=output.salience,
        status="pending",
        provenance=tuple(t.id for t in turns),
        metadata={
            "prompt_version": encode_episode.STAGE.version,
            "model": model.name,
            **({"dia_ids": dia} if dia else {}),
        },
    )
