"""Option models per tier (each accepts True / False / dict / model), presets, and the check that
turns an unknown keyword at a front door into a :class:`ConfigurationError`."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._errors import ConfigurationError
from ._tools import CONNECT, RECALL, TOOLS

__all__ = [
    "MEMORY_CAPABILITY_PRESETS",
    "CapabilityPreset",
    "DigestOptions",
    "EpisodicOptions",
    "HygieneOptions",
    "RecallOptions",
    "RelationsOptions",
    "SemanticOptions",
    "WorkingOptions",
    "reject_unknown",
    "resolve_tier",
]


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WorkingOptions(_Options):
    """Working memory: this session's observations."""

    capacity: int = Field(default=7, ge=1, le=1000, description="Most active entries per session.")
    salience_half_life: float = Field(default=8.0, gt=0, description="Turns after which an entry's salience halves.")


class EpisodicOptions(_Options):
    """Episodic memory: past sessions."""

    ttl: timedelta | None = Field(default=timedelta(days=365), description="Episodes older than this expire.")
    idle_after: timedelta = Field(default=timedelta(minutes=30), description="A session idle this long closes.")
    # Cheap by default (about one model call per captured turn at any session length): ending a session
    # makes no call and writes a provisional, extractive episode that recall finds at once; its summary
    # and facts come from one consolidation call per batch of episodes (4 sessions or ``batch_turns`` turns),
    # within ``batch_wait``.
    encode: Literal["session", "consolidation"] = Field(
        default="consolidation",
        description='When a model summarises an ended session: "consolidation" (the default), in the consolidation '
        "call that also turns it into facts (one call per batch of episodes, so short sessions cost fewer calls; "
        "until then the episode is searchable with a provisional, extractive summary: its most salient "
        'observations); "session", one call of its own as the session ends (the summary at once, one more call '
        "per session).",
    )
    batch_wait: timedelta | None = Field(
        default=timedelta(days=3),
        description="The scheduled consolidation job waits until a user's pending episodes make a full batch (4, one "
        "model call) or hold ``batch_turns`` turns, or the oldest has waited this long, so facts follow a session "
        "within this wait (its provisional episode is searchable meanwhile); 3 days lets a user with one short "
        "session a day fill a batch. None consolidates whatever is pending at each run. ``consolidate()`` called "
        "directly never waits.",
    )
    batch_turns: int | None = Field(
        default=20,
        ge=1,
        description="Pending episodes holding this many turns together are consolidated without waiting for a full "
        "batch: enough material for one call (20: at most about 1.1 model calls per captured turn); None: only full "
        "batches and ``batch_wait`` count.",
    )


