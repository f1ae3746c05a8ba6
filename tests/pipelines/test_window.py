"""Windows of consecutive turns: packed by size and by the model's input budget; each turn's entries its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from tiermem import Message, ModelOutputError, Turn, UsageLedger
from tiermem.memory._stage import Stage
from tiermem.pipelines import Budget, RulesStages, observe_turn, observe_window, windows
from tiermem.prompts import observe_window as window_prompt

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _turns(*texts: str) -> list[Turn]:
    return [
        Turn(id=f"turn_{n}", namespace="default", user_id="u-1", session_id="s-1", seq=n,
             created_at=NOW + timedelta(minutes=n), messages=(Message(role="user", content=text),))
        for n, text in enumerate(texts)
    ]  # fmt: skip


class _Budgeted(RulesStages):
    """The rules model with an input budget, as an LLM has one."""

    def __init__(self, tokens: int) -> None:
        super().__init__()
        self.tokens = tokens

    def input_budget(self, stage: Stage[Any, Any], inputs: BaseModel | None = None) -> Budget:
        return Budget(tokens=self.tokens)


def _sizes(planned: list[list[Turn]]) -> list[int]:
    return [len(w) for w in planned]


@pytest.mark.parametrize(
    ("size", "expected"), [(1, [1] * 7), (3, [3, 3, 1]), (4, [4, 3]), (8, [7])], ids=["one", "three", "four", "eight"]
)
def test_windows_without_a_budget_are_cut_by_size(size: int, expected: list[int]) -> None:
    planned = windows(RulesStages(), _turns(*(f"I like tea number {n}." for n in range(7))), size=size,
                      user_names=[], known_subjects=[])  # fmt: skip

    assert _sizes(planned) == expected
    assert [t.seq for w in planned for t in w] == list(range(7))


def test_windows_fit_the_budget_and_a_turn_too_large_goes_alone() -> None:
    big = "My week was long. " * 300  # ~1,800 tokens by the estimate: more than a window may hold
    turns = _turns("I like tea.", "I like coffee.", big, "I live in Porto.", "I work at Acme.")

    planned = windows(_Budgeted(1500), turns, size=8, user_names=["Sam"], known_subjects=["user"])

    assert _sizes(planned) == [2, 1, 2] and planned[1][0].messages[0].content == big


def test_a_budget_that_holds_no_window_leaves_every_turn_alone() -> None:
    planned = windows(_Budgeted(300), _turns("I like tea.", "I like coffee."), size=8, user_names=[],
                      known_subjects=[])  # fmt: skip

    assert _sizes(planned) == [1, 1]


async def test_a_window_gives_each_turn_the_entries_it_gets_alone() -> None:
    turns = _turns("My sister Ana plays the cello.", "Hi!", "I moved to Lisbon.")

    observed = await observe_window(RulesStages(), turns=turns, user_names=[], aliases={}, known_subjects=[])
    alone = [await observe_turn(RulesStages(), turn=t, user_names=[], aliases={}, known_subjects=[]) for t in turns]

    strip = ("prompt_version",)
    assert [[e.model_copy(update={"metadata": {k: v for k, v in e.metadata.items() if k not in strip}})
             for e in o.entries] for o in observed] == [
        [e.model_copy(update={"metadata": {k: v for k, v in e.metadata.items() if k not in strip}}) for e in o.entries]
        for o in alone
    ]  # fmt: skip
    assert observed[1].entries == [] and observed[0].entries[0].subject == "ana"
    assert {e.metadata["prompt_version"] for o in observed for e in o.entries} == {window_prompt.VERSION}


class _Unchecked:
    """A stage model that does not validate its answers: the window is checked again when entries are made."""

    name = "unchecked"
    ledger = UsageLedger()

    async def run(self, stage: Stage[Any, Any], inputs: Any) -> Any:
        obs = window_prompt.Observation(subject="user", kind="fact", text="The user likes tea.", salience=0.5, turn=5)
        return window_prompt.Output.model_construct(observations=[obs])


async def test_an_observation_naming_a_turn_outside_the_window_is_an_output_error() -> None:
    with pytest.raises(ModelOutputError, match="turn 5; the window has turns 1 to 2"):
        await observe_window(_Unchecked(), turns=_turns("a", "b"), user_names=[], aliases={}, known_subjects=[])
