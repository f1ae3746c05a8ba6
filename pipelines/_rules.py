"""The deterministic offline rules model: the four pipeline stages without an LLM.

Used when no model is configured (demo, tests, CI, benchmarks). Pure Python and ``re``: the same
input always gives the same output, with no network. Each function takes a prompt module's
``Input`` and returns that module's ``Output``, like a model answering the prompt would.

Updates ("I moved to Lisbon", "I quit my job", "we broke up", "I turned 35") are read by
:mod:`tiermem.pipelines._updates`, which lists the patterns covered and those not covered; each stage
has a module: :mod:`tiermem.pipelines._rules_observe` (observe and observe_window),
:mod:`tiermem.pipelines._rules_consolidate` (consolidate, and the edge convention),
:mod:`tiermem.pipelines._rules_digest` (the digest and compaction); encoding an episode, the
combined stage and redaction (for ``forget``) are here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from statistics import fmean
from typing import Any

from pydantic import BaseModel

from tiermem.memory._redaction import Forgotten
from tiermem.memory._stage import Stage
from tiermem.memory._subjects import USER, is_canonical_subject
from tiermem.prompts import compact as compact_prompt
from tiermem.prompts import consolidate as consolidate_prompt
from tiermem.prompts import digest as digest_prompt
from tiermem.prompts import encode_consolidate as combined_prompt
from tiermem.prompts import encode_episode as encode_prompt
from tiermem.prompts import observe as observe_prompt
from tiermem.prompts import observe_window as window_prompt
from tiermem.prompts import redact as redact_prompt

from ._rules_consolidate import consolidate
from ._rules_digest import compact, digest
from ._rules_observe import observe, observe_window
from ._sentences import (
    ensure_period,
    normalise,
    split_sentences,
)

__all__ = [
    "RULES",
    "compact",
    "consolidate",
    "digest",
    "encode_consolidate",
    "encode_episode",
    "observe",
    "observe_window",
    "redact",
]


def _extract(items: Sequence[tuple[str, float]], limit: int = 6, budget: int = 1200) -> list[str]:
    """The most salient distinct texts (at most ``limit``, about ``budget`` chars), in their original order."""
    seen: set[str] = set()
    pool: list[tuple[int, str, float]] = []
    for i, (text, salience) in enumerate(items):
        key = " ".join(normalise(text))
        if key and key not in seen:
            seen.add(key)
            pool.append((i, ensure_period(text), salience))
    picked: list[tuple[int, str]] = []
    total = 0
    for i, text, _ in sorted(pool, key=lambda p: (-p[2], p[0])):
        if len(picked) < limit and (not picked or total + len(text) < budget):
            picked.append((i, text))
            total += len(text) + 1
    return [text for _, text in sorted(picked)]


def _subjects(subjects: Iterable[str]) -> list[str]:
    unique = sorted({s for s in subjects if is_canonical_subject(s)})
    return ([USER] if USER in unique else []) + [s for s in unique if s != USER] or [USER]


def encode_episode(inputs: encode_prompt.Input) -> encode_prompt.Output:
    """An extractive episode: the session's most salient observations, in order."""
    entries = sorted(enumerate(inputs.entries), key=lambda p: (p[1].seq, p[1].created_at, p[0]))
    if entries:
        chosen = _extract([(e.text, e.salience) for _, e in entries])
        top = sorted((e.salience for _, e in entries), reverse=True)[:3]
        return encode_prompt.Output(
            summary=" ".join(chosen), subjects=_subjects(e.subject for _, e in entries), salience=fmean(top)
        )
    turns = sorted(inputs.turns, key=lambda t: (t.seq, t.created_at))
    observed = [
        o
        for t in turns
        for o in observe(
            observe_prompt.Input(
                messages=list(t.messages), user_names=inputs.user_names, now=t.created_at, policy=inputs.policy
            )
        ).observations
    ]
    chosen = _extract([(o.text, o.salience) for o in observed])
    if not chosen:
        firsts = [s for t in turns for m in t.messages if m.role == "user" for s in split_sentences(m.content)[:1]]
        chosen = firsts[:3]
    summary = " ".join(chosen)[:4000] or "The user had a brief conversation."
    return encode_prompt.Output(summary=summary, subjects=_subjects(o.subject for o in observed), salience=0.5)


def encode_consolidate(inputs: combined_prompt.Input) -> combined_prompt.Output:
    """The two rules composed: each provisional episode encoded as :func:`encode_episode` would (from its
    observations and turns), then the batch consolidated as :func:`consolidate` would, from those summaries."""
    episodes, written = [], []
    for episode in inputs.episodes:
        if episode.id in inputs.encode:
            encoded = encode_episode(
                encode_prompt.Input(
                    entries=[o for o in inputs.observations if o.session_id == episode.session_id],
                    turns=[t for t in inputs.turns if t.session_id == episode.session_id],
                    user_names=inputs.user_names, started_at=episode.started_at, ended_at=episode.ended_at,
                    policy=inputs.policy,
                )
            )  # fmt: skip
            subjects = tuple(dict.fromkeys([*encoded.subjects, *episode.subjects]))
            update = {"summary": encoded.summary, "subjects": subjects, "salience": encoded.salience}
            episode = episode.model_copy(update=update)
            written.append(combined_prompt.EpisodeOut(id=episode.id, **encoded.model_dump()))
        episodes.append(episode)
    fields = {name: getattr(inputs, name) for name in consolidate_prompt.Input.model_fields}
    out = consolidate(consolidate_prompt.Input(**{**fields, "episodes": episodes}))
    return combined_prompt.Output(operations=out.operations, edges=out.edges, episodes=written)


def redact(inputs: redact_prompt.Input) -> redact_prompt.Output:
    """Extractive: the text without its sentences that carry a forgotten term."""
    forgotten = Forgotten(texts=tuple(inputs.forgotten), terms=frozenset(inputs.terms))
    return redact_prompt.Output(text=forgotten.redact(inputs.text))


RULES: Mapping[Stage[Any, Any], Callable[[Any], BaseModel]] = {
    observe_prompt.STAGE: observe,
    window_prompt.STAGE: observe_window,
    encode_prompt.STAGE: encode_episode,
    consolidate_prompt.STAGE: consolidate,
    combined_prompt.STAGE: encode_consolidate,
    digest_prompt.STAGE: digest,
    compact_prompt.STAGE: compact,
    redact_prompt.STAGE: redact,
}
"""Each stage's rule, keyed on the prompt module's stage object."""