class RelationsOptions(_Options):
    """Typed relations between subjects (off unless asked for)."""

    enabled: bool = Field(default=True, description="Whether relations are extracted and read.")
    vocabulary: tuple[str, ...] | None = Field(default=None, description="Allowed relation types; None = free.")
    max_edges: int = Field(
        default=500,
        ge=1,
        description="Cap on one user's edges, closed ones included. Over it, edges are dropped in this order: "
        "closed (history) before current; then the least recent (oldest ``updated_at``: last said, reinforced "
        "or closed); then the least confident; then by id, so the choice is deterministic.",
    )
    create_implicit_entities: bool = Field(
        default=False,
        description="An edge to an entity that is not the subject of any fact or episode: True writes the edge "
        "and mints the entity as a node (counted as ``edges_implicit_endpoint``; the janitor keeps it); False drops "
        "the edge, counted as ``edges_unknown_endpoint`` and listed in the consolidation result's ``refusals``.",
    )

    @field_validator("vocabulary")
    @classmethod
    def _normalise(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if value is None else tuple(" ".join(v.lower().split()) for v in value)


class SemanticOptions(_Options):
    """Semantic memory: consolidated facts."""

    relations: RelationsOptions = Field(
        default=RelationsOptions(enabled=False), description="Relations graph options (bool accepted)."
    )
    half_life: timedelta = Field(default=timedelta(days=180), description="Confidence half-life.")
    archive_below: float = Field(default=0.15, ge=0, le=1, description="Effective confidence floor.")
    max_facts: int = Field(default=2000, ge=10, description="Per-user cap that triggers compaction.")

    @field_validator("relations", mode="before")
    @classmethod
    def _relations(cls, value: object) -> object:
        if isinstance(value, bool):
            return RelationsOptions(enabled=value)
        return value


class DigestOptions(_Options):
    """Digest: the narrative rollup."""

    max_facts: int = Field(default=60, ge=1, description="Most facts the digester reads.")


class HygieneOptions(_Options):
    """The janitor's steps, one switch each; ``hygiene=False`` turns every step off (the janitor then writes nothing).

    A step also needs its tier: no ``semantic`` tier, no archive or compaction; ``episodic={"ttl": None}``, no TTL.
    """

    decay: bool = Field(
        default=True, description="Working entries whose salience faded leave the active set (they stay in the log)."
    )
    archive: bool = Field(
        default=True, description="Facts whose decayed confidence fell under ``semantic.archive_below`` are archived."
    )
    ttl: bool = Field(
        default=True,
        description="Episodes older than ``episodic.ttl`` expire with their turns; turns a live fact cites stay.",
    )
    dangling_edges: bool = Field(
        default=True,
        description="Edges whose supporting facts all ended are closed (kept as history); edges without a support "
        "set whose endpoint has no active fact are deleted. Needs relations on.",
    )
    compaction: bool = Field(
        default=True, description="A user over ``semantic.max_facts`` has facts merged, one subject per model call."
    )
    optimize: bool = Field(
        default=True,
        description="Storage compaction: files merged, versions older than ``cleanup_older_than`` dropped.",
    )
    cleanup_older_than: timedelta = Field(default=timedelta(hours=1), description="Keep store versions this long.")
    # Memories age a little at a time: a 6-hourly run removes a sliver of a user's memory, so a run
    # taking more than half of it at once is rarely ageing (a clock or TTL set wrong, a history imported
    # by an older tiermem whose clocks counted from the conversation) and always costly to get wrong.
    max_removed_share: float | None = Field(
        default=0.5,
        gt=0,
        le=1,
        description="A run that would remove more than this share of a user's facts, episodes and turns together "
        "logs a WARNING and leaves that user as they are unless forced (``run_janitor(..., force=True)``, "
        "``tiermem janitor --force``); None: never stopped.",
    )
    guard_min_removed: int = Field(
        default=20,
        ge=0,
        description="Runs removing fewer of a user's records than this are never stopped: a small user's only "
        "session reaching its TTL is ageing, not a wipe.",
    )


class RecallOptions(_Options):
    """Ranking weights; relevance gates, the rest only reorders."""

    dense_weight: float = Field(default=0.5, ge=0, description="Weight of vector similarity.")
    lexical_weight: float = Field(default=0.5, ge=0, description="Weight of full-text score.")
    min_relevance: float = Field(default=0.3, ge=0, le=1, description="Gate on normalised relevance.")
    min_similarity: float | None = Field(
        default=None, ge=-1, le=1, description="Similarity that counts as related alone; None: calibrated."
    )
    unrelated_rate: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="Share of unrelated cues allowed to recall a memory on meaning alone (the meaning gate's "
        "false-positive rate; the similarity it takes grows with the memories searched).",
    )
    prior_weight: float = Field(default=0.25, ge=0, le=1, description="Share of the score from priors.")
    recency_half_life: timedelta = Field(default=timedelta(days=30), description="Recency prior half-life.")
    tier_weights: dict[str, float] = Field(
        # Equal by default: unequal priors moved R@10 on neither dev conversation (bench/README.md).
        default_factory=lambda: {
            "working": 1.0,
            "episodic": 1.0,
            "semantic": 1.0,
            "digest": 1.0,
            "relation": 1.0,
            "document": 1.0,
        },
        description="Prior per tier (equal by default).",
    )
    subject_boost: float = Field(default=0.3, ge=0, le=1, description="Boost for a subject the cue names.")
    coverage_weight: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="How much the cue words a memory misses (weighted by rarity) discount its lexical match.",
    )
    meaning_weight: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="How much a memory's distance in meaning from the cue discounts its lexical match (off by "
        "default: it paid on neither dev conversation, bench/README.md).",
    )
    session_weight: float = Field(
        default=0.3, ge=0, le=1, description="Share of its session's match (episode or best turn) a turn inherits."
    )
    # reply_weight and replied_weight share one tuned value (the two sides of a turn's dialogue
    # context): separate values paid on neither dev conversation (bench/README.md).
    reply_weight: float = Field(
        default=0.15, ge=0, le=1, description="Share of the previous turn's relevance a turn inherits (a reply)."
    )
    replied_weight: float = Field(
        default=0.15,
        ge=0,
        le=1,
        description="Share of the next turn's relevance a turn inherits when someone else said it (the reply it got).",
    )
    # Issue 34 item 4 (multi-hop: evidence spread over sessions): switches measured by bench/ablation.py,
    # neutral by default.
    session_diversity: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Each memory already ranked from the same session discounts the next one by this share "
        "(greedy, MMR over sessions; 0: off).",
    )
    per_session: int | None = Field(
        default=None, ge=1, description="Most memories of one session before every other session's (None: off)."
    )
    second_hop: int = Field(
        default=0,
        ge=0,
        le=10,
        description="Search again with the cue plus the rarest word of each of the first this many results, "
        "and merge the two lists (0: off).",
    )


