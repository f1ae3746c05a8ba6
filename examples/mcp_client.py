"""An MCP host's view: start ``tiermem mcp`` over stdio and call its tools with the official SDK
(needs the ``mcp`` extra). The user is fixed by the server's ``--user-id``; no tool argument can change it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

from tiermem import MemoryContext, create_memory_capability

HOST_CONFIG = json.loads((Path(__file__).with_name("mcp_host.json")).read_text())["mcpServers"]["tiermem"]


async def main() -> None:
    store = tempfile.mkdtemp(prefix="tiermem-mcp-")
    await create_memory_capability(store=store).remember(
        MemoryContext(user_id="alice"), "Alice is allergic to penicillin."
    )
    args = [store if arg == "~/.tiermem/store" else arg for arg in HOST_CONFIG["args"]]  # the host's config, our store
    command = shutil.which(HOST_CONFIG["command"]) or sys.executable
    if command == sys.executable:
        args = ["-m", "tiermem.memory._cli._main", *args]
    server = StdioServerParameters(command=command, args=args, env={**os.environ})
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        print(sorted(tool.name for tool in (await session.list_tools()).tools))
        found = await session.call_tool("recall", {"query": "which medicine must Alice avoid?"})
        print(found.content[0].text)  # type: ignore[union-attr]
        refused = await session.call_tool("recall", {"query": "allergy", "user_id": "bob"})
        assert refused.is_error, "a tool argument must never choose the user"


if __name__ == "__main__":
    asyncio.run(main())
