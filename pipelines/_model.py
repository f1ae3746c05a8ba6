"""Stage models: how a pipeline stage turns its typed input into its typed output.

Two implementations of one Protocol, both keyed on the prompt modules' :class:`~tiermem.memory._stage.Stage`
objects: :class:`LLMStages` renders the stage's prompt and asks a model through the LLM boundary;
:class:`RulesStages` runs the offline rules model on the same input. Pipelines never know which one
they have::

    output = await stages.run(observe.STAGE, observe.Input(...))  # an observe.Output

Each also says how many prompt tokens a stage may send (``input_budget(stage)``, see
:mod:`tiermem.pipelines._budget`): the pipelines fit their inputs below it. A StageModel without the
method has no limit until its provider refuses a prompt as too long.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

from pydantic import BaseModel

from tiermem.memory._errors import ModelError
from tiermem.memory._stage import Stage
from tiermem.memory._usage import UsageLedger

from . import _rules as rules
from ._budget import Budget

if TYPE_CHECKING:
    from tiermem.memory._llm import LLM

__all__ = ["LLMStages", "RulesStages", "StageModel"]

InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT", bound=BaseModel)


class StageModel(Protocol):
    """Produces a stage's output from its input."""

    name: str
    ledger: UsageLedger

    async def run(self, stage: Stage[InputT, OutputT], inputs: InputT) -> OutputT:
        """The stage's answer to ``inputs``, validated against ``stage.output_for(inputs)``."""
        ...


class LLMStages:
    """Prompts rendered and answered by a litellm model, validated and retried by :class:`LLM`."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.name = llm.model
        self.ledger = llm.ledger

    @property
    def fingerprint(self) -> str:
        """The model configuration in use, to tell whether a permanent failure may be fixed by now."""
        return self.llm.fingerprint

    def input_budget(self, stage: Stage[InputT, OutputT], inputs: InputT | None = None) -> Budget:
        """A share of the model's context window (litellm's, or a safe default), less the output schema."""
        output = stage.output if inputs is None else stage.output_for(inputs)
        return Budget(tokens=self.llm.input_budget(output), count=self.llm.count_tokens)

    async def run(self, stage: Stage[InputT, OutputT], inputs: InputT) -> OutputT:
        call = stage.call(inputs)
        return await self.llm.structured(stage=stage.name, messages=stage.render(inputs), output=call.output, call=call)


class RulesStages:
    """The deterministic offline rules model: no network, no key."""

    name = "rules"

    def __init__(self, ledger: UsageLedger | None = None) -> None:
        self.ledger = ledger if ledger is not None else UsageLedger()

    def input_budget(self, stage: Stage[InputT, OutputT], inputs: InputT | None = None) -> Budget:
        """No limit: the rules read any input."""
        return Budget(tokens=None)

    async def run(self, stage: Stage[InputT, OutputT], inputs: InputT) -> OutputT:
        rule = rules.RULES.get(stage)
        if rule is None:
            raise ModelError(f"the rules model has no {stage.name!r} stage", stage=stage.name)
        result = rule(inputs)  # not a model call: the usage ledger stays untouched
        return stage.output_for(inputs).model_validate(result.model_dump())
