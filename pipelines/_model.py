"""Stage models: how a pipeline stage turns its structured input into the prompt's output type.

Two implementations of one Protocol: :class:`LLMStages` renders the stage's prompt and asks a
model through the LLM boundary; :class:`RulesStages` runs the offline rules model on the same
input. Pipelines never know which one they have.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel

from tiermem.memory._errors import ModelError
from tiermem.memory._usage import UsageLedger
from tiermem.prompts import compact, consolidate, digest, encode_episode, observe

from . import _rules as rules

if TYPE_CHECKING:
    from tiermem.memory._llm import LLM

__all__ = ["PROMPTS", "LLMStages", "RulesStages", "StageModel"]

T = TypeVar("T", bound=BaseModel)

PROMPTS: dict[str, ModuleType] = {
    "observe": observe,
    "encode_episode": encode_episode,
    "consolidate": consolidate,
    "digest": digest,
    "compact": compact,
}


class StageModel(Protocol):
    """Produces a stage's output from its input."""

    name: str
    ledger: UsageLedger

    async def generate(self, stage: str, inputs: BaseModel, output: type[T]) -> T: ...


class LLMStages:
    """Prompts rendered and answered by a litellm model, validated and retried by :class:`LLM`."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.name = llm.model
        self.ledger = llm.ledger

    async def generate(self, stage: str, inputs: BaseModel, output: type[T]) -> T:
        module = PROMPTS[stage]
        fields: dict[str, Any] = {name: getattr(inputs, name) for name in type(inputs).model_fields}
        messages = module.render(**fields)
        return await self.llm.structured(stage=stage, messages=messages, output=output)


class RulesStages:
    """The deterministic offline rules model: no network, no key."""

    name = "rules"

    def __init__(self, ledger: UsageLedger | None = None) -> None:
        self.ledger = ledger if ledger is not None else UsageLedger()

    async def generate(self, stage: str, inputs: BaseModel, output: type[T]) -> T:
        if stage not in rules.RULES:
            raise ModelError(f"the rules model has no {stage!r} stage", stage=stage)
        result = rules.RULES[stage](inputs)  # not a model call: the usage ledger stays untouched
        return output.model_validate(result.model_dump())
