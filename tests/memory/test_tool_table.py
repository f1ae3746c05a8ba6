"""The one tool table (``tiermem.memory._tools.TOOLS``): every tool name anywhere comes from it.

The capability's and the system's ``tools()``, the presets and the MCP server's tool list all read the
table; an entry's read/write flag decides whether the read side offers it, its option whether it is
offered at all, and its ``destructive`` flag the MCP annotation.
"""

from __future__ import annotations

import dataclasses

import pytest
from mcp import Client
from pydantic import BaseModel

from tiermem import (
    MEMORY_CAPABILITY_PRESETS,
    CapabilityPreset,
    ConfigurationError,
    HashingEmbedder,
    MemoryContext,
    MemorySystem,
    create_memory_capability,
    system,
)
from tiermem.memory._cli._mcp import McpConfig, build_server
from tiermem.memory._tools import TOOL_NAME, TOOLS, ToolSpec, tool_spec
from tiermem.memory.testing import FrozenClock

READ = [spec.name for spec in TOOLS if spec.access == "read"]


def _everything_on(store_path: str, clock: FrozenClock) -> MemorySystem:
    return system(
        model="rules", store=store_path, embedder=HashingEmbedder(64), clock=clock, semantic={"relations": True}
    )


def test_the_table_has_each_tool_once_under_valid_names() -> None:
    assert [spec.name for spec in TOOLS] == ["memory_recall", "memory_connect", "memory_remember", "memory_forget"]
    for names in ([s.name for s in TOOLS], [s.mcp_name for s in TOOLS]):
        assert len(set(names)) == len(names)
        assert all(TOOL_NAME.match(name) for name in names)
    assert all(spec.arguments.model_config.get("extra") == "forbid" for spec in TOOLS)
    assert [tool_spec(spec.mcp_name) for spec in TOOLS] == list(TOOLS)


@pytest.mark.parametrize("preset", sorted(MEMORY_CAPABILITY_PRESETS), ids=sorted(MEMORY_CAPABILITY_PRESETS))
def test_every_preset_names_read_tools_of_the_table(preset: str) -> None:
    assert set(MEMORY_CAPABILITY_PRESETS[preset].tools) <= set(READ)


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (("memory_remember",), "read tools only"),
        (("memory_recall", "memory_forget"), "'memory_forget'"),
        (("memory_delete_everything",), "'memory_delete_everything'"),
        (("recall",), "'recall'"),  # the MCP name is the server's, not a preset's
        ("memory_recall", "not the string"),
    ],
    ids=["write-tool", "write-among-read", "unknown", "mcp-name", "a-string"],
)
def test_a_preset_naming_anything_but_a_read_tool_of_the_table_is_refused(tools: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        CapabilityPreset(tools=tools, sections=())


@pytest.mark.parametrize("spec", TOOLS, ids=[s.name for s in TOOLS])
def test_the_read_write_flag_decides_who_offers_a_tool(
    store_path: str, clock: FrozenClock, ctx: MemoryContext, spec: ToolSpec[BaseModel]
) -> None:
    mem = _everything_on(store_path, clock)
    read_side = [t.name for t in mem.capability.tools(ctx)]
    write_side = mem.tools(ctx, write=True)

    assert (spec.name in read_side) is (spec.access == "read")
    assert (spec.name in [t.name for t in mem.tools(ctx)]) is (spec.access == "read")
    tool = write_side.get(spec.name)  # with everything on and writes asked for, every entry is offered
    assert tool is not None
    assert (tool.description, tool.arguments) == (spec.description, spec.arguments)


def test_a_flipped_flag_moves_the_tool_to_the_write_side(
    store_path: str, clock: FrozenClock, ctx: MemoryContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    flipped = tuple(dataclasses.replace(s, access="write") if s.name == "memory_connect" else s for s in TOOLS)
    monkeypatch.setattr("tiermem.memory._tools.TOOLS", flipped)
    mem = _everything_on(store_path, clock)
    assert [t.name for t in mem.tools(ctx)] == ["memory_recall"]
    assert [t.name for t in mem.tools(ctx, write=True)] == [
        "memory_recall",
        "memory_connect",
        "memory_remember",
        "memory_forget",
    ]


@pytest.mark.parametrize(
    ("semantic", "offered"),
    [
        ({"relations": True}, ["memory_recall", "memory_connect", "memory_remember", "memory_forget"]),
        (True, ["memory_recall", "memory_remember", "memory_forget"]),
        (False, ["memory_recall", "memory_forget"]),
    ],
    ids=["relations", "semantic", "no-semantic"],
)
def test_an_entrys_option_decides_whether_it_is_offered(
    store_path: str, clock: FrozenClock, ctx: MemoryContext, semantic: bool | dict[str, bool], offered: list[str]
) -> None:
    mem = system(model="rules", store=store_path, embedder=HashingEmbedder(64), clock=clock, semantic=semantic)
    on = mem.capability.tool_options
    assert [t.name for t in mem.tools(ctx, write=True)] == offered
    assert offered == [s.name for s in TOOLS if s.option is None or s.option in on]


def test_a_capability_offers_exactly_its_presets_read_tools(store_path: str, ctx: MemoryContext) -> None:
    for name, preset in MEMORY_CAPABILITY_PRESETS.items():
        cap = create_memory_capability(
            store=f"{store_path}-{name}", embedder=HashingEmbedder(64), preset=name, semantic={"relations": True}
        )
        assert [t.name for t in cap.tools(ctx)] == [s for s in READ if s in preset.tools], name


@pytest.mark.parametrize("writes", [False, True], ids=["read-only", "writes"])
async def test_the_mcp_server_lists_and_dispatches_the_table(
    store_path: str, clock: FrozenClock, ctx: MemoryContext, writes: bool
) -> None:
    mem = _everything_on(store_path, clock)
    config = McpConfig(store=store_path, user_id=ctx.user_id, relations=True, allow_writes=writes)
    async with Client(build_server(config, capability=mem.capability, forget=mem.forget)) as client:
        listed = (await client.list_tools()).tools
        by_mcp_name = await client.call_tool("recall", {"query": "tennis"})
        by_model_name = await client.call_tool("memory_recall", {"query": "tennis"})

    served = [s for s in TOOLS if writes or s.access == "read"]
    assert [t.name for t in listed] == [s.mcp_name for s in served]
    in_process = mem.tools(ctx, write=True)
    for tool, spec in zip(listed, served, strict=True):
        assert tool.description == spec.description
        bound = in_process.get(spec.name)
        assert bound is not None and tool.input_schema == bound.parameters
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (spec.access == "read")
        assert tool.annotations.destructive_hint is spec.destructive
    assert by_mcp_name.is_error is False
    assert by_model_name.is_error is True
