"""Real transcripts in ``capture``: OpenAI and litellm message shapes, the keep-roles policy, whole-batch refusal."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

import pytest

from tiermem import ConfigurationError, InvalidArgumentError, MemoryContext, MemorySystem, Message, system
from tiermem.memory._store._store import TableName
from tiermem.memory._transcripts import normalize_messages
from tiermem.memory.testing import FrozenClock, HashingEmbedder, Where

with warnings.catch_warnings():  # litellm's pydantic types warn on import; that is not ours to fix
    warnings.simplefilter("ignore")
    from litellm.types.utils import ChatCompletionMessageToolCall, Function
    from litellm.types.utils import Message as LiteLLMMessage

TABLES: tuple[TableName, ...] = get_args(TableName)
QUESTION = "What should I bring to Moni's dinner? She is allergic to shellfish."
ANSWER = "Bring a lemon tart: no shellfish, and she likes citrus."
RECALLED = json.dumps({"ok": True, "results": [{"id": "f-1", "text": "Moni loves citrus.", "tier": "semantic"}]})
WEATHER = '{"city": "Porto", "sky": "sunny"}'


def _litellm(**fields: Any) -> Any:
    with warnings.catch_warnings():  # litellm builds pydantic schemas lazily, with the same warnings
        warnings.simplefilter("ignore")
        return LiteLLMMessage(**fields)


def _call(call_id: str, name: str, arguments: str) -> Any:
    return ChatCompletionMessageToolCall(id=call_id, type="function", function=Function(name=name, arguments=arguments))


def litellm_exchange() -> list[Any]:
    """A tool-calling turn as litellm returns it: Message objects, content None beside tool_calls."""
    return [
        {"role": "system", "content": "You are a helpful assistant with long-term memory."},
        {"role": "user", "content": QUESTION},
        _litellm(
            role="assistant",
            content=None,
            tool_calls=[
                _call("c1", "memory_recall", '{"query": "Moni food"}'),
                _call("c2", "get_weather", '{"city": "Porto"}'),
            ],
        ),
        {"role": "tool", "tool_call_id": "c1", "name": "memory_recall", "content": RECALLED},
        {"role": "tool", "tool_call_id": "c2", "name": "get_weather", "content": WEATHER},
        _litellm(role="assistant", content=ANSWER),
    ]


def dict_exchange() -> list[Any]:
    """The same turn as OpenAI-style dicts, with a content-part list and no tool names on the results."""
    return [
        {"role": "developer", "content": "Answer briefly."},
        {"role": "user", "content": [{"type": "text", "text": QUESTION}, {"type": "image_url", "image_url": {}}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "memory_recall", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": RECALLED},
        {"role": "tool", "tool_call_id": "c2", "content": WEATHER},
        {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]},
    ]


EXCHANGES = [litellm_exchange, dict_exchange]
EXCHANGE_IDS = ["litellm-objects", "openai-dicts"]


@pytest.fixture
def make(store_path: str, clock: FrozenClock) -> Callable[..., MemorySystem]:
    def build(**options: Any) -> MemorySystem:
        return system(model="rules", store=store_path, embedder=HashingEmbedder(256), clock=clock, **options)

    return build


def _rows(mem: MemorySystem) -> dict[str, int]:
    return {table: mem.store.count(table) for table in TABLES}


# -- acceptance: a full tool-calling exchange ---------------------------------------------------


@pytest.mark.parametrize("exchange", EXCHANGES, ids=EXCHANGE_IDS)
async def test_a_tool_calling_exchange_stores_what_people_said(
    make: Callable[..., MemorySystem], ctx: MemoryContext, exchange: Callable[[], list[Any]]
) -> None:
    mem = make()

    result = await mem.capture(ctx, exchange())

    assert mem.store.count("turns") == 1
    (turn,) = mem.store.query("turns", Where(eq={"user_id": ctx.user_id}))
    assert turn.id == result.turn.id
    assert [(m.role, m.content) for m in turn.messages] == [("user", QUESTION), ("assistant", ANSWER)]
    assert "Moni loves citrus." not in turn.text  # the recalled memory is not logged again
    assert "sunny" not in turn.text and "helpful" not in turn.text and "briefly" not in turn.text


MALFORMED: list[tuple[str, int, Any, str]] = [
    ("content-int", 3, {"role": "tool", "tool_call_id": "c1", "content": 5}, "'content' must be"),
    ("unknown-role", 3, {"role": "robot", "content": "beep"}, "unknown role 'robot'"),
    ("user-content-none", 3, {"role": "user", "content": None}, "needs 'content'"),
    ("part-without-type", 3, {"role": "user", "content": [{"text": "hi"}]}, "part 0"),
    ("text-part-not-string", 3, {"role": "user", "content": [{"type": "text", "text": 7}]}, "part 0"),
    ("name-not-string", 3, {"role": "user", "content": "hi", "name": 3}, "'name' must be a string"),
    ("tool-calls-not-list", 3, {"role": "assistant", "content": None, "tool_calls": "c1"}, "'tool_calls'"),
    ("not-a-message", 3, 42, "got int"),
]


@pytest.mark.parametrize("exchange", EXCHANGES, ids=EXCHANGE_IDS)
@pytest.mark.parametrize(("index", "bad", "reason"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
async def test_a_malformed_message_is_named_and_nothing_is_stored(
    make: Callable[..., MemorySystem],
    ctx: MemoryContext,
    exchange: Callable[[], list[Any]],
    index: int,
    bad: Any,
    reason: str,
) -> None:
    mem = make()
    before = _rows(mem)
    messages = exchange()
    messages[index] = bad

    with pytest.raises(InvalidArgumentError, match=f"message {index}") as raised:
        await mem.capture(ctx, messages)

    assert reason in str(raised.value)
    assert _rows(mem) == before == dict.fromkeys(TABLES, 0)


async def test_a_malformed_message_in_a_later_turn_of_a_batch_stores_nothing(
    make: Callable[..., MemorySystem], ctx: MemoryContext
) -> None:
    mem = make()
    second = dict_exchange()
    second[4] = {"role": "tool", "content": {"not": "text"}}

    with pytest.raises(InvalidArgumentError, match="message 4"):
        await mem.capture_from_items(ctx, [litellm_exchange(), second])

    assert _rows(mem) == dict.fromkeys(TABLES, 0)


async def test_loose_litellm_messages_split_into_turns_at_each_user_message(
    make: Callable[..., MemorySystem], ctx: MemoryContext
) -> None:
    mem = make()

    results = await mem.capture_from_items(ctx, [*litellm_exchange()[1:], _litellm(role="user", content="Thanks!")])

    assert [[m.content for m in r.turn.messages] for r in results] == [[QUESTION, ANSWER], ["Thanks!"]]


# -- the keep-roles policy ----------------------------------------------------------------------


@pytest.mark.parametrize("exchange", EXCHANGES, ids=EXCHANGE_IDS)
async def test_kept_tool_messages_never_bring_back_memory_results(
    make: Callable[..., MemorySystem], ctx: MemoryContext, exchange: Callable[[], list[Any]]
) -> None:
    mem = make(keep_roles={"user", "assistant", "tool"})

    await mem.capture(ctx, exchange())

    (turn,) = mem.store.query("turns", Where(eq={"user_id": ctx.user_id}))
    assert [m.role for m in turn.messages] == ["user", "tool", "assistant"]
    assert WEATHER in turn.text
    assert RECALLED not in turn.text and "Moni loves citrus." not in turn.text


async def test_memory_results_stay_out_of_later_recalls(make: Callable[..., MemorySystem], ctx: MemoryContext) -> None:
    mem = make(keep_roles={"user", "assistant", "tool"})
    await mem.capture(ctx, litellm_exchange())
    later = ctx.model_copy(update={"session_id": "s-2"})

    found = await mem.recall(later, "Moni loves citrus", tiers=["episodic"])

    assert all('"ok": true' not in item.text for item in found)


@pytest.mark.parametrize(
    ("keep", "roles"),
    [
        ({"user", "assistant"}, ["user", "assistant"]),
        ({"user"}, ["user"]),
        ({"user", "assistant", "system"}, ["system", "user", "assistant"]),
        ({"user", "assistant", "developer"}, ["system", "user", "assistant"]),
    ],
    ids=["default", "user-only", "system", "developer-stored-as-system"],
)
def test_keep_roles_choose_what_the_log_keeps(keep: set[str], roles: list[str]) -> None:
    messages = [
        {"role": "system", "content": "S"},
        {"role": "developer", "content": "D"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "A"},
    ]
    kept = normalize_messages(messages, keep_roles=keep)
    assert [m.role for m in kept] == roles
    if "developer" in keep:
        assert [m.content for m in kept if m.role == "system"] == ["D"]


async def test_a_kept_developer_message_survives_a_batch(make: Callable[..., MemorySystem], ctx: MemoryContext) -> None:
    mem = make(keep_roles={"user", "assistant", "developer"})

    (result,) = await mem.capture_from_items(ctx, [dict_exchange()])

    assert [m.role for m in result.turn.messages] == ["system", "user", "assistant"]


@pytest.mark.parametrize(
    "keep", [["robot"], [], "user", ["user", "narrator"]], ids=["unknown", "empty", "string", "one-unknown"]
)
def test_invalid_keep_roles_are_refused(store_path: str, keep: Any) -> None:
    with pytest.raises(ConfigurationError, match="keep_roles"):
        system(model="rules", store=store_path, embedder=HashingEmbedder(256), keep_roles=keep)


# -- shapes -------------------------------------------------------------------------------------


@dataclass
class SdkMessage:
    """An object with role/content attributes and no model_dump (an SDK type of some other client)."""

    role: str
    content: Any
    name: str | None = None


ALL_ROLES = {"system", "developer", "user", "assistant", "tool"}
TWO_TEXT_PARTS = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
OUTPUT_TEXT = [{"type": "output_text", "text": "ok"}]
IMAGE_AND_TEXT = [{"type": "image_url", "image_url": {}}, {"type": "text", "text": "look"}]
SHAPES: list[tuple[str, Any, tuple[str, str, str | None]]] = [
    ("dict", {"role": "user", "content": "hi"}, ("user", "hi", None)),
    ("name", {"role": "user", "content": "hi", "name": "Caroline"}, ("user", "hi", "Caroline")),
    ("parts", {"role": "user", "content": TWO_TEXT_PARTS}, ("user", "a\nb", None)),
    ("image-part-ignored", {"role": "user", "content": IMAGE_AND_TEXT}, ("user", "look", None)),
    ("responses-parts", {"role": "assistant", "content": OUTPUT_TEXT}, ("assistant", "ok", None)),
    ("litellm", _litellm(role="assistant", content="ok"), ("assistant", "ok", None)),
    ("attributes", SdkMessage(role="user", content="hi", name="Mel"), ("user", "hi", "Mel")),
    ("record", Message(role="user", content="hi"), ("user", "hi", None)),
    ("function-role", {"role": "function", "name": "lookup", "content": "x"}, ("tool", "x", "lookup")),
]


@pytest.mark.parametrize(("message", "expected"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_message_shapes(message: Any, expected: tuple[str, str, str | None]) -> None:
    (kept,) = normalize_messages([message], keep_roles=ALL_ROLES)
    assert (kept.role, kept.content, kept.name) == expected


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([], "non-empty list"),
        ("hello", "non-empty list"),
        ({"role": "user", "content": "hi"}, "non-empty list"),
        ([{"role": "assistant", "content": None, "tool_calls": []}], "no text to capture"),
        ([{"role": "system", "content": "only instructions"}], "no text to capture"),
        ([{"role": "user", "content": "   "}], "no text to capture"),
        ([{"content": "hi"}], "message 0: a message needs 'role'"),
        ([{"role": "user", "content": "hi"}, {"role": None, "content": "hi"}], "message 1: a message needs 'role'"),
    ],
    ids=["empty", "string", "one-dict", "only-tool-calls", "only-system", "blank", "no-role", "role-none"],
)
def test_a_bad_transcript_is_refused(messages: Any, reason: str) -> None:
    with pytest.raises(InvalidArgumentError, match=reason):
        normalize_messages(messages)


def test_normalizing_does_not_mutate_the_input() -> None:
    messages = dict_exchange()
    snapshot = json.dumps(messages, sort_keys=True)
    normalize_messages(messages)
    assert json.dumps(messages, sort_keys=True) == snapshot
