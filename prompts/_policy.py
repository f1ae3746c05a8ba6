"""How a memory policy is told to a model and held against its answer: one home for every stage that writes
memories or restates them (observe, observe_window, encode_episode, consolidate, encode_consolidate, and
the digest and compaction, which must not restate what the policy keeps out).

:func:`policy_rules` renders the policy (instructions, the allowed labels, what is kept out) as the last
paragraph of a stage's system prompt; :func:`labelled` narrows a stage's output so each item's
``categories`` may only hold the policy's labels: an answer with another label does not validate, and is
asked again, then its item is parked, as any invalid answer.
"""

from __future__ import annotations

import functools
from typing import Any, Literal, TypeVar, cast

from pydantic import BaseModel, Field, create_model
from pydantic.json_schema import SkipJsonSchema

from tiermem.memory._policy import MemoryPolicy

__all__ = ["Categories", "categories_field", "labelled", "labelled_item", "policy_rules"]

M = TypeVar("M", bound=BaseModel)

Categories = SkipJsonSchema[list[str]]
"""An answer item's labels, left out of the schema a model is sent unless the policy has labels (then
:func:`labelled` makes them a visible field of the allowed values): no policy, no prompt tokens spent."""


def categories_field() -> Any:
    """An answer item's ``categories`` field: any strings, narrowed to the policy's labels by :func:`labelled`."""
    return Field(default_factory=list, max_length=8, description="Labels from the memory policy that apply.")


POLICY = """
Memory policy (set by the application; it comes before the guidance above):
{rules}
"""


def policy_rules(policy: MemoryPolicy | None, *, labels: bool = True) -> str:
    """The policy paragraph of a system prompt ("" for no policy). ``labels``: the stage's answer labels its
    items (the encoder's summary does not)."""
    if policy is None or policy.empty:
        return ""
    rules: list[str] = []
    if policy.instructions:
        rules.append(f"- Instructions: {policy.instructions}")
    if labels and policy.labels:
        rules.append(
            '- Give each memory you write the "categories" that apply to it, chosen only from: '
            f"{', '.join(policy.labels)} (none when none applies)."
        )
    if policy.include_categories:
        rules.append(f"- Write down only what falls under: {', '.join(policy.include_categories)}.")
    if policy.exclude_categories:
        rules.append(f"- Never write down anything that falls under: {', '.join(policy.exclude_categories)}.")
    if policy.exclude_subjects:
        rules.append(f"- Never write down anything about: {', '.join(policy.exclude_subjects)}.")
    return POLICY.format(rules="\n".join(rules)) if rules else ""


@functools.cache
def labelled_item(item: type[M], labels: tuple[str, ...]) -> type[M]:
    """``item`` whose ``categories`` may hold only ``labels`` (one class per shape, cached)."""
    allowed: Any = Literal.__getitem__(labels)
    field: Any = Field(
        default_factory=list, max_length=len(labels), description=f"Labels that apply, from: {', '.join(labels)}."
    )
    made: Any = create_model(f"{item.__name__}Labelled", __base__=item, categories=(list[allowed], field))
    return cast(type[M], made)


@functools.cache
def labelled(output: type[M], items: str, item: type[BaseModel], labels: tuple[str, ...]) -> type[M]:
    """``output`` whose list field ``items`` holds ``item``s whose ``categories`` are among ``labels``
    (``output`` itself without labels). One class per shape (cached), so the schema a model is sent says so."""
    if not labels:
        return output
    base = output.model_fields[items]
    field: Any = Field(default_factory=list, max_length=_max_length(base), description=base.description)
    labelled_items: Any = list[labelled_item(item, labels)]  # type: ignore[misc]
    fields: dict[str, Any] = {items: (labelled_items, field)}
    made: Any = create_model(f"{output.__name__}Labelled", __base__=output, **fields)
    return cast(type[M], made)


def _max_length(field: Any) -> int | None:
    return next((m.max_length for m in field.metadata if getattr(m, "max_length", None) is not None), None)
