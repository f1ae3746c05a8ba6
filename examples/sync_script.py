"""The same memory from a plain script: ``blocking()`` gives every async method a sync twin."""

from __future__ import annotations

import tempfile

from tiermem import MemoryContext, system

mem = system(model="rules", store=tempfile.mkdtemp(prefix="tiermem-sync-")).blocking()
ctx = MemoryContext(user_id="sam", session_id="s1")

mem.add_alias(ctx, "Sam")
mem.capture(ctx, [{"role": "user", "content": "I'm Sam and I work at Acme Corp as a data engineer."}])
mem.capture(ctx, [{"role": "user", "content": "I work at Globex now."}])
mem.end_session(ctx)
mem.consolidate(ctx)
mem.digest(ctx)

for item in mem.recall(ctx, "Where does Sam work?"):
    print(f"{item.tier:<9} {item.score:5.2f}  {item.text}")
print(mem.tools(ctx).get("memory_recall").call({"query": "employer"}))
