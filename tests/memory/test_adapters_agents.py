"""TiermemSession as the OpenAI Agents SDK calls it: Runner.run with the SDK's own scripted model, no network."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.memory import Session
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from tiermem import HashingEmbedder, InvalidArgumentError, MemoryContext, MemorySystem, TiermemSession, system


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # the SDK would export traces to OpenAI
    yield
    set_tracing_disabled(False)


@pytest.fixture
def mem(tmp_path: Path) -> MemorySystem:
    return system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256))


def _step(*output: object) -> ModelStep:
    return ModelStep(output=list(output))  # type: ignore[arg-type]


def test_it_is_a_session_by_the_sdks_protocol(mem: MemorySystem) -> None:
    assert isinstance(TiermemSession(mem, MemoryContext(user_id="u", session_id="s")), Session)
    with pytest.raises(InvalidArgumentError, match="session_id"):
        TiermemSession(mem, MemoryContext(user_id="u"))


async def test_runs_are_replayed_and_captured_as_turns(mem: MemorySystem) -> None:
    ctx = MemoryContext(user_id="ada", session_id="chat-1")
    session = TiermemSession(mem, ctx)
    model = ScriptedModel([_step(assistant_message("Noted.")), _step(assistant_message("Shellfish, for Moni."))])
    agent = Agent(name="helper", model=model, instructions=session.instructions("You are helpful."))

    first = await Runner.run(agent, "My wife Moni is allergic to shellfish.", session=session)
    assert first.final_output == "Noted."
    second = await Runner.run(agent, "What must Moni avoid?", session=session)
    assert second.final_output == "Shellfish, for Moni."

    # the SDK replayed the first turn from the session
    replayed = json.dumps(model.calls[1].input)
    assert "allergic to shellfish" in replayed and "Noted." in replayed
    # the memory block recalled for the new message reached the model below the agent's prompt (the SDK
    # saves the new input before it renders the instructions, so the block is for this message)
    assert "<memory>" in (model.calls[0].system_instructions or "")
    instructions = model.calls[1].system_instructions or ""
    assert instructions.startswith("You are helpful.") and "<memory>" in instructions
    assert "shellfish" in instructions.split("<memory>")[1]

    turns = (await mem.stats(ctx)).counts["turns"]
    assert sum(turns.values()) == 2  # two turns, each the user's message and the answer
    found = await mem.recall(ctx, "Moni shellfish")
    assert any("shellfish" in i.text for i in found)
    assert len(await session.get_items()) == 4
    (latest,) = await session.get_items(limit=1)
    assert "Shellfish, for Moni." in json.dumps(latest)


async def test_the_agent_calls_memory_recall(mem: MemorySystem) -> None:
    ctx = MemoryContext(user_id="bo", session_id="chat-1")
    await mem.remember(ctx, "Bo's passport expires in June.")
    session = TiermemSession(mem, ctx)
    model = ScriptedModel(
        [
            _step(function_call("memory_recall", {"query": "passport"}, call_id="c1")),
            _step(assistant_message("It expires in June.")),
        ]
    )
    agent = Agent(name="helper", model=model, tools=session.tools())
    result = await Runner.run(agent, "When does my passport expire?", session=session)
    assert result.final_output == "It expires in June."
    outputs = [i for i in await session.get_items() if i.get("type") == "function_call_output"]
    envelope = json.loads(str(outputs[0]["output"]))  # type: ignore[typeddict-item]
    assert envelope["ok"] and envelope["results"][0]["text"] == "Bo's passport expires in June."
    assert {t.name for t in session.tools(write=True)} >= {"memory_recall", "memory_remember", "memory_forget"}


async def test_pop_and_clear(mem: MemorySystem) -> None:
    ctx = MemoryContext(user_id="cy", session_id="chat-1")
    session = TiermemSession(mem, ctx)
    await session.add_items([{"role": "user", "content": "I moved to Porto."}])
    popped = await session.pop_item()
    assert popped == {"role": "user", "content": "I moved to Porto."}
    assert await session.pop_item() is None
    await session.add_items([{"role": "user", "content": "I live in Lisbon."}])
    assert sum((await mem.stats(ctx)).counts["turns"].values()) == 0  # no answer yet: not a turn
    await session.clear_session()  # what is pending is captured, then the session ends
    assert await session.get_items() == []
    assert sum((await mem.stats(ctx)).counts["turns"].values()) == 1
    assert (await mem.stats(ctx)).counts["episodic"]
    found = await mem.recall(ctx, "Lisbon")
    assert found and all("Porto" not in i.text for i in found)
