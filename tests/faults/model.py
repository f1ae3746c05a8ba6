"""A fake model for fault injection: it carries each turn's token through every stage, fails on purpose
and logs every request it serves.

Reached through real litellm (:class:`~tiermem.memory.testing.FunctionModel`). Every turn a workload
captures says one unique token (``tk`` and 10 hex digits). The answers carry the tokens along, so a census
can follow each turn through every tier:

- observe: one observation per token of the turn, ``"The user said <token>."``;
- encode_episode: a summary listing the tokens of the session's observations (or of its part summaries),
  the first 250 of them (a summary is capped at 4,000 characters);
- consolidate: one fact per token of the batch's episodes and observations, with the observation's text, so
  the fact's provenance is the turn (tokens are packed several to a fact only past the 100-operation cap);
- redact (``forget``): the text without the tokens of the forgotten memories.

Faults: a request fails with probability ``failure_rate`` (a connection reset, a 503 or a timeout, in
turn) or answers unusable output with ``invalid_rate`` (prose, the wrong shape, truncated JSON). Each
decision hashes the seed, the stage, the prompt and how often that prompt was asked before, so a run is
reproducible whatever order concurrent requests arrive in.

This module imports only the standard library, litellm and tiermem: worker processes load it by its file
path (the repository is never on their path; see ``child.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litellm.llms.custom_llm import CustomLLMError

from tiermem.memory.testing import FunctionModel, StageCall
from tiermem.prompts import compact, consolidate, digest, encode_episode, observe, redact

__all__ = [
    "MAX_OPERATIONS",
    "TOKEN",
    "Faults",
    "TokenModel",
    "fact_text",
    "healthy_reply",
    "read_log",
    "token",
    "tokens_in",
]

TOKEN = re.compile(r"\btk[0-9a-f]{10}\b")
MAX_OPERATIONS = 100  # the consolidator's per-call cap (prompts/consolidate.py)
MAX_SUMMARY_TOKENS = 250  # tokens an episode summary lists: 14 characters each, under its 4,000-character cap
_ERRORS = ("connection", "503", "timeout")
_INVALID = (
    "Sure! I noted everything worth remembering from this conversation.",  # prose, no JSON
    '{"observations": "none", "summary": 3, "operations": "add"}',  # JSON of the wrong shape
    '{"observations": [{"subject": "user", "text": "The user',  # truncated mid-answer
)


def token(seed: int, *parts: object) -> str:
    """The token of one turn: unique per (seed, parts), recognisable by :data:`TOKEN`."""
    return "tk" + hashlib.sha256("/".join(map(str, (seed, *parts))).encode()).hexdigest()[:10]


def tokens_in(texts: Iterable[str]) -> list[str]:
    """The tokens in ``texts``, each once, in order of appearance."""
    return list(dict.fromkeys(t for text in texts for t in TOKEN.findall(text)))


def fact_text(tokens: Sequence[str]) -> str:
    """What the observer and the consolidator write for ``tokens`` (one, except when packed)."""
    return f"The user said {' '.join(tokens)}."


@dataclass
class Faults:
    """What fails: the rates, the seed, and a switch that makes the model healthy."""

    failure_rate: float = 0.30
    invalid_rate: float = 0.10
    seed: int = 0
    enabled: bool = True
    _asked: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, stage: str, prompt: str) -> tuple[str, int]:
        """``("ok" | "error" | "invalid", variant)`` for this request."""
        if not self.enabled:
            return "ok", 0
        with self._lock:
            key = f"{stage}\x1f{prompt}"
            nth = self._asked[key]
            self._asked[key] += 1
        digest_ = hashlib.sha256(f"{self.seed}\x1f{key}\x1f{nth}".encode()).digest()
        draw = int.from_bytes(digest_[:8], "big") / 2**64
        variant = digest_[8]
        if draw < self.failure_rate:
            return "error", variant % len(_ERRORS)
        if draw < self.failure_rate + self.invalid_rate:
            return "invalid", variant % len(_INVALID)
        return "ok", 0


def _raise(variant: int) -> None:
    kind = _ERRORS[variant]
    if kind == "connection":
        raise ConnectionResetError("Connection reset by peer")
    if kind == "503":
        raise CustomLLMError(status_code=503, message="Service Unavailable: the model is overloaded")  # type: ignore[no-untyped-call]
    raise TimeoutError("Request timed out")


def _observe(inputs: observe.Input) -> dict[str, Any]:
    said = tokens_in(m.content for m in inputs.messages if m.role == "user")
    observations = [{"subject": "user", "kind": "fact", "text": fact_text([t]), "salience": 0.6} for t in said]
    return {"observations": observations}


def _encode(inputs: encode_episode.Input) -> dict[str, Any]:
    found = tokens_in([*(e.text for e in inputs.entries), *inputs.parts])
    listed = found[:MAX_SUMMARY_TOKENS]  # the summary's 4,000-character cap; the rest reach facts by observation
    more = f" and {len(found) - len(listed)} more" if len(found) > len(listed) else ""
    summary = f"The user said {', '.join(listed)}{more}." if found else "The user chatted."
    return {"summary": summary, "subjects": ["user"], "salience": 0.6}


def _consolidate(inputs: consolidate.Input) -> dict[str, Any]:
    by_session = {e.session_id: e.id for e in inputs.episodes}
    said: dict[str, str] = {}  # token -> the episode it came from
    for episode in inputs.episodes:
        said.update(dict.fromkeys(tokens_in([episode.summary]), episode.id))
    for entry in inputs.observations:
        if entry.session_id in by_session:
            for found in tokens_in([entry.text]):
                said.setdefault(found, by_session[entry.session_id])
    items = list(said.items())
    per = -(-len(items) // MAX_OPERATIONS) if items else 1  # tokens per fact, 1 unless past the cap
    operations = []
    for start in range(0, len(items), per):
        chunk = items[start : start + per]
        operations.append(
            {
                "op": "add",
                "subject": "user",
                "text": fact_text([t for t, _ in chunk]),
                "source_episode_ids": sorted({e for _, e in chunk}),
            }
        )
    return {"operations": operations}


def healthy_reply(call: StageCall[Any, Any]) -> dict[str, Any]:
    """The valid answer to ``call``, carrying its tokens along."""
    inputs = call.inputs
    if isinstance(inputs, observe.Input):
        return _observe(inputs)
    if isinstance(inputs, encode_episode.Input):
        return _encode(inputs)
    if isinstance(inputs, consolidate.Input):
        return _consolidate(inputs)
    if isinstance(inputs, digest.Input):
        return {"text": " ".join(f.text for f in inputs.facts[:20]) or "The user has no facts yet."}
    if isinstance(inputs, compact.Input):
        return {"merges": []}
    if isinstance(inputs, redact.Input):
        gone = set(tokens_in(inputs.forgotten))
        return {"text": " ".join(w for w in inputs.text.split() if not set(tokens_in([w])) & gone)}
    raise AssertionError(f"unknown stage {call.stage!r}")


def _subjects_of(call: StageCall[Any, Any]) -> list[str]:
    """What a request is about, for the log: the episodes a consolidation sees, the tokens of the rest."""
    inputs = call.inputs
    if isinstance(inputs, consolidate.Input):
        return sorted(e.id for e in inputs.episodes)
    if isinstance(inputs, observe.Input):
        return tokens_in(m.content for m in inputs.messages)
    if isinstance(inputs, encode_episode.Input):
        return tokens_in(e.text for e in inputs.entries)
    return []


class TokenModel:
    """The fake: :attr:`model` is the litellm model string; :attr:`faults` says what fails.

    ``log``: a file every request is appended to as one JSON line (stage, outcome, subjects, pid), shared
    by processes (each line is one ``O_APPEND`` write).
    """

    def __init__(self, faults: Faults | None = None, *, log: str | Path | None = None, latency: float = 0.0) -> None:
        self.faults = faults or Faults(failure_rate=0.0, invalid_rate=0.0)
        self.log = Path(log) if log is not None else None
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.fake = FunctionModel(function=self._answer, latency=latency)
        self.model = self.fake.model

    def _answer(self, messages: list[dict[str, Any]], call: StageCall[Any, Any]) -> str | dict[str, Any]:
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        outcome, variant = self.faults.decide(call.stage.name, prompt)
        self.outcomes[(call.stage.name, outcome)] += 1
        self._record(call, outcome)
        if outcome == "error":
            _raise(variant)
        if outcome == "invalid":
            return _INVALID[variant]
        return healthy_reply(call)

    def _record(self, call: StageCall[Any, Any], outcome: str) -> None:
        if self.log is None:
            return
        line = {"stage": call.stage.name, "outcome": outcome, "subjects": _subjects_of(call), "pid": os.getpid()}
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)

    def calls(self, stage: str | None = None, outcome: str | None = None) -> int:
        """Requests served in this process (of one stage, with one outcome)."""
        return sum(n for (s, o), n in self.outcomes.items() if stage in (None, s) and outcome in (None, o))


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """Every request a :class:`TokenModel` logged to ``path`` (in any process)."""
    file = Path(path)
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
