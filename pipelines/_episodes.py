"""Episode encoder: a session's entries and turns -> one Episode.

A session too large for the model's input budget is summarised hierarchically: its turns (each with
its observations, a huge turn clipped to its start and end) are cut into consecutive parts that fit,
each part is summarised, and the summaries are summarised, in as many rounds as it takes, into one
(:func:`~._budget.merged`, the recipe the digest shares).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from tiermem.memory._errors import InvalidSubjectError
from tiermem.memory._identity import episode_id
from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Episode, MemoryContext, Message, Turn, WorkingEntry
from tiermem.memory._subjects import canonical_subject
from tiermem.prompts import encode_episode

from ._budget import Budget, fitted, merged
from ._model import StageModel

__all__ = ["encode_session", "episode_subjects", "session_episode", "session_parts"]

_STAGE = encode_episode.STAGE


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
    policy: MemoryPolicy | None = None,
) -> Episode:
    """One model call, or a summary of part summaries for a session too large for one; subjects are
    canonicalised and invalid ones dropped. ``policy``: what the summary may say."""
    times = [t.created_at for t in turns] or [e.created_at for e in entries] or [now]
    inputs = encode_episode.Input(
        entries=list(entries),
        turns=list(turns),
        user_names=list(user_names),
        started_at=min(times),
        ended_at=max(times),
        policy=policy,
    )
    outputs = await fitted(model, _STAGE, lambda budget: _summarise(model, budget, inputs))
    output = outputs[-1]  # the summary of the whole; the parts' outputs name subjects too
    subjects = episode_subjects([*(s for o in outputs for s in o.subjects), *(e.subject for e in entries)], aliases)
    metadata = {"prompt_version": _STAGE.version, "model": model.name}
    return session_episode(
        ctx=ctx, session_id=session_id, turns=turns, times=times, now=now, summary=output.summary,
        subjects=subjects, salience=max(o.salience for o in outputs),
        metadata=metadata | ({"summary_calls": len(outputs)} if len(outputs) > 1 else {}),
    )  # fmt: skip


def episode_subjects(raw: Iterable[str], aliases: Mapping[str, str]) -> tuple[str, ...]:
    """Canonical subjects in first-seen order, invalid ones dropped; ``("user",)`` when none is left."""
    found: list[str] = []
    for name in raw:
        try:
            subject = canonical_subject(name, aliases=aliases)
        except InvalidSubjectError:
            continue
        if subject not in found:
            found.append(subject)
    return tuple(found or ["user"])


def session_episode(
    *,
    ctx: MemoryContext,
    session_id: str,
    turns: Sequence[Turn],
    times: Sequence[datetime],
    now: datetime,
    summary: str,
    subjects: tuple[str, ...],
    salience: float,
    metadata: Mapping[str, object],
) -> Episode:
    """The pending episode of a session's turns (spanning ``times``), its LoCoMo dialogue ids kept."""
    dia = [str(t.metadata["dia_id"]) for t in turns if "dia_id" in t.metadata]
    return Episode(
        id=episode_id(ctx, session_id=session_id),
        namespace=ctx.namespace,
        user_id=ctx.user_id,
        session_id=session_id,
        summary=" ".join(summary.split()),
        subjects=subjects,
        started_at=min(times),
        ended_at=max(times),
        created_at=now,
        updated_at=now,
        salience=salience,
        status="pending",
        provenance=tuple(t.id for t in turns),
        metadata={**metadata, **({"dia_ids": dia} if dia else {})},
    )


async def _summarise(model: StageModel, budget: Budget, inputs: encode_episode.Input) -> list[encode_episode.Output]:
    """Every output of the encoding, the summary of the whole last."""
    parts = session_parts(budget, inputs)
    outputs = [await model.run(_STAGE, part) for part in parts]
    if len(parts) == 1:
        return outputs
    base = inputs.model_copy(update={"entries": [], "turns": []})
    return outputs + await merged(
        budget, _STAGE, [o.summary for o in outputs], make=lambda texts, _: base.model_copy(update={"parts": texts}),
        ask=lambda part: model.run(_STAGE, part), text_of=lambda o: o.summary,
    )  # fmt: skip


def session_parts(budget: Budget, inputs: encode_episode.Input) -> list[encode_episode.Input]:
    """``inputs`` whole when it fits ``budget``; else consecutive parts of the session that each fit.

    Each turn is followed by its observations (observations of no listed turn come last); a turn
    larger than half a part is clipped to its start and end (it was observed whole).
    """
    if budget.tokens is None or budget.fits(_STAGE.render(inputs)):
        return [inputs]
    base = inputs.model_copy(update={"entries": [], "turns": []})
    room = budget.room(_STAGE, _STAGE.render(base))
    turn_ids = {t.id for t in inputs.turns}
    by_turn: dict[str, list[WorkingEntry]] = {}
    for entry in inputs.entries:
        anchor = next((p for p in entry.provenance if p in turn_ids), "")
        by_turn.setdefault(anchor, []).append(entry)
    items: list[Turn | WorkingEntry] = []
    for turn in inputs.turns:
        items += [_clipped_turn(budget, turn, room // 2), *by_turn.get(turn.id, [])]
    items += by_turn.get("", [])
    items = [i if isinstance(i, Turn) else i.model_copy(update={"text": budget.clip(i.text, room // 2)}) for i in items]
    costs = [budget.count(i.text if isinstance(i, Turn) else f"- [{i.subject}] {i.text}") + 1 for i in items]
    return [
        base.model_copy(
            update={
                "entries": [items[i] for i in group if isinstance(items[i], WorkingEntry)],
                "turns": [items[i] for i in group if isinstance(items[i], Turn)],
            }
        )
        for group in budget.pack(costs, room)
    ]


def _clipped_turn(budget: Budget, turn: Turn, tokens: int) -> Turn:
    """``turn`` with its messages clipped to fit ``tokens``: short messages whole, long ones share the rest."""
    if budget.within(turn.text, tokens):
        return turn
    framing = [budget.count(f"{m.name or m.role}: ") + 1 for m in turn.messages]
    left = max(tokens - sum(framing), len(framing))
    sizes = [budget.count(m.content) if budget.within(m.content, left) else left + 1 for m in turn.messages]
    shares = [0] * len(sizes)
    for rank, index in enumerate(sorted(range(len(sizes)), key=sizes.__getitem__)):
        shares[index] = min(sizes[index], left // (len(sizes) - rank))  # the smallest take what they need
        left -= shares[index]
    messages: list[Message] = [
        m.model_copy(update={"content": budget.clip(m.content, max(share, 1))})
        for m, share in zip(turn.messages, shares, strict=True)
    ]
    return turn.model_copy(update={"messages": tuple(messages)})
