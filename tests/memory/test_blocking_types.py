"""The sync facade's protocols list every public async method with its parameters and result, so they cannot drift."""

from __future__ import annotations

import inspect

import pytest

from tiermem import MemoryCapability, MemorySystem
from tiermem.memory._read import BlockingCapability
from tiermem.memory._write import BlockingMemorySystem

# Plain methods a protocol adds on purpose (the facade wraps what they return), besides the async twins.
PLAIN = {"tools"}
PAIRS = [(MemoryCapability, BlockingCapability), (MemorySystem, BlockingMemorySystem)]
IDS = ["capability", "system"]


def async_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(getattr(cls, name))
        for name in dir(cls)
        if not name.startswith("_") and inspect.iscoroutinefunction(getattr(cls, name))
    }


def protocol_methods(protocol: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(getattr(protocol, name))
        for name in dir(protocol)
        if not name.startswith("_") and callable(getattr(protocol, name)) and name not in PLAIN
    }


@pytest.mark.parametrize(("cls", "protocol"), PAIRS, ids=IDS)
def test_the_protocol_lists_every_public_async_method(cls: type, protocol: type) -> None:
    assert sorted(protocol_methods(protocol)) == sorted(async_methods(cls))


@pytest.mark.parametrize(("cls", "protocol"), PAIRS, ids=IDS)
def test_each_sync_twin_has_its_async_methods_parameters_and_result(cls: type, protocol: type) -> None:
    declared = protocol_methods(protocol)
    for name, signature in async_methods(cls).items():
        assert declared[name] == signature, name  # parameters, defaults, annotations, result


@pytest.mark.parametrize(("cls", "protocol"), PAIRS, ids=IDS)
def test_plain_methods_keep_their_parameters(cls: type, protocol: type) -> None:
    for name in PLAIN:
        assert inspect.signature(getattr(protocol, name)).parameters == inspect.signature(getattr(cls, name)).parameters
