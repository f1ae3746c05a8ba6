"""Test doubles shipped with the library: fake models through litellm, a hashing embedder, a frozen clock.

A fake model is reached through real litellm (``system(model=fake.model)``). Its function is called with
the messages and the :class:`StageCall` (the stage, its typed input and the output schema), as
pydantic-ai's ``FunctionModel`` function receives ``AgentInfo``, so it never parses the prompt to know what
is asked::

    def answer(messages: ChatMessages, call: StageCall[Any, Any]) -> dict[str, object]:
        if call.stage is observe.STAGE:
            return {"observations": []}
        ...

    fake = FunctionModel(answer)

An import observes a window of consecutive turns per call (``observe_window.STAGE``); a FunctionModel answers
such a call by asking its function once per turn, as the ``observe`` call of that turn alone, so a fake
written for ``observe`` answers imports too (``split_windows=False`` hands the function the window call).

A fake may have a context window: ``FunctionModel(answer, context_window=2000)`` tells litellm the model
takes 2,000 input tokens and refuses any larger prompt with litellm's ``ContextWindowExceededError``, as a
provider does; every request records its size (:attr:`RecordedCall.input_tokens`).

Retrieval keys from a fixed lexicon: ``FunctionModel(Lexicon.load(path).attach(answer))`` gives every
observation and every added or updated fact the broader terms of its words (``peanuts`` -> ``nut``,
``food``) where ``answer`` gave none, so the effect of the keys is measured apart from any model.

``TableName`` and :class:`Where`, the store's table names and filter, for tests that read a
:class:`~tiermem.Store` directly:
``store.query("facts", Where(eq={"user_id": "u1"}))``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tiermem.prompts import observe, observe_window

from ._embed import HashingEmbedder
from ._errors import ModelError
from ._filters import Where
from ._llm import allow_real_requests, context_window_exceeded, install_fake_provider, message_tokens
from ._retrieval_keys import MAX_KEYS
from ._stage import ChatMessages, StageCall
from ._store import TableName

__all__ = [
    "Answer",
    "ChatMessages",
    "FrozenClock",
    "FunctionModel",
    "HashingEmbedder",
    "Lexicon",
    "RecordedCall",
    "Reply",
    "ScriptedModel",
    "StageCall",
    "TableName",
    "Where",
    "forbid_real_model_requests",
]

_counter = itertools.count()


def forbid_real_model_requests(forbid: bool = True) -> None:
    """Make every call to a real provider raise (fakes keep working). Call it in conftest.py."""
    allow_real_requests(not forbid)


class FrozenClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = (start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)).astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def set(self, when: datetime) -> None:
        self._now = when if when.tzinfo else when.replace(tzinfo=UTC)

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        self._now += delta if delta is not None else timedelta(**kwargs)
        return self._now


@dataclass(frozen=True, kw_only=True)
class RecordedCall:
    """One request a fake model served."""

    model: str
    messages: ChatMessages
    call: StageCall[Any, Any] | None = None
    """The stage call, when the request came from a stage (always, through the pipelines)."""
    input_tokens: int = 0
    """The prompt's size in tokens, by litellm's counter."""
    refused: bool = False
    """Refused for exceeding the fake's context window."""

    @property
    def stage_name(self) -> str | None:
        """The stage's name, or None."""
        return None if self.call is None else self.call.stage.name

    @property
    def prompt(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages)


Answer = str | Mapping[str, object]
"""A fake model's answer: a JSON string, or the JSON object as a mapping."""

Reply = Callable[[ChatMessages, StageCall[Any, Any]], "Answer | Awaitable[Answer]"]
"""A fake model's function: (messages, stage call) -> the :data:`Answer` (sync or async)."""


