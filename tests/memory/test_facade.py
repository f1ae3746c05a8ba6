"""The facade's shape: the system holds a read side, the read side holds its components (no
inheritance chain), and no store or embedder call runs on the event loop's thread."""

from __future__ import annotations

import ast
import inspect
import threading
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tiermem import MemoryCapability, MemoryContext, MemoryProvider, MemorySystem, Store, system
from tiermem.jobs import close_idle_sessions, retry_pending, run_consolidation, run_digests, run_janitor
from tiermem.memory._recall._search import Search
from tiermem.memory._relations._relations import Relations
from tiermem.memory._tiers._tiers import Tiers
from tiermem.memory.testing import FrozenClock, HashingEmbedder

# -- composition --------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [MemorySystem, MemoryCapability, Tiers, Relations, Search], ids=lambda c: c.__name__)
def test_no_class_of_the_facade_inherits_another(cls: type) -> None:
    assert cls.__mro__ == (cls, object)


def test_the_system_holds_the_read_side_and_the_read_side_its_components(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock
) -> None:
    mem = system(model="rules", store=store_path, embedder=embedder, clock=clock)
    assert isinstance(mem.capability, MemoryCapability)
    assert isinstance(mem.capability.tiers, Tiers) and mem.tiers is mem.capability.tiers
    assert isinstance(mem.capability.relations, Relations) and mem.relations is mem.capability.relations
    assert mem.capability.relations.tiers is mem.tiers  # one repository: one vector cache, one store
    assert isinstance(mem, MemoryProvider) and isinstance(mem.capability, MemoryProvider)


