"""``system()`` end to end: capture -> working -> episode -> facts -> digest, through real LanceDB and
real litellm calls routed to in-process fake models (or the offline rules model)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

import litellm
import pytest

from tests.fakes import AnyCall, calls_for, messages_of, session, stage_model
from tiermem import LLM, ConfigurationError, InvalidArgumentError, MemoryContext, MemorySystem, ModelError, system
from tiermem.memory._stage import Stage
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder, Where
from tiermem.prompts import consolidate, digest, encode_consolidate, encode_episode, observe

Builder = Callable[..., MemorySystem]

# litellm lazily imports a module whose pydantic TypedDict warns on every model call; pyproject's
# filterwarnings="error" would turn that into a failed (deferred) call.
pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

MONI = "My wife Moni is allergic to shellfish."
MONI_FACT = "Moni, the user's wife, is allergic to shellfish."
MONI_CONSOLIDATED = {
    "operations": [{"op": "add", "subject": "Moni", "text": MONI_FACT, "confidence": 0.9}],
    "edges": [{"source": "user", "relation": "married to", "target": "Moni"}],
}
MONI_REPLIES: dict[Any, Any] = {
    observe.STAGE: {"observations": [{"subject": "moni", "kind": "relationship", "text": MONI_FACT, "salience": 0.9}]},
    consolidate.STAGE: MONI_CONSOLIDATED,
    encode_consolidate.STAGE: MONI_CONSOLIDATED,  # the default: the same facts (the episode keeps its own summary)
}


@pytest.fixture
def build(store_path: str, embedder: HashingEmbedder, clock: FrozenClock) -> Builder:
    def make(model: Any, **options: Any) -> MemorySystem:
        return system(model=model, store=store_path, embedder=embedder, clock=clock, **options)

    return make


def _model(kind: str, replies: dict[Any, Any] | None = None) -> tuple[Any, FunctionModel | None]:
    """("rules", None) or (a fake model string, the fake)."""
    if kind == "rules":
        return "rules", None
    fake = stage_model(replies)
    return fake.model, fake


async def _one_session(mem: MemorySystem, ctx: MemoryContext, *texts: str) -> None:
    await mem.capture(ctx, messages_of(*texts))
    await mem.end_session(ctx)
    await mem.consolidate(ctx)


# -- subject attribution ------------------------------------------------------------------------


@pytest.mark.parametrize("relations", [False, True], ids=["relations-off", "relations-on"])
@pytest.mark.parametrize("kind", ["rules", "fake"], ids=["rules", "fake"])
async def test_wife_fact_is_filed_under_moni_not_user(
    build: Builder, ctx: MemoryContext, kind: str, relations: bool
) -> None:
    model, _ = _model(kind, MONI_REPLIES)
    mem = build(model, semantic={"relations": relations})

    await _one_session(mem, ctx, MONI, "Noted, I'll keep shellfish off the menu.")

    moni = await mem.facts(ctx, subject="moni")
    user = await mem.facts(ctx, subject="user")
    assert [f.subject for f in moni] == ["moni"]
    assert "shellfish" in moni[0].text.lower()
    assert "wife" in moni[0].text.lower()  # the relation to the user is kept in the text
    assert not [f for f in user if "shellfish" in f.text.lower()]


@pytest.mark.parametrize("kind", ["rules", "fake"], ids=["rules", "fake"])
async def test_wife_relation_becomes_an_edge_when_relations_are_on(
    build: Builder, ctx: MemoryContext, kind: str
) -> None:
    model, _ = _model(kind, MONI_REPLIES)
    mem = build(model, semantic={"relations": True})

    await _one_session(mem, ctx, MONI)

    assert [(e.source, e.relation, e.target) for e in await mem.connections(ctx, "moni")] == [
        ("user", "married to", "moni")
    ]


@pytest.mark.parametrize("kind", ["rules", "fake"], ids=["rules", "fake"])
async def test_no_edges_when_relations_are_off(build: Builder, ctx: MemoryContext, kind: str) -> None:
    model, _ = _model(kind, MONI_REPLIES)
    mem = build(model, semantic={"relations": False})

    await _one_session(mem, ctx, MONI)

    assert mem.store.count("edges") == 0


@pytest.mark.parametrize("kind", ["rules", "fake"], ids=["rules", "fake"])
async def test_observer_entry_carries_the_subject(build: Builder, ctx: MemoryContext, kind: str) -> None:
    model, _ = _model(kind, MONI_REPLIES)
    mem = build(model)

    result = await mem.capture(ctx, messages_of(MONI))

    assert [e.subject for e in result.entries] == ["moni"]
    assert [e.subject for e in await mem.working_memory(ctx)] == ["moni"]


@pytest.mark.parametrize("kind", ["rules", "fake"], ids=["rules", "fake"])
async def test_episode_lists_moni_as_a_subject(build: Builder, ctx: MemoryContext, kind: str) -> None:
    model, _ = _model(kind, MONI_REPLIES)
    mem = build(model)
    await mem.capture(ctx, messages_of(MONI))

    ended = await mem.end_session(ctx)

    assert ended.episode is not None
    assert "moni" in ended.episode.subjects


# -- digest -------------------------------------------------------------------------------------


async def test_rules_digest_mentions_moni_in_relation_to_the_user(build: Builder, ctx: MemoryContext) -> None:
    mem = build("rules", semantic={"relations": True})
    await _one_session(mem, ctx, MONI, "Noted.")

    written = await mem.digest(ctx)

    assert written.digest is not None
    assert re.search(r"\bwife Moni\b", written.digest.text)
    assert written.digest.subject == "user"


@pytest.mark.parametrize("relations", [False, True], ids=["relations-off", "relations-on"])
async def test_fake_digest_prompt_shows_moni_under_her_own_subject(
    build: Builder, ctx: MemoryContext, relations: bool
) -> None:
    fake = stage_model(MONI_REPLIES)
    mem = build(fake.model, semantic={"relations": relations})
    await mem.add_alias(ctx, "Sam")
    await _one_session(mem, ctx, MONI)

    written = await mem.digest(ctx)

    prompt = calls_for(fake, digest.STAGE)[0].prompt
    assert f"[moni] {MONI_FACT}" in prompt
    assert "display names: Sam" in prompt
    assert ("user --married to--> moni" in prompt) is relations
    assert written.digest is not None and "Moni" in written.digest.text


async def test_digest_is_off_when_the_tier_is_off(build: Builder, ctx: MemoryContext) -> None:
    mem = build("rules", digest=False)
    await _one_session(mem, ctx, MONI)

    assert (await mem.digest(ctx)).digest is None


# -- supersession -------------------------------------------------------------------------------


def _update_to_globex(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
    """Consolidator reply: update the Initech fact it was shown, else add what was said."""
    shown = [f.id for f in call.inputs.existing if (f.subject, f.text) == ("user", "The user works at Initech.")]
    if not shown:
        return {"operations": [{"op": "add", "subject": "user", "text": "The user works at Initech."}]}
    return {
        "operations": [{"op": "update", "subject": "user", "target_id": shown[0], "text": "The user works at Globex."}]
    }


@pytest.mark.parametrize("kind", ["rules", "fake"], ids=["rules", "fake"])
async def test_update_supersedes_and_keeps_the_old_fact(
    build: Builder, ctx: MemoryContext, clock: FrozenClock, kind: str
) -> None:
    model, _ = _model(kind, {consolidate.STAGE: _update_to_globex, encode_consolidate.STAGE: _update_to_globex})
    mem = build(model)
    await _one_session(mem, ctx, "I work at Initech.")
    (old,) = await mem.facts(ctx)
    later = clock.advance(days=3)

    await _one_session(mem, session(ctx, "s-2"), "I work at Globex now.")

    (new,) = await mem.facts(ctx)
    history = {f.id: f for f in await mem.facts(ctx, include_inactive=True)}
    kept = history[old.id]
    assert "Globex" in new.text
    assert (kept.status, kept.valid_to, kept.superseded_by) == ("superseded", later, new.id)
    assert kept.text == old.text
    assert len(history) == 2


@pytest.mark.parametrize("kind", ["rules", "fake"], ids=["rules", "fake"])
async def test_superseded_fact_is_recalled_only_as_past(
    build: Builder, ctx: MemoryContext, clock: FrozenClock, kind: str
) -> None:
    model, _ = _model(kind, {consolidate.STAGE: _update_to_globex, encode_consolidate.STAGE: _update_to_globex})
    mem = build(model)
    await _one_session(mem, ctx, "I work at Initech.")
    (old,) = await mem.facts(ctx)
    clock.advance(days=3)
    await _one_session(mem, session(ctx, "s-2"), "I work at Globex now.")

    recalled = await mem.recall(ctx, "Where does the user work? Initech or Globex?", tiers=["semantic"])

    assert "Globex" in recalled[0].text  # what holds comes first; the old version only marked past, below it
    assert all(i.metadata.get("superseded") for i in recalled if i.id == old.id)


# -- working memory capacity --------------------------------------------------------------------

SALIENCE = {"Alpha likes opera.": 0.9, "Bravo likes jazz.": 0.5, "Charlie likes folk.": 0.5}


def _observe_with_salience(messages: list[dict[str, Any]], call: AnyCall) -> dict[str, Any]:
    said = next(m.content for m in call.inputs.messages if m.role == "user").strip()
    return {"observations": [{"subject": "user", "kind": "fact", "text": said, "salience": SALIENCE[said]}]}


@pytest.fixture
def capped(build: Builder) -> tuple[MemorySystem, FunctionModel]:
    fake = stage_model({observe.STAGE: _observe_with_salience})
    # half-life of one turn: the oldest, most salient entry decays below the newer ones
    return build(fake.model, working={"capacity": 2, "salience_half_life": 1.0}), fake


async def _capture_all(mem: MemorySystem, ctx: MemoryContext) -> None:
    for text in SALIENCE:
        await mem.capture(ctx, messages_of(text))


async def test_capacity_keeps_the_highest_effective_salience(
    capped: tuple[MemorySystem, FunctionModel], ctx: MemoryContext
) -> None:
    mem, _ = capped
    await _capture_all(mem, ctx)

    active = await mem.working_memory(ctx)

    assert sorted(e.text for e in active) == ["Bravo likes jazz.", "Charlie likes folk."]


async def test_overflow_stays_in_the_session_log(
    capped: tuple[MemorySystem, FunctionModel], ctx: MemoryContext
) -> None:
    mem, _ = capped
    await _capture_all(mem, ctx)

    log = {e.text: e.status for e in await mem.working_memory(ctx, include_inactive=True)}

    assert log == {"Alpha likes opera.": "overflow", "Bravo likes jazz.": "active", "Charlie likes folk.": "active"}


async def test_overflow_reaches_the_episode_encoder(build: Builder, ctx: MemoryContext) -> None:
    fake = stage_model({observe.STAGE: _observe_with_salience})
    working = {"capacity": 2, "salience_half_life": 1.0}  # as `capped`, with the episode encoder's own call
    mem = build(fake.model, working=working, episodic={"encode": "session"})
    await _capture_all(mem, ctx)

    ended = await mem.end_session(ctx)

    (call,) = calls_for(fake, encode_episode.STAGE)
    assert "[user] Alpha likes opera." in call.prompt
    assert ended.episode is not None and "Alpha likes opera." in ended.episode.summary


async def test_end_session_closes_working_memory(
    capped: tuple[MemorySystem, FunctionModel], ctx: MemoryContext
) -> None:
    mem, _ = capped
    await _capture_all(mem, ctx)

    await mem.end_session(ctx)

    assert await mem.working_memory(ctx) == []
    assert {e.status for e in await mem.working_memory(ctx, include_inactive=True)} == {"closed"}


# -- capture arguments --------------------------------------------------------------------------

LOOSE = [
    {"role": "user", "content": "I bake bread."},
    {"role": "assistant", "content": "Sourdough?"},
    {"role": "user", "content": "Rye, mostly."},
    {"role": "assistant", "content": "Nice."},
]
LISTS = [LOOSE[:2], LOOSE[2:]]


@pytest.mark.parametrize("items", [LOOSE, LISTS], ids=["loose-messages", "lists"])
async def test_capture_from_items_makes_one_turn_per_exchange(
    build: Builder, ctx: MemoryContext, items: list[Any]
) -> None:
    mem = build("rules")

    results = await mem.capture_from_items(ctx, items)

    assert [[m.content for m in r.turn.messages] for r in results] == [
        ["I bake bread.", "Sourdough?"],
        ["Rye, mostly.", "Nice."],
    ]
    assert [r.turn.seq for r in results] == [0, 1]
    assert mem.store.count("turns") == 2


@pytest.mark.parametrize(
    "messages",
    [
        [],
        "I bake bread.",
        [{"role": "user", "content": 5}],
        [{"role": "robot", "content": "hi"}],
        [42],
        [{"role": "user"}],
        [{"content": "I like tea."}],
        [{"role": "user", "content": "hi"}, {"role": None, "content": "hello"}],
    ],
    ids=["empty", "string", "non-string-content", "unknown-role", "not-a-dict", "no-content", "no-role", "role-none"],
)
async def test_capture_rejects_invalid_messages(build: Builder, ctx: MemoryContext, messages: Any) -> None:
    mem = build("rules")

    with pytest.raises(InvalidArgumentError):
        await mem.capture(ctx, messages)
    assert mem.store.count("turns") == 0


BAD_METADATA = [
    pytest.param({"channel": "chat\ud800"}, id="value"),
    pytest.param({"chan\udc00nel": "chat"}, id="key"),
    pytest.param({"tags": ["ok", "\udfff"]}, id="in-a-list"),
    pytest.param({"source": {"thread": {"title": "x\ud83d"}}}, id="nested-mapping"),
]


@pytest.mark.parametrize("metadata", BAD_METADATA)
async def test_metadata_with_a_lone_surrogate_is_refused_and_nothing_written(
    build: Builder, ctx: MemoryContext, metadata: dict[str, Any]
) -> None:
    mem = build("rules")

    with pytest.raises(InvalidArgumentError, match="metadata has a lone surrogate"):
        await mem.capture(ctx, messages_of("My sister Ana lives in Porto."), metadata=metadata)
    with pytest.raises(InvalidArgumentError, match="metadata has a lone surrogate"):
        await mem.add_semantic_fact(ctx, "The user lives in Porto.", metadata=metadata)
    with pytest.raises(InvalidArgumentError, match="metadata has a lone surrogate"):
        await mem.add_working_memory(ctx, "The user lives in Porto.", metadata=metadata)

    assert [mem.store.count(t) for t in ("turns", "working", "facts")] == [0, 0, 0]
    await mem.capture(ctx, messages_of("My sister Ana lives in Porto."), metadata={"channel": "chat"})
    assert mem.store.count("turns") == 1  # the same capture with valid metadata is written


@pytest.mark.parametrize(
    "items",
    [
        [{"role": "user", "content": 5}],
        ["not a message"],
        [[{"role": "robot", "content": "hi"}]],
        [{"role": "user", "content": "hi"}, {"content": "hello"}],
    ],
    ids=["non-string-content", "string-item", "unknown-role-in-list", "no-role"],
)
async def test_capture_from_items_rejects_invalid_messages(build: Builder, ctx: MemoryContext, items: Any) -> None:
    mem = build("rules")

    with pytest.raises(InvalidArgumentError):
        await mem.capture_from_items(ctx, items)


async def test_a_message_without_a_role_is_refused_by_name_and_nothing_is_imported(build: Builder) -> None:
    mem = build("rules")
    said = {"at": "2024-05-02T10:00:00+00:00", "messages": [{"role": "user", "content": "I bake rye bread."}]}
    roleless = {"at": "2024-05-02T10:05:00+00:00", "messages": [{"content": "I like tea."}]}

    with pytest.raises(InvalidArgumentError, match="message 0: a message needs 'role'"):
        await mem.import_conversations(MemoryContext(user_id="u-1"), [{"session_id": "s", "turns": [said, roleless]}])
    assert mem.store.count("turns") == 0


async def test_capture_from_items_validates_the_whole_batch_first(build: Builder, ctx: MemoryContext) -> None:
    mem = build("rules")

    with pytest.raises(InvalidArgumentError):
        await mem.capture_from_items(ctx, [LOOSE[:2], [{"role": "user", "content": 5}]])
    assert mem.store.count("turns") == 0


async def test_capture_needs_a_session(build: Builder) -> None:
    mem = build("rules")

    with pytest.raises(InvalidArgumentError, match="session_id"):
        await mem.capture(MemoryContext(user_id="u-1"), messages_of("hello"))


async def test_end_session_needs_a_session(build: Builder) -> None:
    mem = build("rules")

    with pytest.raises(InvalidArgumentError, match="session_id"):
        await mem.end_session(MemoryContext(user_id="u-1"))


# -- model calls per path -----------------------------------------------------------------------


async def test_one_observer_call_per_captured_turn(build: Builder, ctx: MemoryContext) -> None:
    fake = stage_model()
    mem = build(fake.model)

    await mem.capture_from_items(ctx, [*LOOSE, {"role": "user", "content": "And pastries."}])

    assert len(calls_for(fake, observe.STAGE)) == 3
    assert mem.usage()["observe"]["calls"] == 3
    assert set(mem.usage()) == {"observe"}


@pytest.mark.parametrize("path", ["recall", "format_context", "tools"], ids=["recall", "format_context", "tool-call"])
async def test_read_paths_make_no_model_call(build: Builder, ctx: MemoryContext, path: str) -> None:
    fake = stage_model()
    mem = build(fake.model)
    await _one_session(mem, ctx, "I bake rye bread every Sunday.")
    await mem.capture(session(ctx, "s-2"), messages_of("I also grow tomatoes."))
    before, calls = mem.usage(), len(fake.calls)

    if path == "recall":
        await mem.recall(session(ctx, "s-2"), "bread")
    elif path == "format_context":
        await mem.format_context(session(ctx, "s-2"), "What do I bake?")
    else:
        tool = mem.tools(session(ctx, "s-2")).get("memory_recall")
        assert tool is not None
        assert (await tool.call({"query": "bread"}))["ok"]

    assert (mem.usage(), len(fake.calls)) == (before, calls)


async def test_rules_model_makes_no_model_call(build: Builder, ctx: MemoryContext) -> None:
    mem = build("rules")

    await _one_session(mem, ctx, MONI)
    await mem.digest(ctx)

    assert mem.usage() == {}


# -- the LLM boundary ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stage", "schema", "relations"),
    [
        (observe.STAGE, observe.Output, False),
        (encode_episode.STAGE, encode_episode.Output, False),
        (consolidate.STAGE, consolidate.FactsOutput, False),
        (consolidate.STAGE, consolidate.Output, True),
        (encode_consolidate.STAGE, encode_consolidate.FactsOutput, False),
        (encode_consolidate.STAGE, encode_consolidate.Output, True),
        (digest.STAGE, digest.Output, False),
    ],
    ids=["observe", "encode_episode", "consolidate-facts-only", "consolidate-with-edges",
         "encode_consolidate-facts-only", "encode_consolidate-with-edges", "digest"],
)  # fmt: skip
async def test_fake_models_get_the_schema_in_the_prompt(
    build: Builder, ctx: MemoryContext, stage: Stage[Any, Any], schema: type[Any], relations: bool
) -> None:
    fake = stage_model()
    two_calls = stage in (encode_episode.STAGE, consolidate.STAGE)  # these stages run on the session path only
    mem = build(fake.model, semantic={"relations": relations}, episodic={"encode": "session"} if two_calls else True)
    await _one_session(mem, ctx, "I bake rye bread every Sunday.")
    await mem.digest(ctx)

    (call,) = calls_for(fake, stage)

    assert json.dumps(schema.model_json_schema(), separators=(",", ":")) in call.prompt
    assert "Reply with a single JSON object" in call.messages[-1]["content"]
    assert ('"edges"' in call.prompt) is (stage in (consolidate.STAGE, encode_consolidate.STAGE) and relations)
    assert call.call is not None and call.call.output is schema


async def test_llm_passes_timeout_num_retries_and_json_mode(
    build: Builder, ctx: MemoryContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []
    real = litellm.acompletion

    async def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return await real(*args, **kwargs)

    monkeypatch.setattr(litellm, "acompletion", recording)
    fake = stage_model()
    mem = build(fake.model, timeout=12.5, num_retries=1)

    await mem.capture(ctx, messages_of("I bake rye bread."))

    (kwargs,) = seen
    assert (kwargs["timeout"], kwargs["num_retries"]) == (12.5, 0)  # tiermem retries transient errors itself
    assert kwargs["response_format"] == {"type": "json_object"}


async def test_real_provider_model_fails_loudly_in_tests() -> None:
    llm = LLM("openai/gpt-4o-mini")

    with pytest.raises(ModelError, match="real model requests are disabled"):
        await llm.structured(stage="observe", messages=[{"role": "user", "content": "hi"}], output=observe.Output)
    assert llm.ledger.snapshot() == {}


async def test_real_provider_model_defers_capture(build: Builder, ctx: MemoryContext) -> None:
    mem = build("openai/gpt-4o-mini")

    result = await mem.capture(ctx, messages_of(MONI))

    assert result.deferred
    assert "real model requests are disabled" in (result.error or "")
    (turn,) = mem.store.query("turns", Where(eq={"user_id": ctx.user_id, "session_id": "s-1"}))
    assert (turn.status, turn.messages[0].content) == ("pending", MONI)


# -- choosing the model -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "rules"),
        ({"TIERMEM_MODEL": "<fake>"}, "<fake>"),
        ({"TIERMEM_MODEL": "rules", "OPENAI_API_KEY": "sk-test"}, "rules"),
        ({"OPENAI_API_KEY": "sk-test"}, "openai/gpt-4o-mini"),
        ({"ANTHROPIC_API_KEY": "sk-test"}, "anthropic/claude-3-5-haiku-latest"),
    ],
    ids=["nothing-means-rules", "tiermem-model", "tiermem-model-beats-key", "openai-key", "anthropic-key"],
)
def test_system_picks_its_model_from_the_environment_and_says_which(
    build: Builder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    env: dict[str, str],
    expected: str,
) -> None:
    fake = stage_model()
    for key in ["TIERMEM_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"]:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, fake.model if value == "<fake>" else value)
    name = fake.model if expected == "<fake>" else expected

    with caplog.at_level(logging.INFO, logger="tiermem"):
        mem = build(None)

    assert mem.model_name == mem.stages.name == name
    said = [r.getMessage() for r in caplog.records if r.name == "tiermem" and "no model given" in r.getMessage()]
    assert len(said) == 1 and f"using {name} (" in said[0]
    assert next(iter(env), "no TIERMEM_MODEL") in said[0]  # the variable that decided it


def test_a_given_model_is_not_announced(build: Builder, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tiermem"):
        assert build("rules").model_name == "rules"
    assert not [r for r in caplog.records if "no model given" in r.getMessage()]


@pytest.mark.parametrize("model", ["rule", "Rules", "RULES", " rules", "rulez", ""], ids=repr)
def test_a_near_miss_of_rules_is_refused(store_path: str, model: str) -> None:
    with pytest.raises(ConfigurationError, match="'rules'"):
        system(model=model, store=store_path)


def test_a_near_miss_in_the_environment_is_refused(store_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_MODEL", "rule")
    with pytest.raises(ConfigurationError, match="did you mean 'rules'"):
        system(store=store_path)


async def test_model_from_the_environment_is_used(
    build: Builder, ctx: MemoryContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = stage_model()
    monkeypatch.setenv("TIERMEM_MODEL", fake.model)
    mem = build(None)

    await mem.capture(ctx, messages_of("I bake rye bread."))

    assert len(calls_for(fake, observe.STAGE)) == 1
