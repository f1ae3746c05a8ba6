"""The LLM boundary's per-call caches answer what a fresh computation answers: output schemas (in the
prompt and as the response format) and litellm's token counts, the fake's count included."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import litellm
import pytest
from pydantic import BaseModel

from tests.fakes import default_reply
from tiermem import LLM
from tiermem.memory._llm import _client as _llm
from tiermem.memory._llm import _structured
from tiermem.memory._llm import _tokens as _llm_tokens
from tiermem.memory._llm._client import message_tokens
from tiermem.memory.testing import FunctionModel
from tiermem.pipelines import LLMStages
from tiermem.prompts import STAGES, consolidate, observe

OUTPUTS: list[type[BaseModel]] = list(
    dict.fromkeys([*(s.output for s in STAGES), consolidate.Output, consolidate.FactsOutput])
)
TEXTS = ["", "hello", "Hey Mel! ünïcödé 漢字 🎉", "x " * 3000, "y" * (_llm_tokens._CACHED_TEXT_CHARS + 10)]


def _fresh_schema(output: type[BaseModel]) -> str:
    return json.dumps(output.model_json_schema(), separators=(",", ":"))


@pytest.mark.parametrize("output", OUTPUTS, ids=lambda o: f"{o.__module__.rsplit('.', 1)[-1]}.{o.__name__}")
def test_cached_schema_equals_the_freshly_built_one(output: type[BaseModel]) -> None:
    for _ in range(2):  # built, then cached
        assert _structured.schema_json(output) == _fresh_schema(output)
        assert _structured.schema_prompt(output).endswith("\n" + _fresh_schema(output))


def test_a_rebuilt_model_gets_its_schema_built_afresh() -> None:
    class Later(BaseModel):
        value: int

    first = _structured.schema_json(Later)
    Later.model_rebuild(force=True)  # a new core schema: the cached text is not trusted
    assert _structured._SCHEMAS[Later][0] is not Later.__pydantic_core_schema__
    assert _structured.schema_json(Later) == first == _fresh_schema(Later)
    assert _structured._SCHEMAS[Later][0] is Later.__pydantic_core_schema__


def test_native_response_format_is_a_fresh_copy_of_the_schema() -> None:
    llm = LLM("gpt-4o-mini")  # litellm says it supports JSON schema: the schema goes as the response format
    first, in_prompt = llm._response_format(observe.Output)
    assert not in_prompt
    schema = first["json_schema"]
    assert isinstance(schema, dict)
    assert schema["schema"] == observe.Output.model_json_schema()
    schema["schema"]["properties"].clear()  # a provider transform rewriting it in place
    second, _ = llm._response_format(observe.Output)
    again = second["json_schema"]
    assert isinstance(again, dict)
    assert again["schema"] == observe.Output.model_json_schema()


def test_input_budget_is_unchanged_by_the_caches() -> None:
    llm = LLM("tiermem-fake/budget-check", max_input_tokens=128_000)
    for output in OUTPUTS:
        schema_tokens = litellm.token_counter(model=llm.model, text=_structured.schema_prompt(output))
        expected = max(int(128_000 * _llm.INPUT_SHARE) - schema_tokens, _llm.MIN_INPUT_BUDGET)
        assert llm.input_budget(output) == expected
        assert llm.input_budget(output) == expected


@pytest.mark.parametrize("model", ["tiermem-fake/function-0", "gpt-4o-mini", "claude-2"])
def test_cached_counts_equal_litellms(model: str) -> None:
    for text in TEXTS:
        for _ in range(2):
            assert _llm_tokens.text_tokens(model, text) == litellm.token_counter(model=model, text=text)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": TEXTS[3]},
        {"role": "user", "name": "Caroline", "content": TEXTS[2]},
    ]
    for _ in range(2):
        assert message_tokens(model, messages) == litellm.token_counter(model=model, messages=messages)
    parts: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "hi there"}]}]
    assert message_tokens(model, parts) == litellm.token_counter(model=model, messages=parts)  # counted, not cached


def test_counts_follow_litellms_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = [{"role": "user", "content": "count me once, then not at all"}]
    assert message_tokens("gpt-4o-mini", messages) > 0
    assert _llm_tokens.text_tokens("gpt-4o-mini", messages[0]["content"]) > 0
    monkeypatch.setattr(litellm, "disable_token_counter", True)
    assert message_tokens("gpt-4o-mini", messages) == 0
    assert _llm_tokens.text_tokens("gpt-4o-mini", messages[0]["content"]) == 0


async def test_the_fake_records_the_size_the_library_checked() -> None:
    fake = FunctionModel(lambda messages, call: default_reply(call), context_window=100_000)
    inputs = observe.Input(messages=[], user_names=["Sam"], now=datetime(2026, 3, 1, tzinfo=UTC))
    await LLMStages(LLM(fake.model)).run(observe.STAGE, inputs)
    (call,) = fake.calls
    assert call.input_tokens == litellm.token_counter(model=fake.model, messages=call.messages)
    # the name litellm hands the fake, without its provider prefix, picks the same tokenizer
    assert call.input_tokens == litellm.token_counter(model=call.model, messages=call.messages)
