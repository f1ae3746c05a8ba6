"""The blocking facades' protocols are current, and say what the facades do at run time."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from tests.blocking_api import FACADES, Facade, render
from tiermem import Blocking, HashingEmbedder, create_memory_capability, system

IDS = [f.protocol for f in FACADES]


@pytest.mark.parametrize("facade", FACADES, ids=IDS)
def test_the_written_protocol_is_what_the_class_says_now(facade: Facade) -> None:
    """Regenerate with ``python -m tests.blocking_api`` after changing a public method of the class."""
    assert facade.path.read_text() == render(facade), f"{facade.path.name} is stale: run python -m tests.blocking_api"


def _target(facade: Facade, store: Path) -> object:
    if facade.protocol == "BlockingMemorySystem":
        return system(model="rules", store=str(store), embedder=HashingEmbedder(32))
    return create_memory_capability(store=str(store), embedder=HashingEmbedder(32))


def _protocol(facade: Facade) -> type:
    module = __import__(facade.module, fromlist=[facade.protocol])
    protocol: type = getattr(module, facade.protocol)
    return protocol


@pytest.mark.parametrize("facade", FACADES, ids=IDS)
def test_every_public_member_of_the_class_is_in_the_protocol(facade: Facade) -> None:
    public = {name for name in dir(facade.cls) if not name.startswith("_")}
    assert public - set(dir(_protocol(facade))) == set()  # its own or inherited from the facade it extends


@pytest.mark.parametrize("facade", FACADES, ids=IDS)
def test_the_facade_answers_each_method_with_the_protocols_parameters(facade: Facade, tmp_path: Path) -> None:
    target = _target(facade, tmp_path / "store")
    wrapped = Blocking(target)
    protocol = _protocol(facade)
    methods = {n: m for n, m in inspect.getmembers(protocol, inspect.isfunction) if not n.startswith("_")}
    assert len(methods) > 20
    for name, declared in methods.items():
        runtime = inspect.signature(getattr(wrapped, name))
        expected = list(inspect.signature(declared).parameters.values())[1:]  # without self
        assert [(p.name, p.kind, p.default) for p in runtime.parameters.values()] == [
            (p.name, p.kind, p.default) for p in expected
        ], name
    if facade.protocol == "BlockingMemorySystem":
        wrapped.aclose()
