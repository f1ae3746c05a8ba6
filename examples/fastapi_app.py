"""A FastAPI app: one memory context per request; the turn is journaled before the reply returns and
observed in the background (``capture(..., background=True)``), drained when the app shuts down.

Serve it with ``uvicorn examples.fastapi_app:app`` (``AGENT_MODEL`` picks a real model, ``TIERMEM_STORE``
the store). Run as a script, it drives itself offline through FastAPI's TestClient.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's bundled price map: no download at import

import litellm
from fastapi import BackgroundTasks, FastAPI, Header
from pydantic import BaseModel

from tiermem import MemoryContext, system

MODEL = os.environ.get("AGENT_MODEL")
mem = system(model=MODEL or "rules", store=os.environ.get("TIERMEM_STORE") or tempfile.mkdtemp(prefix="tiermem-api-"))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    await mem.aclose()  # observe what is still queued before the process exits


app = FastAPI(lifespan=lifespan)


class ChatIn(BaseModel):
    session_id: str
    message: str


class ChatOut(BaseModel):
    reply: str
    memory: str


@app.post("/chat")
async def chat(body: ChatIn, x_user_id: str = Header()) -> ChatOut:
    # The user comes from the authenticated request (here a header your auth layer sets), never from the body.
    ctx = MemoryContext(user_id=x_user_id, session_id=body.session_id)
    block = await mem.format_context(ctx, body.message)
    offline = {} if MODEL else {"mock_response": "Got it."}
    response = await litellm.acompletion(
        model=MODEL or "openai/gpt-4o-mini",
        messages=[{"role": "system", "content": block}, {"role": "user", "content": body.message}],
        timeout=30,
        num_retries=2,
        **offline,
    )
    reply = str(response.choices[0].message.content)
    # Durable before the reply returns (one journal write); the observer's model call runs in the background.
    turn = [{"role": "user", "content": body.message}, {"role": "assistant", "content": reply}]
    await mem.capture(ctx, turn, background=True)
    return ChatOut(reply=reply, memory=block)


@app.post("/sessions/{session_id}/end")
async def end_session(session_id: str, background: BackgroundTasks, x_user_id: str = Header()) -> dict[str, str]:
    ctx = MemoryContext(user_id=x_user_id, session_id=session_id)
    background.add_task(mem.end_session, ctx)
    return {"status": "closing"}


if __name__ == "__main__":
    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        sam, kim = {"X-User-Id": "sam"}, {"X-User-Id": "kim"}
        client.post("/chat", json={"session_id": "s1", "message": "I'm vegetarian, no meat."}, headers=sam)
        ask = {"session_id": "s1", "message": "Dinner ideas for a vegetarian?"}
        assert client.portal is not None  # the client runs the app's event loop while the block is open
        client.portal.call(mem.flush)  # a test waits for the observer; a server does not need to
        second = client.post("/chat", json=ask, headers=sam)
        other = client.post("/chat", json={**ask, "session_id": "k1"}, headers=kim)
    print(second.json()["memory"])
    assert "vegetarian" in second.json()["memory"], "sam's first turn should be in the memory block"
    assert "no meat" not in other.json()["memory"], "kim must not see sam's memory"
