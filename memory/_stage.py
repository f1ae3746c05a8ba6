"""The typed stage boundary: one :class:`Stage` per prompt module, and the :class:`StageCall` a model is given.

A stage is a prompt with a typed contract: ``Stage[InputT, OutputT]`` names its input model, its output
model, its prompt text and version, and renders an input into chat messages. The stage models
(``tiermem.pipelines``: the LLM model and the offline rules model) are keyed on these objects, so
``await stages.run(observe.STAGE, observe.Input(...))`` is typed ``observe.Output`` end to end.

A :class:`StageCall` is what a model is told beside the messages: which stage, its typed input and the
output schema the answer must match. Fake models receive it, as pydantic-ai's ``FunctionModel`` receives
``AgentInfo``, so a fake never guesses the stage from the prompt's wording.

A leaf module: it imports nothing of tiermem, so prompts, pipelines and the LLM boundary can all use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

__all__ = ["ChatMessages", "Stage", "StageCall"]

InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT", bound=BaseModel)

ChatMessages = list[dict[str, str]]
"""OpenAI-style chat messages: ``[{"role": "system", "content": ...}, {"role": "user", ...}]``."""


@dataclass(frozen=True, kw_only=True, eq=False)
class Stage(Generic[InputT, OutputT]):
    """One pipeline stage: a versioned prompt with a typed input and output.

    Compared and hashed by identity: each prompt module defines exactly one ``STAGE``.
    """

    name: str
    """Short name, used in the usage ledger, errors and logs ("observe")."""
    version: str
    """Prompt version, stamped on every record the stage produces ("observe-v1")."""
    input: type[InputT]
    """What the stage is given."""
    output: type[OutputT]
    """What the stage answers (a call may ask for a subclass, see :meth:`output_for`)."""
    text: str
    """The prompt text (the system message's template)."""
    renderer: Callable[[InputT], ChatMessages]
    """Builds the chat messages for one input."""
    narrow: Callable[[InputT], type[OutputT]] | None = None
    """For stages whose answer shape depends on the input (consolidate asks for edges only when relations
    are on): the output model for that input, ``output`` or a subclass of it."""

    def render(self, inputs: InputT) -> ChatMessages:
        """The chat messages for ``inputs``."""
        return self.renderer(inputs)

    def output_for(self, inputs: InputT) -> type[OutputT]:
        """The output model an answer to ``inputs`` must validate against."""
        return self.output if self.narrow is None else self.narrow(inputs)

    def call(self, inputs: InputT) -> StageCall[InputT, OutputT]:
        """The :class:`StageCall` for ``inputs``."""
        return StageCall(stage=self, inputs=inputs, output=self.output_for(inputs))

    def __repr__(self) -> str:
        return f"Stage({self.name!r}, version={self.version!r})"


@dataclass(frozen=True, kw_only=True)
class StageCall(Generic[InputT, OutputT]):
    """One request of a stage: what a model is told beside the rendered messages."""

    stage: Stage[InputT, OutputT]
    """The stage asked."""
    inputs: InputT
    """Its typed input (the messages are ``stage.render(inputs)``)."""
    output: type[OutputT]
    """The model the answer must validate against."""

    @property
    def output_schema(self) -> dict[str, object]:
        """The JSON schema of :attr:`output`."""
        return self.output.model_json_schema()
