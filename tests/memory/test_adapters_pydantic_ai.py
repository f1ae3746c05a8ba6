"""TiermemToolset as Pydantic AI calls it: Agent.run with the library's FunctionModel, no network."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tiermem import HashingEmbedder, InvalidArgumentError, MemoryContext, MemorySystem, TiermemToolset, system


@pytest.fixture
def mem(tmp_path: Path) -> MemorySystem:
    return system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256))


async def test_the_agent_recalls_through_the_toolset_and_the_run_is_captured(mem: MemorySystem) -> None:
    ctx = MemoryContext(user_id="ada", session_id="s-1")
    await mem.remember(ctx, "Ada's sister Lin lives in Osaka.")
    memory = TiermemToolset(mem, ctx)
    seen: list[AgentInfo] = []
    returned: list[object] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        returns = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("memory_recall", {"query": "Lin Osaka"}, tool_call_id="c1")])
        returned.append(returns[0].content)
        return ModelResponse(parts=[TextPart("Lin lives in Osaka.")])

    agent = Agent(FunctionModel(model), toolsets=[memory])  # the toolset brings its instructions
    result = await agent.run("Where does my sister live?")
    assert result.output == "Lin lives in Osaka."

    assert [t.name for t in seen[0].function_tools] == ["memory_recall"]
    assert "Osaka" in (seen[0].instructions or "")  # the block recalled for the prompt reached the model
    envelope = returned[0]
    assert isinstance(envelope, dict) and envelope["ok"]
    assert envelope["results"][0]["text"] == "Ada's sister Lin lives in Osaka."

    captured = await memory.capture(result.new_messages())
    assert len(captured) == 1
    turns = (await mem.stats(ctx)).counts["turns"]
    assert sum(turns.values()) == 1
    observed = await mem.recall(ctx, "Where does my sister live?", tiers=["working"])
    assert [i.text for i in observed] == ["The user asked: Where does the user's sister live?"]


async def test_write_tools_and_errors(mem: MemorySystem) -> None:
    ctx = MemoryContext(user_id="bo")
    toolset = TiermemToolset(mem, ctx, write=True)
    assert set(toolset.tools) == {"memory_recall", "memory_remember", "memory_forget"}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            call = ToolCallPart(
                "memory_remember", {"text": "Bo is learning Welsh.", "subject": "user"}, tool_call_id="r"
            )
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("Saved.")])

    await Agent(FunctionModel(model), toolsets=[toolset]).run("Remember I'm learning Welsh.")
    (welsh,) = await mem.recall(ctx, "Welsh")
    assert welsh.text == "Bo is learning Welsh."
    with pytest.raises(InvalidArgumentError, match="session_id"):
        await toolset.capture([])
