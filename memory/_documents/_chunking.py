"""Chunking: a parsed document cut into passages on its structure, each within a token budget.

A passage never crosses a section or a page: structure is where a reader would start again. Within
one, whole blocks (paragraphs) are packed while they fit ``max_tokens``; a block too large alone is cut
at sentence ends, a sentence too large at word boundaries, and a word too large (base64, a minified
script) into runs of characters. When a passage closes because the next
unit does not fit, the next one starts with the last units of it that fit ``overlap`` tokens, so a
sentence cut from its context is found with it. Tokens are counted by the counter given (the
capability's, the one the context block uses), per unit, so a long document is counted once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from .._errors import InvalidArgumentError
from ._parsed import Block, Parsed

__all__ = ["Passage", "checked_budget", "chunked", "chunking_recipe"]

_SENTENCE = re.compile(r"[^.!?\n]*(?:[.!?]+[\"')\]]*|\n|$)")
_WORD = re.compile(r"\S+")
_RECIPE_VERSION = 2  # bump when the same document and budget would be cut differently


@dataclass(frozen=True, kw_only=True)
class Passage:
    """A chunk before it is stored: its text (a slice of the document's), its offsets, section and page."""

    text: str
    section: str
    page: int | None
    start: int
    end: int


@dataclass(frozen=True, kw_only=True, slots=True)
class _Unit:
    start: int
    end: int
    tokens: int
    block: Block


def chunking_recipe(max_tokens: int, overlap: int) -> str:
    """Names how a document is cut: part of its id, so the same bytes cut another way are another version."""
    return f"v{_RECIPE_VERSION}:{max_tokens}:{overlap}"


def checked_budget(max_tokens: object, overlap: object) -> tuple[int, int]:
    """The chunk budget, checked: at least 16 tokens a chunk, an overlap below half of it."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 16:
        raise InvalidArgumentError(f"max_tokens must be an int of at least 16, not {max_tokens!r}")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap <= max_tokens // 2:
        raise InvalidArgumentError(f"overlap must be an int from 0 to max_tokens // 2, not {overlap!r}")
    return max_tokens, overlap


def chunked(parsed: Parsed, *, max_tokens: int, overlap: int, count: Callable[[str], int]) -> list[Passage]:
    """``parsed`` as passages in order, each at most ``max_tokens`` by ``count``."""
    text = parsed.text
    units = [u for block in parsed.blocks for u in _units(text, block, max_tokens, count)]
    passages: list[Passage] = []
    current: list[_Unit] = []

    def close() -> None:
        first, last = current[0], current[-1]
        block = first.block
        passages.append(
            Passage(text=text[first.start : last.end], section=block.section, page=block.page,
                    start=first.start, end=last.end)
        )  # fmt: skip

    spent = 0  # of ``current``, the space between its units counted too (a code block's indentation)
    for unit in units:
        if current and (unit.block.section, unit.block.page) != (current[0].block.section, current[0].block.page):
            close()
            current, spent = [], 0
        elif current and spent + _gap(text, current[-1], unit, count) + unit.tokens > max_tokens:
            close()
            current = _tail(current, overlap, room=max_tokens - unit.tokens)
            spent = sum(u.tokens for u in current) + sum(_gap(text, a, b, count) for a, b in pairwise(current))
            if current and spent + _gap(text, current[-1], unit, count) + unit.tokens > max_tokens:
                current, spent = [], 0
        spent += (_gap(text, current[-1], unit, count) if current else 0) + unit.tokens
        current.append(unit)
    if current:
        close()
    return passages


def _gap(text: str, before: _Unit, after: _Unit, count: Callable[[str], int]) -> int:
    """The tokens of what stands between two units of a passage (a blank line; a run of spaces)."""
    return count(text[before.end : after.start]) if after.start > before.end else 0


def _tail(units: Sequence[_Unit], overlap: int, *, room: int) -> list[_Unit]:
    """The last units of a closed passage that fit ``overlap`` (and the room the next unit leaves), never all of it."""
    kept: list[_Unit] = []
    spent = 0
    for unit in reversed(units[1:]):
        if spent + unit.tokens > min(overlap, room):
            break
        kept.insert(0, unit)
        spent += unit.tokens
    return kept


def _units(text: str, block: Block, max_tokens: int, count: Callable[[str], int]) -> list[_Unit]:
    """A block as one unit if it fits, else its sentences, a sentence too large cut into runs of words."""
    tokens = count(block.text)
    if tokens <= max_tokens:
        return [_Unit(start=block.start, end=block.end, tokens=tokens, block=block)]
    units: list[_Unit] = []
    for sentence in _SENTENCE.finditer(text, block.start, block.end):
        span = _stripped(text, sentence.start(), sentence.end())
        if span is None:
            continue
        size = count(text[span[0] : span[1]])
        if size <= max_tokens:
            units.append(_Unit(start=span[0], end=span[1], tokens=size, block=block))
        else:
            units += _word_runs(text, span, block, max_tokens, count)
    return units


def _word_runs(
    text: str, span: tuple[int, int], block: Block, max_tokens: int, count: Callable[[str], int]
) -> list[_Unit]:
    """A sentence longer than the budget, as runs of whole words that fit it."""
    runs: list[_Unit] = []
    start = end = -1
    size = 0
    for word in _WORD.finditer(text, span[0], span[1]):
        if count(word.group()) > max_tokens:  # a "word" no budget holds (base64, a minified script): cut it
            if start >= 0:
                runs.append(_Unit(start=start, end=end, tokens=size, block=block))
                start, size = -1, 0
            runs += _pieces(text, (word.start(), word.end()), block, max_tokens, count)
            continue
        cost = count(text[end : word.end()] if start >= 0 else word.group())  # with the space before it
        if start >= 0 and size + cost > max_tokens:
            runs.append(_Unit(start=start, end=end, tokens=size, block=block))
            start, size = -1, 0
            cost = count(word.group())
        if start < 0:
            start = word.start()
        end, size = word.end(), size + cost
    if start >= 0:
        runs.append(_Unit(start=start, end=end, tokens=size, block=block))
    return runs


def _pieces(
    text: str, span: tuple[int, int], block: Block, max_tokens: int, count: Callable[[str], int]
) -> list[_Unit]:
    """A word longer than the budget, as the longest runs of characters that fit it (at least one each)."""
    pieces: list[_Unit] = []
    start, end = span
    while start < end:
        # The largest stop whose run fits, by bisection on the counter (no tokenizer is assumed); the
        # search is bounded so that a counter of many characters per token costs no more than 64 each.
        low, high = start + 1, min(end, start + 64 * max_tokens)
        while low < high:
            middle = (low + high + 1) // 2
            if count(text[start:middle]) <= max_tokens:
                low = middle
            else:
                high = middle - 1
        pieces.append(_Unit(start=start, end=low, tokens=count(text[start:low]), block=block))
        start = low
    return pieces


def _stripped(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``[start, end)`` without the white space at either end; None if nothing else is left."""
    span = text[start:end]  # stripped by str's own methods: a run of spaces can be megabytes long
    kept = span.strip()
    if not kept:
        return None
    start += len(span) - len(span.lstrip())
    return start, start + len(kept)
