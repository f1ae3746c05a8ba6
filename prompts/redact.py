"""Redaction prompt: a derived text (an episode's summary) -> the same text without a forgotten memory.

Asked by ``forget``. The answer is valid only when it carries none of the forgotten terms (see
:class:`~tiermem.memory._redaction.Forgotten`); an answer that still does is refused and asked again.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tiermem.memory._redaction import Forgotten
from tiermem.memory._stage import ChatMessages, Stage

VERSION = "redact-v1"


class Input(BaseModel):
    """What the redactor sees."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(description="The text to rewrite (an episode's summary).")
    forgotten: list[str] = Field(description="The memories the user asked to forget.")
    terms: list[str] = Field(description="Stemmed words only the forgotten memories use: the answer must use none.")


class Output(BaseModel):
    """The rewritten text."""

    text: str = Field(max_length=6000, description="The text without the forgotten memories; empty if nothing is left.")


TEXT = """\
The user asked to forget some memories. Rewrite the text below so that it no longer says
anything that only the forgotten memories say: remove those statements (and the names, places
and details only they mention) and keep everything else as written. Do not add anything. Do not
use any of these words or their forms: {terms}. If nothing is left, answer with an empty text.
"""


def _render(inputs: Input) -> ChatMessages:
    forgotten = "\n".join(f"- {t}" for t in inputs.forgotten) or "- (none)"
    body = f"Forgotten memories:\n{forgotten}\n\nText:\n{inputs.text}"
    system = TEXT.format(terms=", ".join(sorted(inputs.terms)) or "(none)")
    return [{"role": "system", "content": system}, {"role": "user", "content": body}]


def _output_for(inputs: Input) -> type[Output]:
    """An answer that still carries a forgotten term does not validate (and is asked again)."""
    return _refusing(frozenset(inputs.terms))


@lru_cache(maxsize=64)
def _refusing(terms: frozenset[str]) -> type[Output]:
    """The output model for one set of forgotten terms (one class per set: a call's model is stable)."""
    forgotten = Forgotten(texts=(), terms=terms)

    class Redacted(Output):
        @field_validator("text")
        @classmethod
        def _forgets(cls, text: str) -> str:
            left = forgotten.carried(text)
            if left:
                raise ValueError(f"the text still says what was forgotten ({', '.join(sorted(left))}): remove it")
            return " ".join(text.split())

    return Redacted


STAGE = Stage(
    name="redact", version=VERSION, input=Input, output=Output, text=TEXT, renderer=_render, narrow=_output_for
)
"""The redaction stage: a text and the forgotten memories in, the text without them out."""
