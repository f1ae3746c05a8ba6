"""An agent loop with litellm: the memory block in the system prompt, memory tools offered and
executed, the turn captured afterwards.

Offline by default: litellm's own ``mock_response`` / ``mock_tool_calls`` stand in for the model.
Set ``AGENT_MODEL`` (e.g. ``openai/gpt-4o-mini``, with its API key) to talk to a real one; tiermem's
own pipeline then uses it too.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's bundled price map: no download at import

import litellm

from tiermem import MemoryContext, system

MODEL = os.environ.get("AGENT_MODEL")


async def chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]], offline: dict[str, Any]) -> Any:
    """One model call; ``offline`` is what litellm answers when no real model is configured."""
    extra = {} if MODEL else offline
    response = await litellm.acompletion(
        model=MODEL or "openai/gpt-4o-mini", messages=messages, tools=tools, timeout=30, num_retries=2, **extra
    )
    return response.choices[0].message


async def turn(mem: Any, ctx: MemoryContext, user_text: str, offline: list[dict[str, Any]]) -> str:
    block = await mem.format_context(ctx, user_text)
    tools = mem.tools(ctx)
    messages: list[Any] = [
        {"role": "system", "content": f"You are a helpful assistant.\n{block}"},
        {"role": "user", "content": user_text},
    ]
    for step in offline:  # at most one model call per scripted step
        reply = await chat(messages, tools.schemas(), step)
        messages.append(reply)
        if not reply.tool_calls:
            break
        messages.extend(await tools.execute(reply))  # envelopes {ok, results, error} as tool messages
    # The whole exchange goes in as is: tool calls and tool results are left out of the turn log.
    await mem.capture(ctx, messages[1:])
    return str(messages[-1].content)


async def main() -> None:
    store = tempfile.mkdtemp(prefix="tiermem-agent-")
    mem = system(model=MODEL or "rules", store=store)
    ctx = MemoryContext(user_id="sam", session_id="monday")
    print(await turn(mem, ctx, "My wife Moni is allergic to shellfish.", [{"mock_response": "Noted!"}]))
    await mem.end_session(ctx)
    await mem.consolidate(ctx)

    ctx = ctx.model_copy(update={"session_id": "friday"})
    recall = {"id": "call-1", "type": "function",
              "function": {"name": "memory_recall", "arguments": '{"query": "Moni allergy"}'}}  # fmt: skip
    answer = await turn(
        mem,
        ctx,
        "Can I make paella for Moni tonight?",
        [{"mock_tool_calls": [recall]}, {"mock_response": "Better not: Moni is allergic to shellfish."}],
    )
    print(answer)
    for item in await mem.recall(ctx, "what is Moni allergic to?"):
        print(f"  {item.tier:<9} {item.text}")


if __name__ == "__main__":
    asyncio.run(main())
