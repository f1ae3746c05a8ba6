"""Window observer: consecutive past turns of one session -> each turn's working-memory entries, in one call.

An import (``import_conversations``) observes its history by windows (:mod:`tiermem.prompts.observe_window`):
one model call for up to ``size`` consecutive turns, as many as fit the model's input budget. Each
observation names its turn, and each turn's entries are made as :func:`~._observer.observe_turn` makes
them for the turn alone (ids numbered per turn, the turn's seq, time and provenance), so a window changes
the number of calls, not what is stored. A turn too large for a window on its own is left alone by
:func:`windows`: the per-turn observer fits it (in parts if need be).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tiermem.memory._errors import ModelContextWindowError, ModelOutputError
from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Turn
from tiermem.prompts import observe_window as window_prompt

from ._budget import input_budget
from ._model import StageModel
from ._observer import ObservedTurn, observed_turn

__all__ = ["observe_window", "windows"]

STAGE = window_prompt.STAGE
_SEPARATOR = 2  # the blank line between two turns' blocks


def _input(
    turns: Sequence[Turn], user_names: Sequence[str], known_subjects: Sequence[str], policy: MemoryPolicy | None
) -> window_prompt.Input:
    return window_prompt.Input(
        turns=[window_prompt.WindowTurn(messages=list(t.messages), now=t.created_at) for t in turns],
        user_names=list(user_names),
        known_subjects=list(known_subjects),
        policy=policy,
    )


def windows(
    model: StageModel,
    turns: Sequence[Turn],
    *,
    size: int,
    user_names: Sequence[str],
    known_subjects: Sequence[str],
    policy: MemoryPolicy | None = None,
) -> list[list[Turn]]:
    """``turns`` (consecutive, of one session) in consecutive windows of at most ``size`` that each fit the
    window stage's input budget. A turn that does not fit a window alone is a window of one, as is every
    turn when ``size`` is 1 or when the prompt's fixed part leaves no room."""
    if size <= 1 or len(turns) < 2:
        return [[t] for t in turns]
    budget = input_budget(model, STAGE)
    if budget.tokens is None:
        return [list(turns[i : i + size]) for i in range(0, len(turns), size)]
    # The prompt without turns (model_construct: the Input needs one), to measure what the turns may fill.
    empty = window_prompt.Input.model_construct(
        turns=[], user_names=list(user_names), known_subjects=list(known_subjects), policy=policy
    )
    try:
        room = budget.room(STAGE, STAGE.render(empty))
    except ModelContextWindowError:  # the known subjects crowd out any window: per turn, which cuts them down
        return [[t] for t in turns]
    out: list[list[Turn]] = []
    used = 0
    for turn in turns:
        # Counted under the widest number a turn of the window can have: the cost does not depend on the packing.
        block = window_prompt.turn_block(
            size, window_prompt.WindowTurn(messages=list(turn.messages), now=turn.created_at)
        )
        if not budget.within(block, room - _SEPARATOR):  # alone: the per-turn path splits it into parts
            out.append([turn])
            used = room + 1  # nothing joins it
            continue
        cost = budget.count(block) + _SEPARATOR
        if not out or len(out[-1]) >= size or used + cost > room:
            out.append([])
            used = 0
        out[-1].append(turn)
        used += cost
    return out


async def observe_window(
    model: StageModel,
    *,
    turns: Sequence[Turn],
    user_names: Sequence[str],
    aliases: Mapping[str, str],
    known_subjects: Sequence[str],
    policy: MemoryPolicy | None = None,
) -> list[ObservedTurn]:
    """One model call for ``turns`` (consecutive, of one session): each turn's entries, in order.

    Raises what the call raises (a ModelOutputError when the answer names a turn not in the window).
    """
    output = await model.run(STAGE, _input(turns, user_names, known_subjects, policy))
    said: list[list[window_prompt.Observation]] = [[] for _ in turns]
    for obs in output.observations:
        if not 1 <= obs.turn <= len(turns):  # the stage's output checks it; a StageModel that does not, here
            raise ModelOutputError(
                f"{STAGE.name}: an observation names turn {obs.turn}; the window has turns 1 to {len(turns)}",
                stage=STAGE.name,
            )
        said[obs.turn - 1].append(obs)
    return [
        observed_turn(turn, observations, aliases=aliases, model=model.name, version=STAGE.version, policy=policy)
        for turn, observations in zip(turns, said, strict=True)
    ]
