"""Input budgets: how many prompt tokens a stage may send, and cutting text and lists to fit them.

A stage model says what one stage's rendered messages may fill (:func:`input_budget`): an LLM from
litellm's context window for the model (a share of it, less the output schema), the rules model
without limit. The pipelines fit their inputs below it (split a turn, summarise a session in parts,
cut a consolidation batch, digest or compact facts in parts); :func:`merged` is the one recipe for
texts written in parts and merged, round after round, until one call holds them all. :func:`fitted`
runs a stage's fitting once more with half the budget when the provider still says the prompt is too
long, so no call resends an oversized payload.

Cutting never counts more than it keeps: a megabyte is cut from its two ends, and the middle, which
is left out, is never tokenized.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel

from tiermem.memory._errors import ModelContextWindowError
from tiermem.memory._stage import ChatMessages, Stage

__all__ = ["FALLBACK_BUDGET", "MIN_ROOM", "PART_SHARE", "Budget", "fitted", "input_budget", "merged"]

T = TypeVar("T")
InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT", bound=BaseModel)

FALLBACK_BUDGET = 8192
"""Tokens assumed for a model that knows no budget once its provider refused a prompt as too long."""
MIN_ROOM = 64
"""Fewer tokens than this left for the content being fitted, and a stage gives up (ModelContextWindowError)."""
PART_SHARE = 3
"""A part's text takes at most a third of a call's room: each round of :func:`merged` at least halves the parts."""
_MESSAGE_FRAMING = 4  # litellm counts a few tokens of framing per chat message
_CHARS_PER_TOKEN = 4  # a first guess only: every cut is checked with the real counter
_OMITTED = " [...] "


def estimate_tokens(text: str) -> int:
    """A counter for budgets without a tokenizer: at least one token per three bytes of UTF-8."""
    return len(text.encode("utf-8")) // 3 + 1


@dataclass(frozen=True, kw_only=True)
class Budget:
    """Prompt tokens one call may use (``None``: no limit) and how to count them."""

    tokens: int | None
    count: Callable[[str], int] = field(default=estimate_tokens, compare=False)

    @property
    def limited(self) -> bool:
        return self.tokens is not None

    def halved(self) -> Budget:
        """Half this budget, after the provider refused a prompt as too long (no limit: :data:`FALLBACK_BUDGET`)."""
        tokens = FALLBACK_BUDGET if self.tokens is None else max(self.tokens // 2, 1)
        return Budget(tokens=tokens, count=self.count)

    def messages_tokens(self, messages: ChatMessages) -> int:
        """Tokens of chat messages: their contents plus litellm's framing."""
        return sum(self.count(m.get("content", "")) + _MESSAGE_FRAMING for m in messages) + 3

    def fits(self, messages: ChatMessages) -> bool:
        """Whether ``messages`` may be sent whole."""
        if self.tokens is None:
            return True
        size = sum(len(m.get("content", "")) for m in messages)
        if size > self.tokens * 64:  # no tokenizer packs 64 characters a token: do not count a megabyte to say no
            return False
        return self.messages_tokens(messages) <= self.tokens

    def head(self, text: str, tokens: int) -> str:
        """The longest start of ``text`` (near enough, cut at a space when one is close) within ``tokens``."""
        return self._cut(text, tokens, from_end=False)

    def tail(self, text: str, tokens: int) -> str:
        """The longest end of ``text`` within ``tokens``, as :meth:`head`."""
        return self._cut(text, tokens, from_end=True)

    def clip(self, text: str, tokens: int) -> str:
        """``text`` if it fits ``tokens``, else its start and end around a ``[...]`` mark."""
        if self.tokens is None or self.within(text, tokens):
            return text
        half = max((tokens - self.count(_OMITTED)) // 2, 1)
        return self.head(text, half) + _OMITTED + self.tail(text, half)

    def split(self, text: str, tokens: int, *, limit: int) -> list[str]:
        """``text`` in consecutive pieces of at most ``tokens`` each, at most ``limit`` pieces.

        When more would be needed, the pieces are the start and the end of the text, and the first
        piece after the gap begins with a ``[...]`` mark.
        """
        if self.tokens is None or self.within(text, tokens):
            return [text]
        pieces: list[str] = []
        start = 0
        while start < len(text) and len(pieces) < limit:
            piece = self.head(text[start:], tokens)
            pieces.append(piece)
            start += len(piece)
        if start >= len(text):
            return pieces
        pieces = pieces[: limit - limit // 2]
        start = sum(len(p) for p in pieces)
        tail: list[str] = []
        end = len(text)
        mark = self.count(_OMITTED)
        while len(tail) < limit // 2 and end > start:
            last = len(tail) == limit // 2 - 1
            piece = self.tail(text[start:end], tokens - mark if last else tokens)
            tail.insert(0, piece)
            end -= len(piece)
        if end > start and tail:
            tail[0] = _OMITTED.lstrip() + tail[0]
        return pieces + tail

    def pack(self, costs: Sequence[int], room: int) -> list[list[int]]:
        """Indexes of consecutive items grouped so each group's costs sum to at most ``room`` (an item
        costing more than ``room`` goes alone)."""
        groups: list[list[int]] = []
        used = 0
        for index, cost in enumerate(costs):
            if not groups or used + cost > room:
                groups.append([])
                used = 0
            groups[-1].append(index)
            used += cost
        return groups

    def within(self, text: str, tokens: int) -> bool:
        """Whether ``text`` has at most ``tokens`` tokens (a text of more than 64 characters a token has not)."""
        return len(text) <= tokens * 64 and self.count(text) <= tokens

    def room(self, stage: Stage[InputT, OutputT], base: ChatMessages, *, slack: int = 16) -> int:
        """Tokens left of the budget beside ``base`` (the stage's messages without the part being fitted).

        Raises ModelContextWindowError when too little is left to fit anything.
        """
        assert self.tokens is not None
        left = self.tokens - self.messages_tokens(base) - slack
        if left < MIN_ROOM:
            raise ModelContextWindowError(
                f"{stage.name}: the prompt's fixed parts leave {left} of {self.tokens} input tokens; too few to fit",
                stage=stage.name,
            )
        return left

    def _cut(self, text: str, tokens: int, *, from_end: bool) -> str:
        tokens = max(tokens, 1)
        guess = min(len(text), tokens * _CHARS_PER_TOKEN)
        best = ""
        for _ in range(8):  # each step rescales the guess by the measured ratio: two or three steps usually do
            piece = text[len(text) - guess :] if from_end else text[:guess]
            used = self.count(piece)
            if used <= tokens:
                best = piece if len(piece) > len(best) else best
                if guess >= len(text) or used >= tokens * 0.9:
                    break
                guess = min(len(text), max(guess + 1, int(guess * tokens / max(used, 1) * 0.97)))
            else:
                guess = max(1, min(guess - 1, int(guess * tokens / used * 0.95)))
        if not best:
            best = text[-1:] if from_end else text[:1]  # one character: progress is guaranteed
        return best if len(best) == len(text) else _at_space(best, from_end=from_end)


def _at_space(piece: str, *, from_end: bool) -> str:
    """``piece`` trimmed to a word boundary when one lies in its last (first) tenth."""
    window = max(len(piece) // 10, 1)
    if from_end:
        cut = piece.find(" ", 0, window)
        return piece[cut + 1 :] if 0 <= cut < len(piece) - 1 else piece
    cut = piece.rfind(" ", len(piece) - window)
    return piece[: cut + 1] if cut > 0 else piece


def input_budget(model: object, stage: Stage[InputT, OutputT], inputs: InputT | None = None) -> Budget:
    """What ``stage``'s messages (for ``inputs``) may fill on ``model``: its ``input_budget(stage, inputs)`` if
    it has one, else no limit."""
    method = getattr(model, "input_budget", None)
    if callable(method):
        budget = method(stage, inputs)
        if isinstance(budget, Budget):
            return budget
    return Budget(tokens=None)


async def fitted(
    model: object, stage: Stage[InputT, OutputT], run: Callable[[Budget], Awaitable[T]], inputs: InputT | None = None
) -> T:
    """``run(budget)``; when the provider still refuses a prompt as too long, once more with half the budget."""
    budget = input_budget(model, stage, inputs)
    try:
        return await run(budget)
    except ModelContextWindowError:
        return await run(budget.halved())


async def merged(
    budget: Budget,
    stage: Stage[InputT, OutputT],
    texts: Sequence[str],
    *,
    make: Callable[[list[str], bool], InputT],
    ask: Callable[[InputT], Awaitable[OutputT]],
    text_of: Callable[[OutputT], str],
) -> list[OutputT]:
    """``texts`` (each written from a part of a larger input) merged into one by ``stage``, within ``budget``.

    ``make(parts, final)`` is the stage's input for some part texts (``final``: the call that writes the
    whole). When they do not fit one call, each is clipped to a :data:`PART_SHARE` of the room and
    consecutive ones are merged in groups that fit, in as many rounds as it takes. Returns every call's
    output, the whole's last.
    """
    outputs: list[OutputT] = []
    parts = list(texts)
    while True:
        whole = make(parts, True)
        if budget.fits(stage.render(whole)):
            return [*outputs, await ask(whole)]
        room = budget.room(stage, stage.render(make([], False)))
        parts = [budget.clip(t, room // PART_SHARE) for t in parts]
        whole = make(parts, True)
        # One part left, clipped to a third of the room, fits beside the fixed parts (the caller clips the
        # final call's own extras, such as a previous text, to a third as well).
        if len(parts) == 1 or budget.fits(stage.render(whole)):
            return [*outputs, await ask(whole)]
        groups = budget.pack([budget.count(t) + _MESSAGE_FRAMING for t in parts], room)
        round_ = [await ask(make([parts[i] for i in group], False)) for group in groups]
        outputs += round_
        parts = [text_of(o) for o in round_]