async def test_a_write_through_the_system_is_read_by_its_capability(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = system(model="rules", store=store_path, embedder=embedder, clock=clock)
    await mem.capture(ctx, [{"role": "user", "content": "I bake rye bread every Sunday."}])
    assert [e.text for e in await mem.capability.working_memory(ctx)] == [e.text for e in await mem.working_memory(ctx)]
    assert await mem.capability.working_memory(ctx)


# -- blocking work off the loop -----------------------------------------------------------------


class ThreadNotingEmbedder:
    """A hashing embedder that notes the thread of every call (the Embedder Protocol is public)."""

    def __init__(self) -> None:
        self._inner = HashingEmbedder(256)
        self.threads: list[threading.Thread] = []

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.threads.append(threading.current_thread())
        return self._inner.embed(texts)


class ThreadNotingStore(Store):
    """The real LanceDB store; every table access (each read and write goes through one) notes its thread.

    Every part of the store opens its tables through the one ``Tables.table`` it shares, so the note is there.
    """

    threads: list[threading.Thread]

    def __init__(self, uri: str, **options: Any) -> None:
        super().__init__(uri, **options)
        table = self._tables.table

        def noting(name: str) -> Any:
            self.threads.append(threading.current_thread())
            return table(name)

        self._tables.table = noting  # type: ignore[method-assign]


async def test_no_store_or_embedder_call_runs_on_the_event_loop(tmp_path: Path, clock: FrozenClock) -> None:
    embedder = ThreadNotingEmbedder()
    store = ThreadNotingStore(str(tmp_path / "store"), embedder_id=embedder.id, dimensions=embedder.dimensions)
    mem = system(
        model="rules", store=store, embedder=embedder, clock=clock, semantic={"relations": True},
        hygiene={"cleanup_older_than": timedelta(0)},
    )  # fmt: skip
    ctx = MemoryContext(user_id="u-1", session_id="s-1")
    loop_thread = threading.current_thread()
    store.threads, embedder.threads = [], []  # opening the store (above) may run anywhere

    await mem.add_alias(ctx, "Caroline")
    await mem.capture(ctx, [{"role": "user", "content": "My wife Moni is allergic to shellfish."}])
    await mem.capture(ctx, [{"role": "user", "content": "I work at Acme Corp as a nurse."}])
    await mem.recall(ctx, "what can Moni not eat?")
    await mem.format_context(ctx, "dinner plans with Moni")
    for tool in mem.tools(ctx):
        await tool.call({"query": "Moni"} if tool.name == "memory_recall" else {"from": "user"})
    await mem.add_semantic_fact(ctx, "The user plays tennis.")
    await mem.facts(ctx)
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    await mem.digest(ctx)
    await mem.connections(ctx, "Moni")
    await mem.retry_pending()
    clock.advance(timedelta(days=2))
    await close_idle_sessions(mem)
    await run_consolidation(mem)
    await run_digests(mem)
    await retry_pending(mem)
    await run_janitor(mem)

    assert store.threads and embedder.threads  # the hooks saw the work
    assert loop_thread not in store.threads
    assert loop_thread not in embedder.threads


def test_every_async_method_of_the_facade_is_a_coroutine_function() -> None:
    """The Blocking facade wraps exactly the coroutine functions; a sync read method would run on the loop."""
    for cls in (MemoryCapability, MemorySystem):
        public = {n: m for n, m in vars(cls).items() if not n.startswith("_") and callable(m)}
        for name in ("recall", "format_context", "facts", "add_semantic_fact", "connections"):
            assert inspect.iscoroutinefunction(public[name]), f"{cls.__name__}.{name}"


# The blocking components: every call on one of them is a store round trip or an embedding.
BLOCKING = {"store", "tiers", "relations", "search", "embedder"}
ASYNC_MODULES = [
    "memory/_write/_system.py",
    "memory/_write/_write_side.py",
    "memory/_write/_pending.py",
    "memory/_read/_create.py",
    "memory/_read/_capability.py",
    "memory/_read/_async_tiers.py",
    "memory/_relations/_relations.py",
    "jobs/_janitor.py",
    "jobs/_pipeline_runs.py",
]
ROOT = Path(__file__).resolve().parents[2]


def _direct_blocking_calls(tree: ast.AST) -> list[str]:
    """``x.tiers.facts(...)``-style calls made in an ``async def`` itself (not handed to run_blocking).

    An ``async with x.store.fenced():`` is an async context manager, awaited like run_blocking: not flagged.
    """
    found: list[str] = []
    awaited = {
        id(item.context_expr) for node in ast.walk(tree) if isinstance(node, ast.AsyncWith) for item in node.items
    }

    def visit(node: ast.AST, in_async: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.AsyncFunctionDef):
                visit(child, True)
            elif isinstance(child, (ast.FunctionDef, ast.Lambda)):
                visit(child, False)  # a plain function runs where it is called: run_blocking's thread
            else:
                if (
                    in_async
                    and isinstance(child, ast.Call)
                    and isinstance(child.func, ast.Attribute)
                    and id(child) not in awaited
                ):
                    owner = child.func.value
                    if isinstance(owner, ast.Attribute) and owner.attr in BLOCKING:
                        found.append(f"line {child.lineno}: {ast.unparse(child.func)}")
                visit(child, in_async)

    visit(tree, False)
    return found


@pytest.mark.parametrize("path", ASYNC_MODULES)
def test_async_code_hands_every_blocking_call_to_run_blocking(path: str) -> None:
    source = (ROOT / path).read_text(encoding="utf-8")
    assert _direct_blocking_calls(ast.parse(source)) == []
    assert "to_thread" not in source  # one idiom: run_blocking


def test_the_static_check_sees_a_blocking_call_on_the_loop() -> None:
    bad = (
        "async def f(mem):\n    return mem.tiers.facts(ctx)\n"
        "async def g(mem):\n    return await run_blocking(mem.tiers.facts, ctx)\n"
    )
    assert _direct_blocking_calls(ast.parse(bad)) == ["line 2: mem.tiers.facts"]
    fenced = "async def h(mem):\n    async with mem.store.fenced():\n        return mem.store.count(t)\n"
    assert _direct_blocking_calls(ast.parse(fenced)) == ["line 3: mem.store.count"]
