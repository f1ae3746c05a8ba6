"""Memory policy: what the write side remembers and what it leaves out.

A :class:`MemoryPolicy` is given to ``system(policy=..., instructions=..., categories=...)`` and may be
overridden per call (``capture(..., policy=...)``, ``consolidate(..., policy=...)``). It reaches every stage
that writes memories (observe, observe a window, encode an episode, consolidate, encode-and-consolidate) as
a typed field of the stage's input; the prompts tell a model the instructions and the allowed labels, and
the pipelines keep out, in code and for any model, an observation or a fact whose labels or subject the
policy excludes (:meth:`MemoryPolicy.admits`). The offline rules model reads no free text: it honours
the labels and subjects it can recognise (see ``tiermem.pipelines._rules_policy``).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._errors import ConfigurationError, InvalidArgumentError, InvalidSubjectError
from ._subjects import canonical_subject

__all__ = [
    "MAX_CATEGORIES",
    "MAX_INSTRUCTIONS",
    "MemoryPolicy",
    "categories_of",
    "category_label",
    "checked_categories",
    "policy_fingerprint",
    "policy_of",
]

MAX_INSTRUCTIONS = 4000
"""Characters of free-text instructions at most (they are sent with every call that writes memories)."""
MAX_CATEGORIES = 64
MAX_CATEGORY_LENGTH = 40


def category_label(value: object) -> str:
    """``value`` as a category label: lowercase, whitespace collapsed, 1 to 40 characters, no control
    characters; else ValueError (a pydantic validator reports it, a front door turns it into our error)."""
    if not isinstance(value, str):
        raise ValueError(f"a category is a string, not {type(value).__name__}")
    label = " ".join(value.lower().split())
    if not label or len(label) > MAX_CATEGORY_LENGTH:
        raise ValueError(f"a category has 1 to {MAX_CATEGORY_LENGTH} characters, not {value[:60]!r}")
    if any(unicodedata.category(ch) in {"Cc", "Cs", "Cf"} for ch in label):
        raise ValueError(f"category {value[:60]!r} contains control characters")
    return label


def _labels(values: object, what: str) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise ValueError(f"{what} is a list of category names, not {type(values).__name__}")
    labels = tuple(dict.fromkeys(category_label(v) for v in values))
    if len(labels) > MAX_CATEGORIES:
        raise ValueError(f"{what} has more than {MAX_CATEGORIES} categories")
    return labels


def checked_categories(
    values: object, what: str = "categories", vocabulary: Sequence[str] | None = None
) -> frozenset[str] | None:
    """A read filter's categories (``recall(..., categories=[...])``) as labels; None for None.

    Bad input raises :class:`~tiermem.memory._errors.InvalidArgumentError`, and so does a label outside
    ``vocabulary`` when one is given (the system's policy labels, for the recall tool). Labels are
    compared in Python, never put into a query.
    """
    if values is None:
        return None
    try:
        labels = _labels(values, what)
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from None
    if not labels:
        raise InvalidArgumentError(f"{what} must name at least one category (None: no filter)")
    unknown = [label for label in labels if vocabulary is not None and label not in vocabulary]
    if unknown:
        raise InvalidArgumentError(f"{what} {unknown} are not among this memory's categories {list(vocabulary or ())}")
    return frozenset(labels)


class MemoryPolicy(BaseModel):
    """What to remember and what to leave out; keyword-only, validated (a bad value is a ConfigurationError).

    ``instructions``: free text every memory-writing stage is told ("never store health details").
    ``categories``: the controlled vocabulary of labels the observer (and consolidator) assign; a label
    outside it is invalid model output (retried, then the item is parked). Without it, the labels of
    ``include_categories`` and ``exclude_categories`` are the vocabulary.
    ``include_categories``: only memories with one of these labels are kept.
    ``exclude_categories``: memories with one of these labels are never kept.
    ``exclude_subjects``: memories about these subjects ("moni", "acme-corp") are never kept.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    instructions: str | None = Field(default=None, description="What to remember and what to ignore, in words.")
    categories: tuple[str, ...] | None = Field(default=None, description="Allowed labels; None: see the docstring.")
    include_categories: tuple[str, ...] = Field(default=(), description="Keep only memories with one of these.")
    exclude_categories: tuple[str, ...] = Field(default=(), description="Never keep memories with one of these.")
    exclude_subjects: tuple[str, ...] = Field(default=(), description="Never keep memories about these subjects.")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigurationError(f"invalid memory policy: {exc}") from None

    @field_validator("instructions", mode="before")
    @classmethod
    def _instructions(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"instructions are a string, not {type(value).__name__}")
        text = value.strip()
        if len(text) > MAX_INSTRUCTIONS:
            raise ValueError(f"instructions have more than {MAX_INSTRUCTIONS} characters")
        if any(unicodedata.category(ch) in {"Cs"} for ch in text) or "\x00" in text:
            raise ValueError("instructions contain a NUL or a lone surrogate")
        return text or None

    @field_validator("categories", mode="before")
    @classmethod
    def _vocabulary(cls, value: object) -> object:
        if value is None:
            return None
        labels = _labels(value, "categories")
        if not labels:
            raise ValueError("categories must name at least one category (None: no vocabulary)")
        return labels

    @field_validator("include_categories", "exclude_categories", mode="before")
    @classmethod
    def _chosen(cls, value: object) -> object:
        return _labels(value, "a category list")

    @field_validator("exclude_subjects", mode="before")
    @classmethod
    def _subjects(cls, value: object) -> object:
        if isinstance(value, str) or not isinstance(value, Iterable):
            raise ValueError(f"exclude_subjects is a list of subjects, not {type(value).__name__}")
        try:
            return tuple(dict.fromkeys(canonical_subject(v) for v in value))
        except InvalidSubjectError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _consistent(self) -> MemoryPolicy:
        both = set(self.include_categories) & set(self.exclude_categories)
        if both:
            raise ValueError(f"categories both included and excluded: {sorted(both)}")
        if self.categories is not None:
            unknown = [c for c in (*self.include_categories, *self.exclude_categories) if c not in self.categories]
            if unknown:
                raise ValueError(f"{unknown} are not among the categories {list(self.categories)}")
        return self

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels a model may assign: the vocabulary, else the included and excluded ones (maybe none)."""
        if self.categories is not None:
            return self.categories
        return tuple(dict.fromkeys((*self.include_categories, *self.exclude_categories)))

    @property
    def empty(self) -> bool:
        """True when the policy says nothing (the stages' prompts are then those of no policy)."""
        return self == MemoryPolicy()

    def admits(self, subject: str, categories: Iterable[str]) -> bool:
        """Whether a memory about ``subject`` labelled ``categories`` may be kept."""
        labels = set(categories)
        if subject in self.exclude_subjects or labels & set(self.exclude_categories):
            return False
        return not self.include_categories or bool(labels & set(self.include_categories))

    def assigned(self, categories: Iterable[str], inherited: Iterable[str] = ()) -> tuple[str, ...]:
        """``categories`` a model assigned, normalised, those outside :attr:`labels` dropped (for answers a
        StageModel did not validate against the narrowed schema); none left: the ``inherited`` ones (a fact's
        observations'), checked the same way."""
        allowed = set(self.labels)
        out: dict[str, None] = {}
        for value in categories:
            try:
                label = category_label(value)
            except ValueError:
                continue
            if label in allowed:
                out[label] = None
        return tuple(out) or (self.assigned(inherited) if inherited else ())

    def overridden_by(self, other: MemoryPolicy | None) -> MemoryPolicy:
        """This policy with the fields ``other`` sets replacing its own (a per-call override)."""
        if other is None:
            return self
        fields = {name: getattr(other, name) for name in other.model_fields_set}
        return MemoryPolicy(**{**{n: getattr(self, n) for n in type(self).model_fields}, **fields})


def policy_of(value: object, what: str = "policy") -> MemoryPolicy | None:
    """``value`` (a MemoryPolicy, a dict of its fields, or None) as a policy; anything else is a ConfigurationError."""
    if value is None or isinstance(value, MemoryPolicy):
        return value
    if isinstance(value, Mapping):
        return MemoryPolicy(**{str(k): v for k, v in value.items()})
    raise ConfigurationError(f"{what} must be a MemoryPolicy, a dict of its fields or None, not {type(value).__name__}")


def policy_fingerprint(policy: MemoryPolicy | None) -> str:
    """What ``policy`` says, as a short stable hash ("" for no policy or an empty one): a digest records the
    policy it was written under, and one written under another is rewritten."""
    if policy is None or policy.empty:
        return ""
    return hashlib.sha256(policy.model_dump_json().encode()).hexdigest()[:16]


def categories_of(values: object) -> tuple[str, ...]:
    """Stored category labels, normalised and deduplicated (a record written before categories has none)."""
    if not isinstance(values, list | tuple):
        return ()
    return tuple(dict.fromkeys(category_label(v) for v in values))
