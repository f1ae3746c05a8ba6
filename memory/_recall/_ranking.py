"""Ranking: relevance gates, priors only reorder. The one ranking recall, the context block and the benchmarks use.

Vector and full-text candidates are fused by a weighted sum of normalised scores (measured to
beat reciprocal-rank fusion on conversational memory). A candidate is related when it shares an
informative word with the cue or when its similarity passes the calibrated meaning gate of
:mod:`._relevance` (what the best of the searched memories would reach were they all unrelated);
the rest is dropped. Within the fusion a word match counts for less when it covers few of the
cue's words or when the memory's meaning is far from the cue's, and a name in the cue is subject
evidence (a boost), not topic evidence. A turn of the session log also gains part of its session's
match and of the turns either side of it said by someone else. Confidence, recency and tier weights
then reorder what is left, within a band small enough that they cannot lift an unrelated memory over
a related one.

What no longer holds ranks below what replaced it: a superseded fact, or a turn whose every fact
was superseded (:mod:`.._tiers._lineage`), carries ``metadata["superseded"]`` and what replaced it
(``replaced_by``); its score is scaled by :data:`PAST_WEIGHT`, the current fact that replaced it
is held at least as relevant as the past memory matched, and it always ranks above it.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from .._decay import recency
from .._items import MemoryItem, RankedMemoryItem
from .._options import RecallOptions
from .._subjects import USER
from .._text import STOP_WORDS, stem, terms, words
from .._tiers import built
from ._diversity import diversified
from ._relevance import BACKGROUND

__all__ = [
    "BACKGROUND",
    "PAST_WEIGHT",
    "Candidate",
    "named_subjects",
    "rank",
    "rank_without_cue",
    "terms",
]

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# A memory that no longer holds keeps this share of its score (and always ranks below what replaced it).
PAST_WEIGHT = 0.7


@dataclass(frozen=True, kw_only=True, slots=True)  # slots: built once per candidate of every recall
class Candidate:
    """A memory found by vector or full-text search, before fusion."""

    item: MemoryItem
    similarity: float
    lexical: float
    via_graph: float = 0.0
    context: str = ""  # text the full-text search also matched the memory by (a turn's previous turn)
    keys: tuple[str, ...] = ()  # its retrieval keys: they rank a memory, never admit it (see rank)
    # The full-text index's text and context columns of a memory its table's word search could find
    # (None for one only the graph or a replacement brought in): what a pooled BM25 scores.
    columns: tuple[str, str] | None = None


_FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "we", "our", "us"})


def named_subjects(cue: str, aliases: Mapping[str, str]) -> set[str]:
    """Subjects the cue names: its words, hyphen-joined word pairs ("acme corp"), display names,
    and "user" for a first-person cue ("my wife")."""
    words = _NAME.findall(cue.lower())
    named = {w for w in words if len(w) > 1} | {f"{a}-{b}" for a, b in itertools.pairwise(words)}
    spaced = f" {' '.join(words)} "
    named |= {subject for alias, subject in aliases.items() if f" {' '.join(_NAME.findall(alias))} " in spaced}
    if _FIRST_PERSON & set(words):
        named.add(USER)
    return named


def _conversation_context(
    candidates: Sequence[Candidate], relevance: np.ndarray, plausible: np.ndarray, options: RecallOptions
) -> np.ndarray:
    """Turn relevance plus parts of its session's match and of its neighbours' in the dialogue.

    ``session_weight`` x its session's match, which says which conversation, so it counts only when
    the pool holds more than one session. ``reply_weight`` x the turn before and ``replied_weight`` x
    the turn after, each only when someone else spoke it: an answer replies to the question before
    it, and a statement's reply often echoes it in the cue's words ("camping sounds fun!"); the same
    speaker going on is no such evidence.
    """
    if options.session_weight <= 0 and options.reply_weight <= 0 and options.replied_weight <= 0:
        return relevance
    episodic = [i for i, c in enumerate(candidates) if c.item.tier == "episodic"]
    if not episodic:  # no turn and no session to match (a search of facts alone)
        return relevance
    session: dict[object, float] = {}
    turn_at: dict[tuple[object, object], tuple[float, str]] = {}
    for i in episodic:
        c, meta = candidates[i], candidates[i].item.metadata
        if not plausible[i]:
            continue
        sid = meta.get("session_id")
        session[sid] = max(session.get(sid, 0.0), float(relevance[i]))
        if meta.get("kind") == "turn":
            turn_at[(sid, meta.get("seq"))] = (float(relevance[i]), c.item.subject)

    def other(sid: object, seq: int, speaker: str) -> float:
        """The relevance of turn ``seq`` of session ``sid`` when someone other than ``speaker`` said it."""
        score, said_by = turn_at.get((sid, seq), (0.0, ""))
        return score if said_by and said_by != speaker else 0.0

    out = np.array(relevance, dtype=np.float64)
    for i in episodic:
        c, meta = candidates[i], candidates[i].item.metadata
        if meta.get("kind") != "turn":
            continue
        sid, seq = meta.get("session_id"), meta.get("seq")
        before = other(sid, seq - 1, c.item.subject) if isinstance(seq, int) else 0.0
        after = other(sid, seq + 1, c.item.subject) if isinstance(seq, int) else 0.0
        standing = session.get(sid, 0.0) if len(session) > 1 else 0.0
        out[i] += options.session_weight * standing + options.reply_weight * before + options.replied_weight * after
    return out


def _subject_terms(cue: str, candidates: Sequence[Candidate], aliases: Mapping[str, str]) -> frozenset[str]:
    """The cue's terms that name a subject: a word of an alias, or of a candidate's canonical subject."""
    names = {w for alias in aliases for w in words(alias)}
    names |= {part for subject in {c.item.subject for c in candidates} for part in subject.split("-")}
    return frozenset(stem(w) for w in words(cue) if w in names and w not in STOP_WORDS)


def _lift_replacements(
    candidates: Sequence[Candidate], relevance: np.ndarray, plausible: np.ndarray
) -> dict[int, list[int]]:
    """Past candidates -> the positions of the current facts that replaced them, lifted in place.

    The cue matched what a fact replaced, so it asks about what the fact now says: that fact is held
    plausible and at least as relevant as the past memory (in place, in ``relevance`` and ``plausible``).
    """
    past = [i for i, c in enumerate(candidates) if c.item.metadata.get("superseded")]
    if not past:
        return {}
    position = {c.item.id: i for i, c in enumerate(candidates)}
    replaced: dict[int, list[int]] = {}
    for i in past:
        cand = candidates[i]
        successors = [position[r] for r in cand.item.metadata.get("replaced_by") or () if r in position]
        replaced[i] = successors
        if plausible[i]:
            for j in successors:
                relevance[j] = max(float(relevance[j]), float(relevance[i]))
                plausible[j] = True
    return replaced


def _coverage(wanted: frozenset[str], covered: Sequence[frozenset[str]]) -> np.ndarray:
    """The share of the cue's information each candidate covers: its words weighted by their rarity in the pool.

    A cue word most candidates share says little about which one is meant ("week" in "what water
    exercise do I do each week?"), so it weighs as its inverse document frequency among the
    candidates: no weight to fit, and the same whichever engine found them.
    """
    if not wanted or not covered:
        return np.zeros(len(covered), dtype=np.float64)
    pool = len(covered)
    weight = {t: math.log(1.0 + pool / (0.5 + sum(t in c for c in covered))) for t in wanted}
    total = sum(weight.values())
    return np.array([sum(weight[t] for t in wanted & c) / total for c in covered], dtype=np.float64)


def _minmax(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-9:
        return np.where(values > 0, 1.0, 0.0)
    return (values - low) / (high - low)


def rank(
    candidates: Sequence[Candidate],
    *,
    now: datetime,
    options: RecallOptions,
    cue: str = "",
    related_similarity: float = float("inf"),
    unrelated_similarity: float = float("inf"),
    named: Iterable[str] = (),
    aliases: Mapping[str, str] | None = None,
    limit: int,
) -> list[RankedMemoryItem]:
    """Fuse, gate and order candidates; the best ``limit`` come back.

    Lexical evidence is the engine's BM25 (scaled by the best in the pool) blended with the share
    of the cue's informative words a memory covers: BM25 alone would call a memory matching one
    common word a perfect match whenever nothing matches better.

    The gate: a candidate is related when it shares an informative word with the cue, or when its
    similarity reaches ``related_similarity`` (what the best of the searched memories would reach
    were they all unrelated: :meth:`Calibration.threshold`), so the memories closest in meaning are
    recalled without a shared word unless they are no closer than unrelated ones would be. Once
    something is related, a memory above ``unrelated_similarity`` (what the best unrelated memory
    typically reaches) is not demonstrably unrelated and competes too, on its relevance.

    A cue's words that name a subject (a name in ``aliases`` or a subject among the candidates:
    "Melanie" in "what does Melanie do to relax?") are evidence of whom, not of what: they earn the
    subject boost and keep a memory plausible, but a memory matching nothing else of the cue gets no
    lexical credit (a name in every line of a conversation would otherwise outrank every meaning).
    """
    if not candidates:
        return []
    sims = np.array([c.similarity for c in candidates], dtype=np.float64)
    bm25 = np.array([c.lexical for c in candidates], dtype=np.float64)
    wanted = terms(cue)
    topics = wanted - _subject_terms(cue, candidates, aliases or {}) or wanted
    said = [terms(f"{c.item.text} {c.context}") for c in candidates]
    # A retrieval key ("nut" for peanuts) is a model's guess at a broader word: it counts as a shared
    # word for the ranking, but a memory it alone connects to the cue must pass the meaning gate.
    covered = [t | terms(" ".join(c.keys)) if c.keys else t for t, c in zip(said, candidates, strict=True)]
    coverage = _coverage(wanted, covered)
    shares_word = np.array([bool(wanted & t) for t in said])
    topical = np.array([bool(topics & t) for t in covered], dtype=np.float64)
    scaled = bm25 / bm25.max() if bm25.max() > 0 else np.zeros_like(bm25)
    scaled *= topical
    # Missing cue words discount the BM25 match: one common word of three is not a perfect match,
    # however well it scores against the pool's best (itself perhaps one common word).
    lex_norm = scaled * (1.0 - options.coverage_weight + options.coverage_weight * coverage)
    # A shared word counts for less on a memory whose meaning is far from the cue's ("the long
    # Wednesday" for "which long-distance race?"): full weight from the meaning gate up.
    if options.meaning_weight > 0 and np.isfinite(related_similarity) and related_similarity > 0:
        closeness = np.clip(sims / related_similarity, 0.0, 1.0)
        lex_norm = lex_norm * (1.0 - options.meaning_weight + options.meaning_weight * closeness)
    dense_norm = _minmax(sims)
    total = options.dense_weight + options.lexical_weight or 1.0
    relevance = (options.dense_weight * dense_norm + options.lexical_weight * lex_norm) / total
    # The gate: an informative word of the cue, or a similarity no unrelated memory would reach;
    # and not far behind the best candidate.
    threshold = options.min_similarity if options.min_similarity is not None else related_similarity
    related = shares_word | (sims >= threshold)
    if related.any() and options.min_similarity is None:
        # The cue relates to something: a memory closer in meaning than the best unrelated one typically
        # is (not demonstrably unrelated) competes on its relevance, rather than waiting behind every
        # memory that shares one common word with the cue ("go" in "should I go snorkelling?").
        related |= sims >= unrelated_similarity
    plausible = related & (relevance >= options.min_relevance * relevance.max())
    # Soft two-stage: a turn gains part of its session's match (the right conversation first, then
    # the right line in it), the session's match being its episode's or its best turn's, whichever
    # is higher; and part of the turns either side said by someone else (an answer replies to the turn
    # before it, and the reply a statement got often repeats it).
    relevance = _conversation_context(candidates, relevance, plausible, options)
    # Memories reached through the relations graph are plausible by that link, at a fixed relevance floor.
    graph_floor = np.array([c.via_graph for c in candidates], dtype=np.float64)
    plausible |= graph_floor > 0
    relevance = np.maximum(relevance, graph_floor)
    replaced = _lift_replacements(candidates, relevance, plausible)
    named_set = set(named)
    scores: dict[int, float] = {}
    weights, prior_weight, named_boost = options.tier_weights, options.prior_weight, options.subject_boost
    half_life = options.recency_half_life.total_seconds()
    for i in np.flatnonzero(plausible).tolist():
        item = candidates[i].item
        # recency(), inlined: it runs for every plausible candidate of every recall.
        fresh = 0.5 ** (max((now - item.updated_at).total_seconds(), 0.0) / half_life)
        prior = (weights.get(item.tier, 0.5) + item.confidence + fresh) / 3.0
        boost = named_boost if item.subject in named_set else 0.0
        scores[i] = float(relevance[i]) * (1.0 - prior_weight + prior_weight * prior + boost)
    for i, successors in replaced.items():
        if i in scores:  # past: scaled down, and below every current fact that replaced it
            scores[i] = min([scores[i] * PAST_WEIGHT, *(0.99 * scores[j] for j in successors if j in scores)])
    scored = sorted(((score, candidates[i].item.id, i) for i, score in scores.items()), key=lambda t: (-t[0], t[1]))
    if options.session_diversity > 0 or options.per_session is not None:
        sessions = [c.item.metadata.get("session_id") if c.item.tier == "episodic" else None for c in candidates]
        scored = diversified(scored, sessions, discount=options.session_diversity, cap=options.per_session)
    scored += _closest_left(candidates, sims, scored, unrelated_similarity, limit)
    # The items were validated when read: only the winners become ranked items, without re-validation.
    return [
        built(
            RankedMemoryItem,
            **{**candidates[i].item.__dict__, "metadata": _owned(candidates[i].item.metadata)},
            score=score,
            relevance=float(relevance[i]),
        )
        for score, _, i in scored[:limit]
    ]


_SCALARS = (str, int, float, bool, type(None))


def _closest_left(
    candidates: Sequence[Candidate],
    sims: np.ndarray,
    scored: list[tuple[float, str, int]],
    unrelated_similarity: float,
    limit: int,
) -> list[tuple[float, str, int]]:
    """After what the gates let through, the closest in meaning of the rest, unless demonstrably unrelated.

    Never worse than dense retrieval: a memory the cue's vector ranks high that the gates held back
    (short of the relative gate: far behind the best candidate) still comes back, after every
    memory that passed, when the list has room and its similarity is above what the best of the
    searched memories typically reaches when all are unrelated (the median of that maximum). Only
    when something passed: a cue nothing relates to still recalls nothing.
    """
    if not scored or len(scored) >= limit or not math.isfinite(unrelated_similarity):
        return []
    taken = {i for _, _, i in scored}
    floor = scored[-1][0]
    rest = [
        i
        for i in np.argsort(-sims, kind="stable").tolist()
        if i not in taken and sims[i] >= unrelated_similarity and not candidates[i].item.metadata.get("superseded")
    ]
    # Below the last memory that passed, in order of similarity.
    closeness = [(i, max(float(sims[i]), 0.0)) for i in rest[: limit - len(scored)]]
    return [(floor * s / (1.0 + s), candidates[i].item.id, i) for i, s in closeness]


def _owned(metadata: dict[str, object]) -> dict[str, object]:
    """``metadata`` for the caller to keep and change: the store keeps parsed records between recalls,
    and a list or dict inside their metadata would otherwise be the very one the next recall reads."""
    if all(isinstance(v, _SCALARS) for v in metadata.values()):
        return dict(metadata)
    return copy.deepcopy(metadata)


def rank_without_cue(
    items: Sequence[MemoryItem], *, now: datetime, options: RecallOptions, limit: int
) -> list[RankedMemoryItem]:
    """No cue: the most recent and salient memories first."""
    ranked = []
    for item in items:
        fresh = recency(item.updated_at, now, half_life=options.recency_half_life)
        score = options.tier_weights.get(item.tier, 0.5) * (0.5 * fresh + 0.5 * item.confidence)
        ranked.append(RankedMemoryItem(**item.model_dump(), score=score, relevance=0.0))
    ranked.sort(key=lambda r: (-r.score, r.id))
    return ranked[:limit]
