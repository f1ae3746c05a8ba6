from tiermem import MemoryCapability, MemoryContext


async def test_fact_round_trip(capability: MemoryCapability, ctx: MemoryContext) -> None:
    await capability.add_semantic_fact(ctx, "Moni is allergic to shellfish.", subject="Moni")
    items = await capability.recall(ctx, "shellfish allergy")
    assert [i.subject for i in items] == ["moni"]