T = TypeVar("T", bound=BaseModel)


def resolve_tier(value: bool | dict[str, object] | T | None, model: type[T], name: str) -> T | None:
    """True -> defaults, False/None -> off, dict -> validated model, model -> itself."""
    if value is None or value is False:
        return None
    if value is True:
        return model()
    if isinstance(value, model):
        return value
    if isinstance(value, dict):
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise ConfigurationError(f"invalid {name} options: {exc}") from exc
    raise ConfigurationError(f"{name} must be True, False, a dict or {model.__name__}, not {type(value).__name__}")


@dataclass(frozen=True, kw_only=True)
class CapabilityPreset:
    """Which tools and which context sections a capability offers.

    ``tools``: names of read tools of the tool table (:data:`~tiermem.memory._tools.TOOLS`); any other
    name is a ConfigurationError (a write tool is offered by the write side only, when asked).
    """

    tools: tuple[str, ...]
    sections: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.tools, str):
            raise ConfigurationError(f"a preset's tools are a tuple of tool names, not the string {self.tools!r}")
        read = [spec.name for spec in TOOLS if spec.access == "read"]
        wrong = [name for name in self.tools if name not in read]
        if wrong:
            raise ConfigurationError(
                f"a preset offers read tools only ({', '.join(read)}), not {', '.join(map(repr, wrong))}; "
                "write tools come from system(...).tools(ctx, write=True)"
            )


_ALL_SECTIONS = ("digest", "working", "semantic", "relation", "episodic", "document")
_RECALL_AND_CONNECT = (RECALL.name, CONNECT.name)
MEMORY_CAPABILITY_PRESETS: dict[str, CapabilityPreset] = {
    "default": CapabilityPreset(tools=_RECALL_AND_CONNECT, sections=_ALL_SECTIONS),
    "connect": CapabilityPreset(tools=_RECALL_AND_CONNECT, sections=_ALL_SECTIONS),
    "recall": CapabilityPreset(tools=(RECALL.name,), sections=_ALL_SECTIONS),
    "context": CapabilityPreset(tools=(), sections=_ALL_SECTIONS),
    "tools": CapabilityPreset(tools=_RECALL_AND_CONNECT, sections=()),
}


def reject_unknown(function: Callable[..., object], unknown: Mapping[str, object]) -> None:
    """Raise ConfigurationError for keywords ``function`` does not take, naming the closest valid one.

    The front doors type their catch-all as ``**unknown: Never``, so a type checker already rejects a
    typo; this is the same rejection at run time, in our error tree instead of a bare TypeError.
    """
    if not unknown:
        return
    valid = [p.name for p in inspect.signature(function).parameters.values() if p.kind is p.KEYWORD_ONLY]
    problems = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, valid, n=1)
        problems.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ConfigurationError(
        f"{function.__name__}() got unknown option {', '.join(problems)}; valid options: {', '.join(valid)}"
    )
