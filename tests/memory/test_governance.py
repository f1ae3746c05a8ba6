"""Governing a user's memory: list, get, history, subjects, stats; update, pin, unpin, forget.

Real LanceDB in a temporary folder, the offline rules model, a frozen clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from tests.fakes import StageReply, stage_model
from tiermem import (
    Episode,
    Fact,
    InvalidArgumentError,
    InvalidSubjectError,
    MemoryContext,
    MemoryNotFoundError,
    MemorySystem,
    TiermemError,
    create_memory_capability,
    system,
)
from tiermem.jobs import run_janitor
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, StageCall
from tiermem.prompts import Stage, compact, consolidate, encode_consolidate, observe

pytestmark = pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")

MONI = "My wife Moni is allergic to shellfish, so we never order paella."
ACME = "I work at Acme Corp as a data engineer."
OTHER = MemoryContext(user_id="u-2", session_id="s-1")


def make(store_path: str, clock: FrozenClock, embedder: HashingEmbedder, **options: Any) -> MemorySystem:
    options.setdefault("semantic", {"relations": True})
    return system(model="rules", store=store_path, embedder=embedder, clock=clock, **options)


@pytest.fixture
def mem(store_path: str, clock: FrozenClock, embedder: HashingEmbedder) -> MemorySystem:
    return make(store_path, clock, embedder)


async def converse(mem: MemorySystem, ctx: MemoryContext, *texts: str) -> None:
    """Capture one turn per text, close the session, consolidate and digest."""
    await mem.add_alias(ctx, "Caroline")
    for text in texts:
        await mem.capture(ctx, [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    await mem.digest(ctx)


async def fact_about(mem: MemorySystem, ctx: MemoryContext, word: str) -> Fact:
    return next(f for f in await mem.facts(ctx) if word in f.text.lower())


async def every_record(mem: MemorySystem, ctx: MemoryContext) -> list[Any]:
    items: list[Any] = []
    cursor = None
    while True:
        page = await mem.list(ctx, limit=100, cursor=cursor)
        items += page.items
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor


# -- list -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 3, 7, 50], ids=["one", "three", "seven", "all"])
async def test_list_pages_in_a_stable_order_without_gaps_or_repeats(
    mem: MemorySystem, ctx: MemoryContext, clock: FrozenClock, limit: int
) -> None:
    added = []
    for i in range(7):
        added.append(await mem.add_semantic_fact(ctx, f"The user owns bicycle number {i}."))
        if i % 3 == 0:
            clock.advance(minutes=1)  # some share a timestamp: the id breaks the tie
    await mem.add_semantic_fact(OTHER, "The other user owns a boat.")

    seen: list[str] = []
    cursor = None
    while True:
        page = await mem.list(ctx, tier="semantic", limit=limit, cursor=cursor)
        assert len(page.items) <= limit
        seen += [i.id for i in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor

    assert seen == [f.id for f in sorted(added, key=lambda f: (f.created_at, f.id))]


@pytest.mark.parametrize("limit", [1, 3, 7, 50], ids=["one", "three", "seven", "all"])
async def test_list_pages_back_to_the_same_pages_and_says_where_each_stands(
    mem: MemorySystem, ctx: MemoryContext, clock: FrozenClock, limit: int
) -> None:
    for i in range(7):
        await mem.add_semantic_fact(ctx, f"The user owns bicycle number {i}.")
        if i % 3 == 0:
            clock.advance(minutes=1)
    forward = [await mem.list(ctx, tier="semantic", limit=limit)]
    while forward[-1].next_cursor is not None:
        forward.append(await mem.list(ctx, tier="semantic", limit=limit, cursor=forward[-1].next_cursor))
    assert [(p.total, p.offset) for p in forward] == [(7, n) for n in range(0, 7, limit)]
    assert forward[0].prev_cursor is None and all(p.prev_cursor for p in forward[1:])
    back = [forward[-1]]
    while back[-1].prev_cursor is not None:
        back.append(await mem.list(ctx, tier="semantic", limit=limit, cursor=back[-1].prev_cursor))
    assert [p.items for p in reversed(back)] == [p.items for p in forward]
    assert [p.offset for p in reversed(back)] == [p.offset for p in forward]


async def test_list_pages_back_to_a_full_first_page_after_a_memory_is_removed(
    mem: MemorySystem, ctx: MemoryContext
) -> None:
    for i in range(5):
        await mem.add_semantic_fact(ctx, f"The user owns bicycle number {i}.")
    first = await mem.list(ctx, tier="semantic", limit=2)
    second = await mem.list(ctx, tier="semantic", limit=2, cursor=first.next_cursor)
    await mem.forget(ctx, first.items[0].id)
    again = await mem.list(ctx, tier="semantic", limit=2, cursor=second.prev_cursor)
    assert [i.id for i in again.items] == [first.items[1].id, second.items[0].id]
    assert (again.offset, again.total, again.prev_cursor) == (0, 4, None)


async def test_list_filters_by_tier_subject_and_status(mem: MemorySystem, ctx: MemoryContext) -> None:
    await converse(mem, ctx, MONI, ACME)
    old = await fact_about(mem, ctx, "acme")
    await mem.update(ctx, old.id, text="The user works at Initech as a data engineer.")

    semantic = await mem.list(ctx, tier="semantic")
    moni = await mem.list(ctx, subject="Moni")
    superseded = await mem.list(ctx, tier="semantic", status="superseded")
    tiers = await mem.list(ctx, tier=["working", "relation"])

    assert {i.tier for i in semantic.items} == {"semantic"} and len(semantic.items) == 3
    assert {i.tier for i in moni.items} == {"working", "episodic", "semantic", "relation"}
    assert all(i.subject == "moni" for i in moni.items if i.tier in ("working", "semantic"))
    assert [i.text for i in moni.items if i.tier == "relation"] == ["user --married to--> moni"]  # either end
    assert [i.id for i in superseded.items] == [old.id]
    assert {i.tier for i in tiers.items} == {"working", "relation"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"limit": 0},
        {"limit": 1001},
        {"tier": "nope"},
        {"cursor": "not-a-cursor"},
        {"subject": "Not A Subject!"},
        {"cursor": "WyIyMDI2LTAxLTAxVDAwOjAwOjAwKzAwOjAwIiwgImZhY3RfeCIsICJzaWRld2F5cyJd"},
    ],
    ids=["limit-zero", "limit-too-big", "unknown-tier", "bad-cursor", "bad-subject", "unknown-direction"],
)
async def test_list_refuses_bad_arguments(mem: MemorySystem, ctx: MemoryContext, kwargs: dict[str, Any]) -> None:
    with pytest.raises((InvalidArgumentError, InvalidSubjectError)):
        await mem.list(ctx, **kwargs)


# -- get, subjects, stats -------------------------------------------------------------------------


async def test_get_finds_own_memories_and_not_another_users(mem: MemorySystem, ctx: MemoryContext) -> None:
    fact = await mem.add_semantic_fact(ctx, "The user likes rye bread.")
    theirs = await mem.add_semantic_fact(OTHER, "The other user likes rye bread.")

    item = await mem.get(ctx, fact.id)

    assert (item.id, item.tier, item.text) == (fact.id, "semantic", fact.text)
    with pytest.raises(MemoryNotFoundError):
        await mem.get(ctx, theirs.id)
    with pytest.raises(MemoryNotFoundError):
        await mem.get(ctx, "fact_' OR '1'='1")


async def test_subjects_and_stats_describe_the_user(mem: MemorySystem, ctx: MemoryContext) -> None:
    await converse(mem, ctx, MONI, ACME)
    await mem.capture(ctx.model_copy(update={"session_id": "s-2"}), [{"role": "user", "content": "Hello again."}])

    subjects = await mem.subjects(ctx)
    stats = await mem.stats(ctx)

    assert {"user", "moni"} <= set(subjects)
    assert stats.counts["semantic"] == {"active": 2}
    assert stats.counts["relation"] == {"active": 1}
    assert stats.counts["digest"] == {"active": 1}
    assert stats.counts["turns"] == {"observed": 3}
    assert stats.counts["aliases"] == {"active": 1}
    assert stats.pending == {"turns": 0, "turns_parked": 0, "episodes": 0, "episodes_failed": 0, "episodes_parked": 0}
    assert stats.bytes_on_disk is not None and stats.bytes_on_disk > 0


# -- update and history ---------------------------------------------------------------------------


async def test_a_corrected_fact_shows_its_history(mem: MemorySystem, ctx: MemoryContext, clock: FrozenClock) -> None:
    await converse(mem, ctx, ACME)
    old = await fact_about(mem, ctx, "acme")
    clock.advance(days=3)

    new = await mem.update(ctx, old.id, text="The user works at Initech as a data engineer.")
    history = await mem.history(ctx, new.id)

    assert [v.item.id for v in history] == [old.id, new.id]
    first, second = history
    assert (first.status, first.superseded_by, first.valid_to) == ("superseded", new.id, clock.now())
    assert (second.status, second.valid_from, second.supersedes) == ("active", clock.now(), (old.id,))
    assert first.item.text == old.text  # the old version keeps its text
    assert [t.text for t in first.turns] and "Acme" in first.turns[0].text  # the captured turn behind it
    assert second.turns == first.turns  # the correction keeps the evidence and names the old version
    assert old.id in new.provenance
    assert await mem.history(ctx, old.id) == history
    assert [f.id for f in await mem.facts(ctx)] == [new.id]


async def test_update_changes_the_subject(mem: MemorySystem, ctx: MemoryContext) -> None:
    await mem.add_alias(ctx, "Moni", "moni")
    old = await mem.add_semantic_fact(ctx, "She is allergic to shellfish.", subject="user")

    new = await mem.update(ctx, old.id, subject="Moni")

    assert (new.subject, new.text) == ("moni", old.text)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, InvalidArgumentError),
        ({"text": "   "}, InvalidArgumentError),
        ({"text": "x" * 9000}, InvalidArgumentError),
        ({"subject": "Not A Subject!"}, InvalidSubjectError),
    ],
    ids=["nothing", "blank-text", "too-long", "bad-subject"],
)
async def test_update_refuses_bad_input_and_writes_nothing(
    mem: MemorySystem, ctx: MemoryContext, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    fact = await mem.add_semantic_fact(ctx, "The user likes rye bread.")
    before = await mem.facts(ctx, include_inactive=True)

    with pytest.raises(error):
        await mem.update(ctx, fact.id, **kwargs)

    assert await mem.facts(ctx, include_inactive=True) == before


async def test_update_refuses_another_users_fact_and_an_old_version(mem: MemorySystem, ctx: MemoryContext) -> None:
    theirs = await mem.add_semantic_fact(OTHER, "The other user likes rye bread.")
    mine = await mem.add_semantic_fact(ctx, "The user likes rye bread.")
    await mem.update(ctx, mine.id, text="The user likes spelt bread.")

    with pytest.raises(MemoryNotFoundError):
        await mem.update(OTHER.model_copy(update={"user_id": "u-3"}), theirs.id, text="Hijacked.")
    with pytest.raises(InvalidArgumentError, match="superseded"):
        await mem.update(ctx, mine.id, text="The user likes wheat bread.")
    assert [f.text for f in await mem.facts(OTHER)] == [theirs.text]


# -- pin ------------------------------------------------------------------------------------------


async def test_a_pinned_fact_survives_ten_years_of_janitor_runs(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    mem = make(store_path, clock, embedder, semantic={"half_life": timedelta(days=30)})
    allergy = await mem.add_semantic_fact(ctx, "Moni is allergic to shellfish.", subject="moni")
    hobby = await mem.add_semantic_fact(ctx, "The user collects stamps.")
    pinned = await mem.pin(ctx, allergy.id)

    for _ in range(10):
        await run_janitor(mem, clock.advance(days=365))

    facts = {f.id: f for f in await mem.facts(ctx, include_inactive=True)}
    recalled = {i.id: i for i in await mem.recall(ctx, "shellfish allergy")}
    assert pinned.pinned
    assert (facts[allergy.id].status, facts[hobby.id].status) == ("active", "archived")
    assert recalled[allergy.id].confidence == pytest.approx(allergy.confidence)  # no decay at all

    await mem.unpin(ctx, allergy.id)
    await run_janitor(mem, clock.advance(days=1))
    assert {f.id: f.status for f in await mem.facts(ctx, include_inactive=True)}[allergy.id] == "archived"


async def test_a_pinned_fact_is_never_compacted_away(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    shown: list[str] = []
    facts: dict[str, Fact] = {}

    def reply(messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
        inputs: compact.Input = call.inputs
        shown.extend(f.id for f in inputs.facts)
        merge = {"source_ids": [facts["pinned"].id, facts["twin"].id], "text": "Moni cannot eat any shellfish."}
        return compact.Output.model_validate({"merges": [merge]}).model_dump()

    model = FunctionModel(reply)
    mem = system(
        model=model.model, store=store_path, embedder=embedder, clock=clock, semantic={"max_facts": 10},
        num_retries=0, validation_retries=0,
    )  # fmt: skip
    facts["pinned"] = await mem.add_semantic_fact(ctx, "Moni is allergic to shellfish.", subject="moni")
    facts["twin"] = await mem.add_semantic_fact(ctx, "Moni cannot eat shrimp.", subject="moni")
    for hobby in ("violin", "piano", "cello", "flute", "harp", "drums", "oboe", "viola", "tuba"):
        await mem.add_semantic_fact(ctx, f"Moni plays the {hobby}.", subject="moni")  # 11 facts, cap 10
    await mem.pin(ctx, facts["pinned"].id)

    report = await run_janitor(mem, clock.advance(hours=1))

    stored = {f.id: f.status for f in await mem.facts(ctx, include_inactive=True)}
    assert shown and facts["pinned"].id not in shown  # never offered to the model
    assert report.compaction_refused == 1  # and a merge naming it anyway is refused
    assert stored[facts["pinned"].id] == "active"


async def test_a_pin_outlives_an_update_by_the_consolidator(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    def consolidator(messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> dict[str, Any]:
        shown = [f.id for f in call.inputs.existing if "shellfish" in f.text]
        update = {"op": "update", "subject": "moni", "target_id": shown[0] if shown else None}
        return {"operations": [{**update, "text": "Moni is allergic to shellfish and peanuts."}], "edges": []}

    said = {"subject": "moni", "kind": "fact", "text": "Moni is allergic to peanuts too.", "salience": 0.9}
    # either path's call
    replies: dict[Stage[Any, Any], StageReply] = {
        consolidate.STAGE: consolidator,
        encode_consolidate.STAGE: consolidator,
    }
    model = stage_model({observe.STAGE: {"observations": [said]}, **replies})
    mem = system(model=model.model, store=store_path, embedder=embedder, clock=clock)
    allergy = await mem.add_semantic_fact(ctx, "Moni is allergic to shellfish.", subject="moni")
    await mem.pin(ctx, allergy.id)
    await mem.capture(ctx, [{"role": "user", "content": "Moni is allergic to peanuts too."}])
    await mem.end_session(ctx)

    await mem.consolidate(ctx)

    (current,) = await mem.facts(ctx)
    assert "peanuts" in current.text and current.pinned
    assert [v.item.id for v in await mem.history(ctx, current.id)] == [allergy.id, current.id]


async def test_pinning_revives_an_archived_fact_and_keeps_an_episode_past_its_ttl(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    mem = make(
        store_path, clock, embedder, episodic={"ttl": timedelta(days=30)}, semantic={"half_life": timedelta(days=10)}
    )
    fact = await mem.add_semantic_fact(ctx, "The user collects stamps.")
    await mem.capture(ctx, [{"role": "user", "content": "We went hiking in the Alps."}])
    episode = (await mem.end_session(ctx)).episode
    assert episode is not None
    await mem.consolidate(ctx)
    await mem.pin(ctx, episode.id)
    await run_janitor(mem, clock.advance(days=365))

    revived = await mem.pin(ctx, fact.id)

    assert (revived.status, revived.pinned) == ("active", True)
    kept = await mem.get(ctx, episode.id)
    assert kept.tier == "episodic"


async def test_pin_refuses_what_cannot_be_pinned(mem: MemorySystem, ctx: MemoryContext) -> None:
    old = await mem.add_semantic_fact(ctx, "The user likes rye bread.")
    await mem.update(ctx, old.id, text="The user likes spelt bread.")
    entry = await mem.add_working_memory(ctx, "The user is cooking tonight.")

    with pytest.raises(InvalidArgumentError, match="superseded"):
        await mem.pin(ctx, old.id)
    with pytest.raises(MemoryNotFoundError):
        await mem.pin(OTHER, old.id)
    with pytest.raises(InvalidArgumentError, match=r"is a working-memory entry .*: only facts and episodes can be"):
        await mem.pin(ctx, entry.id)  # only facts and episodes outlive a session: nothing else to pin
    said = await mem.capture(ctx.model_copy(update={"session_id": "s-pin"}), [{"role": "user", "content": "Hi."}])
    with pytest.raises(InvalidArgumentError, match=r"is a captured turn .*: only facts and episodes can be pinned"):
        await mem.unpin(ctx, said.turn.id)
    with pytest.raises(MemoryNotFoundError):
        await mem.pin(OTHER, said.turn.id)


# -- forget ---------------------------------------------------------------------------------------


async def test_a_forgotten_fact_is_gone_from_recall_edges_and_the_rewritten_digest(
    mem: MemorySystem, ctx: MemoryContext
) -> None:
    await converse(mem, ctx, MONI, ACME)
    allergy = await fact_about(mem, ctx, "shellfish")
    digest_before = await mem.latest_digest(ctx)
    assert digest_before is not None and "shellfish" in digest_before.text
    assert await mem.connections(ctx, "moni")
    turns_before = (await mem.stats(ctx)).counts["turns"]

    report = await mem.forget(ctx, allergy.id)

    digest = await mem.latest_digest(ctx)
    assert report.forgotten == (allergy.id,) and report.digest_rewritten
    assert allergy.id not in {i.id for i in await mem.recall(ctx, "What is Moni allergic to?", tiers=["semantic"])}
    assert await mem.connections(ctx, "moni") == []  # the marriage edge stood on that fact alone
    assert digest is not None and "shellfish" not in digest.text and "Acme" in digest.text
    assert allergy.id not in digest.provenance
    assert (await mem.stats(ctx)).counts["turns"] == turns_before  # the turns stay
    with pytest.raises(MemoryNotFoundError):
        await mem.get(ctx, allergy.id)


async def test_forget_with_turns_leaves_no_dangling_provenance(mem: MemorySystem, ctx: MemoryContext) -> None:
    await converse(mem, ctx, MONI, ACME)
    allergy = await fact_about(mem, ctx, "shellfish")
    await mem.update(ctx, allergy.id, text="Moni is allergic to shellfish and peanuts.")
    current = await fact_about(mem, ctx, "peanuts")

    report = await mem.forget(ctx, current.id, include_turns=True)

    assert set(report.forgotten) == {allergy.id, current.id}  # the older version goes with it
    assert report.turns_removed and set(report.turns_removed) <= set(allergy.provenance)
    remaining = await every_record(mem, ctx)
    ids = {i.id for i in remaining}
    turn_ids = {t.id for i in remaining for t in (await mem.history(ctx, i.id))[-1].turns}
    removed = set(report.forgotten) | set(report.turns_removed) | set(report.edges_removed)
    assert not removed & ids
    assert not removed & turn_ids
    assert all(not set(i.provenance) & removed for i in remaining)
    assert all(i.metadata.get("superseded_by") not in removed for i in remaining)


async def test_forget_a_display_name(mem: MemorySystem, ctx: MemoryContext) -> None:
    alias = await mem.add_alias(ctx, "Caroline")

    report = await mem.forget(ctx, alias.id)

    assert report.forgotten == (alias.id,)
    assert await mem.aliases(ctx) == {}
    with pytest.raises(MemoryNotFoundError):
        await mem.get(ctx, alias.id)  # not a memory item: only forget reaches a display name


async def test_forget_refuses_another_users_memory_and_writes_nothing(mem: MemorySystem, ctx: MemoryContext) -> None:
    theirs = await mem.add_semantic_fact(OTHER, "The other user likes rye bread.")
    before = await mem.stats(OTHER)

    with pytest.raises(MemoryNotFoundError):
        await mem.forget(ctx, theirs.id)

    assert (await mem.stats(OTHER)).counts == before.counts


async def test_forget_an_episode_keeps_facts_and_cleans_their_references(mem: MemorySystem, ctx: MemoryContext) -> None:
    await converse(mem, ctx, ACME)
    episode = next(i for i in (await mem.list(ctx, tier="episodic")).items)
    fact = await fact_about(mem, ctx, "acme")

    await mem.forget(ctx, episode.id)

    kept = await mem.get(ctx, fact.id)
    assert episode.id not in kept.metadata.get("episodes", [])
    assert not (await mem.list(ctx, tier="episodic")).items


def test_the_read_side_and_the_blocking_facade_inspect_too(
    store_path: str, clock: FrozenClock, embedder: HashingEmbedder, ctx: MemoryContext
) -> None:
    writer = make(store_path, clock, embedder).blocking()
    fact = writer.add_semantic_fact(ctx, "The user likes rye bread.")
    reader = create_memory_capability(store=store_path, embedder=embedder, clock=clock).blocking()

    assert [i.id for i in reader.list(ctx).items] == [fact.id]
    assert reader.get(ctx, fact.id).text == fact.text
    assert [v.item.id for v in reader.history(ctx, fact.id)] == [fact.id]
    assert reader.subjects(ctx) == ["user"]
    assert reader.stats(ctx).counts["semantic"] == {"active": 1}
    assert not hasattr(reader, "forget") and not hasattr(reader, "erase_user")  # the read side never writes


AS_DICT = {"user_id": "u-1", "session_id": "s-1"}
CTX = MemoryContext(user_id="u-1", session_id="s-1")
Call = Callable[[Any], Any]  # Any: these calls are wrong on purpose
WRONG: list[tuple[str, Call]] = [
    ("get-dict-ctx", lambda m: m.get(AS_DICT, "fact_x")),
    ("get-int-id", lambda m: m.get(CTX, 5)),
    ("get-empty-id", lambda m: m.get(CTX, "")),
    ("list-str-limit", lambda m: m.list(CTX, limit="5")),
    ("list-int-tier", lambda m: m.list(CTX, tier=5)),
    ("list-int-status", lambda m: m.list(CTX, status=5)),
    ("list-int-subject", lambda m: m.list(CTX, subject=5)),
    ("list-int-cursor", lambda m: m.list(CTX, cursor=5)),
    ("history-none-id", lambda m: m.history(CTX, None)),
    ("subjects-dict-ctx", lambda m: m.subjects(AS_DICT)),
    ("stats-dict-ctx", lambda m: m.stats(AS_DICT)),
    ("update-int-text", lambda m: m.update(CTX, "fact_x", text=5)),
    ("update-int-subject", lambda m: m.update(CTX, "fact_x", subject=5)),
    ("pin-none-id", lambda m: m.pin(CTX, None)),
    ("unpin-dict-ctx", lambda m: m.unpin(AS_DICT, "fact_x")),
    ("forget-int-id", lambda m: m.forget(CTX, 7)),
    ("erase-dict-ctx", lambda m: m.erase_user(AS_DICT)),
    ("export-int-destination", lambda m: m.export(CTX, 42)),
    ("import-int-source", lambda m: m.import_(CTX, 42)),
    ("import-bytes-lines", lambda m: m.import_(CTX, [b"{}"])),
    ("fork-dict-source", lambda m: m.fork(AS_DICT, OTHER)),
]


@pytest.mark.parametrize("call", [c for _, c in WRONG], ids=[i for i, _ in WRONG])
async def test_a_wrong_type_raises_a_tiermem_error_and_writes_nothing(mem: MemorySystem, call: Call) -> None:
    fact = await mem.add_semantic_fact(CTX, "The user likes rye bread.")

    with pytest.raises(TiermemError):
        await call(mem)

    assert [f.id for f in await mem.facts(CTX, include_inactive=True)] == [fact.id]
    assert (await mem.stats(OTHER)).counts["semantic"] == {}


def test_governance_records_are_exported() -> None:
    import tiermem

    assert {"MemoryPage", "MemoryVersion", "MemoryStats", "ForgetReport", "EraseReport"} <= set(tiermem.__all__)
    assert issubclass(tiermem.MemoryNotFoundError, tiermem.InvalidArgumentError)
    assert Episode.model_fields["pinned"].default is False and Fact.model_fields["pinned"].default is False
