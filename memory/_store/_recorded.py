"""The options a store was created with, recorded in it, so every process opening it agrees.

An app that writes a store with relations on, and a ``tiermem worker`` started later with no
options, must consolidate alike. So the first writer records its tier and recall options in the
store's meta table; an option left unset (``None``) takes the recorded value; an explicit option
that differs from the record is used by this process and reported (a WARNING and
``MemoryCapability.option_conflicts``), never written over the record.

A record outlives the models it was written from: a field added since is filled from the model's
default, and a field since removed is dropped, both when an unset option takes the record and when
an explicit one is compared with it. So "differs" means: differs from what an unset option would use.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel

from .._errors import ConfigurationError
from .._options import (
    DigestOptions,
    EpisodicOptions,
    HygieneOptions,
    RecallOptions,
    SemanticOptions,
    WorkingOptions,
    resolve_tier,
)
from ._store import Store

__all__ = ["META_KEY", "ResolvedOptions", "resolve_options"]

log = logging.getLogger(__name__)

META_KEY = "options"
_MODELS: dict[str, type[BaseModel]] = {
    "working": WorkingOptions,
    "episodic": EpisodicOptions,
    "semantic": SemanticOptions,
    "digest": DigestOptions,
    "hygiene": HygieneOptions,
    "recall": RecallOptions,
}
# What an unset option means on a store with no record: every tier on, default recall weights.
_DEFAULTS: dict[str, bool] = {"working": True, "episodic": True, "semantic": True, "digest": True, "hygiene": True,
                              "recall": True}  # fmt: skip

Option = bool | dict[str, object] | BaseModel | None
"""An option as given: True (defaults), False or None (off, or unset), a dict of fields, or the options model."""
T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True, kw_only=True)
class ResolvedOptions:
    """Each option as this process uses it, and the explicit ones that differ from the store's record."""

    values: dict[str, BaseModel | None]
    conflicts: list[str] = field(default_factory=list)

    def option(self, name: str, model: type[T]) -> T | None:
        """The option ``name`` as its model (None: that tier is off)."""
        value = self.values[name]
        if value is not None and not isinstance(value, model):
            raise TypeError(f"option {name!r} is a {type(value).__name__}, not a {model.__name__}")
        return value


def _dump(value: BaseModel | None) -> object:
    return False if value is None else value.model_dump(mode="json")


def _recorded(store: Store) -> dict[str, object]:
    raw = store.meta().get(META_KEY)
    if not raw:
        return {}
    try:
        found = json.loads(raw)
    except ValueError:
        log.warning("store %s: its recorded options are not JSON; ignoring them", store.uri)
        return {}
    return found if isinstance(found, dict) else {}


def _known(value: object, model: type[BaseModel]) -> object:
    """``value`` as recorded, less the fields ``model`` no longer has (at any depth); absent ones take defaults."""
    if not isinstance(value, dict):
        return value
    kept: dict[str, object] = {}
    for name, info in model.model_fields.items():
        if name in value:
            nested = info.annotation
            if isinstance(nested, type) and issubclass(nested, BaseModel):
                kept[name] = _known(value[name], nested)
            else:
                kept[name] = value[name]
    return kept


def _from_record(recorded: object, model: type[BaseModel], name: str) -> BaseModel | None:
    known = _known(recorded, model)
    if known is not None and not isinstance(known, bool | dict):  # a record no version writes
        raise ConfigurationError(f"{name}: the store's record is {type(known).__name__}, not True, False or a dict")
    return resolve_tier(known, model, name)


def _differences(recorded: BaseModel | None, used: BaseModel | None) -> tuple[object, object]:
    """The two sides of a conflict, each as JSON; of two models only the fields that differ."""
    if recorded is None or used is None:
        return _dump(recorded), _dump(used)
    was, now = recorded.model_dump(mode="json"), used.model_dump(mode="json")
    differing = [key for key in now if was.get(key) != now[key]]
    return {key: was.get(key) for key in differing}, {key: now[key] for key in differing}


def resolve_options(store: Store, given: Mapping[str, Option], *, record: bool) -> ResolvedOptions:
    """Resolve ``given`` (None = unset) against the store's record; record them if there is none yet and ``record``."""
    recorded = _recorded(store)
    values: dict[str, BaseModel | None] = {}
    conflicts: list[str] = []
    for name, model in _MODELS.items():
        explicit = given.get(name)
        if explicit is None:
            values[name] = (
                _from_record(recorded[name], model, name)
                if name in recorded
                else resolve_tier(_DEFAULTS[name], model, name)
            )
            continue
        values[name] = resolve_tier(explicit, model, name)
        if name not in recorded:
            continue
        try:
            expected = _from_record(recorded[name], model, name)
        except ConfigurationError:  # a record this version cannot read (a newer tiermem's?): it differs
            was, now = recorded[name], _dump(values[name])
        else:
            if expected == values[name]:
                continue
            was, now = _differences(expected, values[name])
        conflicts.append(
            f"{name}: the store {store.uri!r} was created with {json.dumps(was, sort_keys=True)}, "
            f"this process uses {json.dumps(now, sort_keys=True)}"
        )
    for conflict in conflicts:
        log.warning("option differs from the store's record (used here, not recorded): %s", conflict)
    if not recorded and record:
        store.record_meta(META_KEY, json.dumps({name: _dump(v) for name, v in values.items()}, sort_keys=True))
    return ResolvedOptions(values=values, conflicts=conflicts)