@dataclass
class FunctionModel:
    """A model whose reply is computed by a Python function of the messages and the stage call; reachable via
    litellm as :attr:`model`."""

    function: Reply
    latency: float = 0.0
    name: str = field(default_factory=lambda: f"function-{next(_counter)}")
    calls: list[RecordedCall] = field(default_factory=list)
    context_window: int | None = None
    """Input tokens the fake takes; a larger prompt is refused with litellm's ContextWindowExceededError."""
    declared_window: int | None = None
    """The window litellm is told (default: :attr:`context_window`), to play a provider that takes less than
    litellm believes."""
    split_windows: bool = True
    """Answer an ``observe_window`` call (an import observing several turns in one call) by calling
    :attr:`function` once per turn of the window as the ``observe`` call that turn alone would be, so a
    function written for ``observe`` answers imports too; the request is still one call. False: the function
    gets the window call itself."""

    def __post_init__(self) -> None:
        declared = self.declared_window if self.declared_window is not None else self.context_window
        self.model = install_fake_provider(self.name, self._serve, context_window=declared)

    async def _serve(self, model: str, messages: ChatMessages, call: StageCall[Any, Any] | None) -> str:
        # Counted under the name the library counts under (litellm hands the fake the name without its
        # provider prefix; both pick the same tokenizer): the pre-send window check's count is reused.
        size = message_tokens(self.model, messages)
        refused = self.context_window is not None and size > self.context_window
        self.calls.append(
            RecordedCall(model=model, messages=list(messages), call=call, input_tokens=size, refused=refused)
        )
        if refused:
            assert self.context_window is not None
            raise context_window_exceeded(model, tokens=size, window=self.context_window)
        if self.latency:
            await asyncio.sleep(self.latency)
        reply = await self._reply(list(messages), call)
        return reply if isinstance(reply, str) else json.dumps(reply)

    async def _reply(self, messages: ChatMessages, call: StageCall[Any, Any] | None) -> Answer:
        if call is None:
            raise ModelError(f"{self.name}: a FunctionModel answers stage calls only (LLM.structured without call=)")
        if self.split_windows and call.stage is observe_window.STAGE:
            return await self._window_reply(call.inputs)
        return await self._call(messages, call)

    async def _call(self, messages: ChatMessages, call: StageCall[Any, Any]) -> Answer:
        reply = self.function(messages, call)
        if asyncio.iscoroutine(reply) or isinstance(reply, Awaitable):
            reply = await reply
        return reply

    async def _window_reply(self, inputs: observe_window.Input) -> Answer:
        """The window's answer from the function's answer to each turn's ``observe`` call, each observation
        numbered by its turn. A turn's answer that is not observations is the window's answer (it fails as
        the turn's would)."""
        found: list[object] = []
        for number, turn in enumerate(inputs.turns, start=1):
            alone = observe.Input(
                messages=turn.messages, user_names=inputs.user_names, known_subjects=inputs.known_subjects, now=turn.now
            )
            reply = await self._call(observe.STAGE.render(alone), observe.STAGE.call(alone))
            try:
                data = json.loads(reply) if isinstance(reply, str) else reply
            except ValueError:
                return reply
            said = data.get("observations", []) if isinstance(data, dict) else None
            if not isinstance(said, list):
                return reply
            found += [{**obs, "turn": number} if isinstance(obs, dict) else obs for obs in said]
        return {"observations": found}


class ScriptedModel(FunctionModel):
    """Replies from a script, in order, whatever it is asked (an ``observe_window`` call gets the next reply,
    unsplit); raises when the script runs out. Records every call."""

    def __init__(self, replies: Sequence[Answer | Exception], *, name: str | None = None) -> None:
        self._replies = list(replies)
        super().__init__(function=lambda messages, call: self._next(), name=name or f"scripted-{next(_counter)}")

    async def _reply(self, messages: ChatMessages, call: StageCall[Any, Any] | None) -> Answer:
        return self._next()

    def _next(self) -> Answer:
        if not self._replies:
            raise ModelError("scripted model has no replies left")
        reply = self._replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    @property
    def remaining(self) -> int:
        return len(self._replies)


_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True, kw_only=True)
class Lexicon:
    """A fixed map of a word to broader terms ("peanut" -> "nut", "food"): the retrieval keys a fake
    model gives, the same for the same text."""

    terms: Mapping[str, Sequence[str]]

    @classmethod
    def load(cls, path: str | Path) -> Lexicon:
        """A lexicon from a JSON file: ``{"terms": {"peanut": ["nut", "food"], ...}}``."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(terms={str(k).lower(): [str(t) for t in v] for k, v in data["terms"].items()})

    def keys(self, text: str, *, limit: int = MAX_KEYS) -> list[str]:
        """The broader terms of ``text``'s words, none already in the text: each word's first term, then
        each word's second, and so on, up to ``limit``."""
        said = _WORD.findall(text.lower())
        present = set(said)
        found = [t for word in dict.fromkeys(said) if (t := self._terms_of(word))]
        keys: dict[str, None] = {}
        for rank in range(max((len(t) for t in found), default=0)):
            for terms in found:
                key = terms[rank] if rank < len(terms) else None
                if key and not set(key.split()) <= present:
                    keys[key] = None
        return list(keys)[:limit]

    def _terms_of(self, word: str) -> Sequence[str]:
        """A word's terms, also by a plural's singular ("peanuts", "berries", "boxes")."""
        for form in (word, word[:-3] + "y" if word.endswith("ies") else "", word[:-2], word[:-1]):
            if len(form) > 2 and form in self.terms and (form == word or word.endswith("s")):
                return self.terms[form]
        return ()

    def attach(self, function: Reply) -> Reply:
        """``function`` with keys added to every observation and added or updated fact that has none."""

        def keyed(reply: Answer) -> Answer:
            data = json.loads(reply) if isinstance(reply, str) else reply
            for part in ("observations", "operations"):
                items = data.get(part, ())
                for item in items if isinstance(items, list | tuple) else ():
                    text = item.get("text") if isinstance(item, dict) else None
                    if text and not item.get("keys") and item.get("op", "add") in {"add", "update"}:
                        item["keys"] = self.keys(text)
            return data

        def answer(messages: ChatMessages, call: StageCall[Any, Any]) -> Answer | Awaitable[Answer]:
            reply = function(messages, call)
            if isinstance(reply, str | Mapping):
                return keyed(reply)

            async def later() -> Answer:
                return keyed(await reply)

            return later()

        return answer
