"""Memory policy (issue 35 item 1): instructions reach every stage that writes memories, the policy's labels are
assigned, validated, stored and filtered on, and what it excludes is not stored; through the real store."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import AnyCall, Messages, Sequenced, calls_for, default_reply, messages_of, stage_model
from tiermem import (
    ConfigurationError,
    InvalidArgumentError,
    MemoryContext,
    MemoryPolicy,
    MemorySystem,
    WorkingEntry,
    system,
)
from tiermem.memory.testing import FrozenClock, HashingEmbedder, Where
from tiermem.prompts import consolidate, encode_consolidate, encode_episode, observe, observe_window

INSTRUCTIONS = "Never store health details; only work-related facts matter."
LABELS = ["work", "health", "family"]
TIERS: dict[str, Any] = {"working": True, "semantic": True}
HEALTH = "I am allergic to peanuts."
WORK = "I work at Acme Corp as an engineer."
MONI = "My wife Moni loves painting."


def _system(
    store: str, embedder: HashingEmbedder, clock: FrozenClock, model: Any = "rules", **options: Any
) -> MemorySystem:
    episodic = options.pop("episodic", True)
    return system(model=model, store=store, embedder=embedder, clock=clock, episodic=episodic, **TIERS, **options)


def _stored_texts(mem: MemorySystem, ctx: MemoryContext) -> str:
    """Everything the tiers hold for the user except the turn log (the transcript is not what the policy governs)."""
    where = Where(eq={"user_id": ctx.user_id})
    texts = [r.text for table in ("working", "facts") for r in mem.store.query(table, where)]  # type: ignore[attr-defined]
    texts += [e.summary for e in mem.store.query("episodes", where)]  # type: ignore[attr-defined]
    return "\n".join(texts).lower()


def _labelled(label_of: dict[str, list[str]]) -> Any:
    """An observer answering as the default fake does, each observation labelled by the words it holds."""

    def reply(messages: Messages, call: AnyCall) -> dict[str, Any]:
        answer = default_reply(call)
        for obs in answer["observations"]:
            obs["categories"] = next((labels for word, labels in label_of.items() if word in obs["text"]), [])
        return answer

    return reply


# -- the instruction reaches every stage ------------------------------------------------------


@pytest.mark.parametrize(
    ("encode", "stages"),
    [
        ("session", {observe.STAGE, observe_window.STAGE, encode_episode.STAGE, consolidate.STAGE}),
        ("consolidation", {observe.STAGE, observe_window.STAGE, encode_consolidate.STAGE}),
    ],
    ids=["encode-at-session-end", "encode-at-consolidation"],
)
async def test_the_instruction_reaches_every_stage_that_writes_memories(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext, encode: str, stages: set[Any]
) -> None:
    fake = stage_model({observe_window.STAGE: lambda messages, call: default_reply(call)})
    mem = _system(store_path, embedder, clock, fake.model, instructions=INSTRUCTIONS, categories=LABELS,
                  episodic={"encode": encode})  # fmt: skip

    await mem.capture(ctx, messages_of(WORK, "Noted."))
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    turns = [
        {"at": clock.now() - timedelta(days=days), "messages": messages_of(said)}
        for days, said in ((3, MONI), (2, WORK))
    ]
    history = [{"session_id": "past", "turns": turns}]
    await mem.import_conversations(ctx, history, consolidate=False)

    for stage in stages:
        calls = calls_for(fake, stage)
        assert calls, f"{stage.name} was not asked"
        for recorded in calls:
            assert recorded.call is not None and recorded.call.inputs.policy == mem.policy
            system_prompt = recorded.messages[0]["content"]
            assert f"Instructions: {INSTRUCTIONS}" in system_prompt
            if stage is not encode_episode.STAGE:  # the labelled stages are told the vocabulary
                assert "chosen only from: work, health, family" in system_prompt


def test_no_policy_leaves_every_prompt_as_it_was() -> None:
    plain = observe.Input(messages=[], now=FrozenClock().now())
    empty = plain.model_copy(update={"policy": MemoryPolicy()})

    assert observe.STAGE.render(plain) == observe.STAGE.render(empty)
    assert "Memory policy" not in observe.STAGE.render(plain)[0]["content"]
    assert "categories" not in json.dumps(observe.STAGE.output_for(plain).model_json_schema())


# -- the rules model keeps out what it can recognise ------------------------------------------


@pytest.mark.parametrize(
    ("policy", "kept", "left_out"),
    [
        ({"exclude_categories": ["health"]}, ["acme corp", "painting"], ["peanuts"]),
        ({"categories": LABELS, "include_categories": ["work"]}, ["acme corp"], ["peanuts", "painting"]),
        ({"exclude_subjects": ["Moni"]}, ["acme corp", "peanuts"], ["painting"]),
    ],
    ids=["exclude-health", "only-work", "exclude-a-subject"],
)
async def test_the_rules_model_does_not_store_excluded_content(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    policy: dict[str, Any],
    kept: list[str],
    left_out: list[str],
) -> None:
    mem = _system(store_path, embedder, clock, policy=policy)

    await mem.capture(ctx, messages_of(f"{HEALTH} {WORK} {MONI}", "Noted."))
    await mem.end_session(ctx)
    result = await mem.consolidate(ctx)

    stored = _stored_texts(mem, ctx)
    assert result.episodes == 1 and not result.deferred
    assert all(word in stored for word in kept), stored
    assert not any(word in stored for word in left_out), stored


async def test_the_rules_model_labels_what_it_recognises(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = _system(store_path, embedder, clock, categories=[*LABELS, "preference"])

    captured = await mem.capture(ctx, messages_of(f"{HEALTH} {WORK} {MONI}", "Noted."))

    labels = {e.text: e.categories for e in captured.entries}
    assert labels == {
        "The user is allergic to peanuts.": ("health",),
        "The user works at Acme Corp as an engineer.": ("work",),
        "Moni, the user's wife, loves painting.": ("family", "preference"),
    }


# -- labels from a model: assigned, validated, stored, filtered ------------------------------


def _facts_labelled_work_only(messages: Messages, call: AnyCall) -> dict[str, Any]:
    """One add per observation; only the work one labelled by the model (the other inherits its observation's)."""
    ops = [{"op": "add", "subject": o.subject, "text": o.text, "categories": ["work"] if "Acme" in o.text else []}
           for o in call.inputs.observations]  # fmt: skip
    return {"operations": ops}


async def test_labels_are_stored_shown_and_filtered_through_the_store(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = stage_model(
        {
            observe.STAGE: _labelled({"Acme": ["work"], "peanuts": ["health"]}),
            consolidate.STAGE: _facts_labelled_work_only,
        }
    )
    mem = _system(store_path, embedder, clock, fake.model, categories=LABELS, episodic={"encode": "session"})

    await mem.capture(ctx, messages_of(WORK, "Noted."))
    await mem.capture(ctx, messages_of(HEALTH, "Noted."))
    live = await mem.recall(ctx, "Acme peanuts", categories=["work"])
    await mem.end_session(ctx)
    await mem.consolidate(ctx)

    assert [(i.tier, i.metadata["categories"]) for i in live] == [("working", ["work"])]
    assert {f.text: f.categories for f in await mem.facts(ctx)} == {WORK: ("work",), HEALTH: ("health",)}
    listed = await mem.list(ctx, categories=["health"])
    assert sorted((i.tier, i.text) for i in listed.items) == [("semantic", HEALTH), ("working", HEALTH)]
    assert (await mem.list(ctx, categories=["family"])).items == ()
    later = ctx.model_copy(update={"session_id": "s-2"})
    found = await mem.recall(later, "Acme Corp engineer", categories=["WORK "])  # labels are normalised
    assert [(i.tier, i.text) for i in found] == [("semantic", WORK)]
    shown = await mem.tools(later).execute(_recall_call("Acme Corp"))
    assert '"categories": "work"' in shown[0]["content"]


@pytest.mark.parametrize(
    ("replies", "stored"),
    [
        ([{"observations": [{"subject": "user", "kind": "fact", "text": WORK, "salience": 0.6,
                             "categories": ["gossip"]}]}], False),
        ([{"observations": [{"subject": "user", "kind": "fact", "text": WORK, "salience": 0.6,
                             "categories": ["gossip"]}]},
          {"observations": [{"subject": "user", "kind": "fact", "text": WORK, "salience": 0.6,
                             "categories": ["work"]}]}], True),
    ],
    ids=["always-outside-the-vocabulary", "outside-then-valid"],
)  # fmt: skip
async def test_a_label_outside_the_vocabulary_is_invalid_output(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    replies: list[dict[str, Any]],
    stored: bool,
) -> None:
    fake = stage_model({observe.STAGE: Sequenced(list[str | dict[str, Any]](replies))})
    mem = _system(store_path, embedder, clock, fake.model, categories=LABELS, validation_retries=1)

    result = await mem.capture(ctx, messages_of(WORK, "Noted."))

    assert len(calls_for(fake, observe.STAGE)) == 2  # asked again once
    if stored:
        assert [e.categories for e in result.entries] == [("work",)] and not result.deferred
    else:  # left pending with its error, retried later and parked after its attempts, as any invalid answer
        assert result.deferred and result.entries == [] and "gossip" in (result.error or "")
        assert mem.store.query("working", Where(eq={"user_id": ctx.user_id})) == []  # type: ignore[attr-defined]


def _recall_call(query: str) -> dict[str, Any]:
    function = {"name": "memory_recall", "arguments": json.dumps({"query": query})}
    return {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": function}]}


# -- what the code keeps out, whatever the model answers ---------------------------------------


def _ignores_the_policy(messages: Messages, call: AnyCall) -> dict[str, Any]:
    """A consolidator that writes a health fact and a fact about moni though the policy excludes both."""
    ops = [
        {"op": "add", "subject": "user", "text": HEALTH, "categories": ["health"]},
        {"op": "add", "subject": "moni", "text": "Moni paints.", "categories": ["family"]},
        {"op": "add", "subject": "user", "text": WORK, "categories": ["work"]},
    ]
    return {"operations": ops}


async def test_excluded_labels_and_subjects_are_kept_out_in_code(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    observer = _labelled({"peanuts": ["health"], "Acme": ["work"], "Moni": ["family"]})
    fake = stage_model({observe.STAGE: observer, consolidate.STAGE: _ignores_the_policy})
    policy = MemoryPolicy(categories=LABELS, exclude_categories=["health"], exclude_subjects=["moni"])
    mem = _system(store_path, embedder, clock, fake.model, policy=policy, episodic={"encode": "session"})

    captured = await mem.capture(ctx, messages_of(HEALTH, "Noted."))
    await mem.capture(ctx, messages_of(WORK, "Noted."))
    await mem.end_session(ctx)
    result = await mem.consolidate(ctx)

    assert captured.entries == []  # the observer labelled it health: not written
    assert [f.text for f in await mem.facts(ctx)] == [WORK]
    assert result.counts["policy"] == 2 and len(result.refusals) == 2
    assert all("memory policy" in r for r in result.refusals)


@pytest.mark.parametrize(("subject", "stored"), [("moni", False), ("user", True)], ids=["excluded", "other"])
async def test_the_agents_remember_tool_obeys_the_policys_subjects(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext, subject: str, stored: bool
) -> None:
    mem = _system(store_path, embedder, clock, policy=MemoryPolicy(exclude_subjects=["moni"]))
    arguments = json.dumps({"text": "Moni's favourite colour is teal.", "subject": subject})
    function = {"name": "memory_remember", "arguments": arguments}
    call = {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": function}]}
    (reply,) = await mem.tools(ctx, write=True).execute(call)
    answer = json.loads(reply["content"])
    assert answer["ok"] is stored, answer
    assert [f.text for f in await mem.facts(ctx)] == (["Moni's favourite colour is teal."] if stored else [])
    if not stored:
        assert "memory policy keeps memories about 'moni' out" in answer["error"]


# -- per-call overrides --------------------------------------------------------------------------


async def test_a_capture_override_holds_for_its_turn_even_when_observed_later(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = _system(store_path, embedder, clock, instructions="Remember the user's work.")
    override = {"exclude_subjects": ["moni"]}

    queued = await mem.capture(ctx, messages_of(f"{MONI} {WORK}", "Noted."), policy=override, background=True)
    await mem.flush()
    plain = await mem.capture(ctx, messages_of("My wife Moni loves hiking.", "Noted."))

    stored = mem.store.query("turns", Where(eq={"user_id": ctx.user_id}))  # type: ignore[attr-defined]
    kept = {t.id: t.policy for t in stored}
    assert kept[queued.turn.id] == MemoryPolicy(exclude_subjects=["moni"]) and kept[plain.turn.id] is None
    entries = mem.store.query("working", Where(eq={"user_id": ctx.user_id}))  # type: ignore[attr-defined]
    assert sorted(e.subject for e in entries) == ["moni", "user"]  # Moni from the plain turn only
    assert any("hiking" in e.text for e in entries) and not any("painting" in e.text for e in entries)


async def test_a_consolidate_override_replaces_the_fields_it_sets(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = stage_model()
    mem = _system(store_path, embedder, clock, fake.model, instructions=INSTRUCTIONS, categories=LABELS,
                  episodic={"encode": "session"})  # fmt: skip
    await mem.capture(ctx, messages_of(WORK, "Noted."))
    await mem.end_session(ctx)

    await mem.consolidate(ctx, policy=MemoryPolicy(instructions="Only what the user does for fun."))

    (recorded,) = calls_for(fake, consolidate.STAGE)
    assert recorded.call is not None
    assert recorded.call.inputs.policy == MemoryPolicy(
        instructions="Only what the user does for fun.", categories=LABELS
    )
    assert "Instructions: Only what the user does for fun." in recorded.messages[0]["content"]


# -- bad configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"instructions": 5},
        {"instructions": "x" * 5000},
        {"categories": "work"},
        {"categories": []},
        {"categories": ["work", ""]},
        {"categories": ["a" * 41]},
        {"policy": {"include_categories": ["work"], "exclude_categories": ["work"]}},
        {"categories": LABELS, "policy": {"exclude_categories": ["hobby"]}},
        {"policy": {"exclude_subjects": ["not a subject!"]}},
        {"policy": {"exclude_subjects": "moni"}},
        {"policy": {"forget_everything": True}},
        {"policy": "never store health"},
        {"instructions": INSTRUCTIONS, "policy": {"instructions": "other"}},
        {"polcy": {}},
    ],
    ids=[
        "instructions-not-text", "instructions-too-long", "categories-a-string", "categories-empty",
        "empty-label", "label-too-long", "included-and-excluded", "excluded-outside-vocabulary",
        "bad-subject", "subjects-a-string", "unknown-field", "policy-a-string", "instructions-twice", "typo",
    ],
)  # fmt: skip
def test_bad_policy_configuration_is_refused(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, options: dict[str, Any]
) -> None:
    with pytest.raises(ConfigurationError):
        _system(store_path, embedder, clock, **options)
    assert not Path(store_path).exists()  # refused before anything is created


async def test_bad_overrides_and_filters_are_refused_before_writing(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = _system(store_path, embedder, clock, categories=LABELS)

    with pytest.raises(ConfigurationError, match="hobby"):
        await mem.capture(ctx, messages_of(WORK, "Noted."), policy={"exclude_categories": ["hobby"]})
    with pytest.raises(ConfigurationError):
        await mem.consolidate(ctx, policy={"include_categories": ["hobby"]})
    for bad in ("work", [], [3]):
        with pytest.raises(InvalidArgumentError):
            await mem.recall(ctx, "work", categories=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            await mem.list(ctx, categories=bad)  # type: ignore[arg-type]
    assert mem.store.query("turns", Where(eq={"user_id": ctx.user_id})) == []  # type: ignore[attr-defined]


# -- stored labels: older records, export and import -----------------------------------------


def test_a_record_stored_before_labels_reads_without_them(clock: FrozenClock) -> None:
    now = clock.now().isoformat()
    old = {"id": "wm_1", "namespace": "default", "user_id": "u-1", "session_id": "s-1", "subject": "user",
           "text": WORK, "created_at": now, "updated_at": now}  # fmt: skip

    assert WorkingEntry.model_validate_json(json.dumps(old)).categories == ()
    assert WorkingEntry.model_validate_json(json.dumps({**old, "categories": ["Work", "work"]})).categories == ("work",)


async def test_labels_survive_export_and_import(
    store_path: str, tmp_path: Path, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = _system(store_path, embedder, clock, categories=LABELS)
    await mem.capture(ctx, messages_of(f"{HEALTH} {WORK}", "Noted."))
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    dump = tmp_path / "export.jsonl"
    await mem.export(ctx, dump)

    other = _system(str(tmp_path / "other"), embedder, clock, categories=LABELS)
    await other.import_(ctx, dump)

    work = await other.list(ctx, categories=["work"], tier="semantic")
    assert [(i.text, i.metadata["categories"]) for i in work.items] == [
        ("The user works at Acme Corp as an engineer.", ["work"])
    ]


async def test_a_correction_keeps_its_facts_labels(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = _system(store_path, embedder, clock, categories=LABELS)
    await mem.capture(ctx, messages_of(WORK, "Noted."))
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    (fact,) = await mem.facts(ctx)

    corrected = await mem.update(ctx, fact.id, text="The user works at Globex as an engineer.")

    assert (fact.categories, corrected.categories) == (("work",), ("work",))


@pytest.mark.parametrize(
    ("command", "category", "texts"),
    [
        (["show", "u-1", "--tier", "semantic"], "work", ["The user works at Acme Corp as an engineer."]),
        (["show", "u-1", "--tier", "semantic"], "family", ["Moni, the user's wife, loves painting."]),
        (
            ["search", "u-1", "Acme Corp engineer", "--limit", "5"],
            "work",
            ["The user works at Acme Corp as an engineer."],
        ),
        (["search", "u-1", "Acme Corp engineer", "--limit", "5"], "health", []),
    ],
    ids=["show-work", "show-family", "search-work", "search-nothing-labelled"],
)
def test_the_command_line_filters_by_category(
    store_path: str, clock: FrozenClock, ctx: MemoryContext, command: list[str], category: str, texts: list[str]
) -> None:
    from click.testing import CliRunner

    from tiermem.memory._cli._main import cli

    mem = system(model="rules", store=store_path, clock=clock, categories=LABELS).blocking()  # the CLI's embedder
    mem.capture(ctx, messages_of(f"{WORK} {MONI}", "Noted."))
    mem.end_session(ctx)
    mem.consolidate(ctx)

    args = ["--store", store_path, *command, "--category", category, "--json"]
    done = CliRunner().invoke(cli, args, catch_exceptions=False)

    assert done.exit_code == 0, done.output
    assert [i["text"] for i in json.loads(done.stdout)] == texts
