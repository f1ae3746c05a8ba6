"""Redactor: a derived text without a forgotten memory (``forget`` rewrites episode summaries with it)."""

from __future__ import annotations

from tiermem.memory._redaction import Forgotten
from tiermem.prompts import redact

from ._model import StageModel

__all__ = ["redact_text"]


async def redact_text(model: StageModel, text: str, forgotten: Forgotten) -> str:
    """``text`` rewritten by the model without what only ``forgotten`` says (a text that says none of it is
    returned as it is, with no call); empty when nothing is left."""
    if not forgotten.carries(text):
        return text
    inputs = redact.Input(text=text, forgotten=list(forgotten.texts), terms=sorted(forgotten.terms))
    output = await model.run(redact.STAGE, inputs)
    return " ".join(output.text.split())
