"""Pipelines: one module per LLM transformation, plus the offline rules model."""

from __future__ import annotations

from ._batches import consolidation_parts, run_consolidation
from ._budget import Budget, fitted, input_budget, merged
from ._combined import PROVISIONAL, EncodedBatch, encode_and_consolidate, provisional_episode
from ._compaction import CompactionPlan, compact_subject, compaction_parts
from ._consolidator import ConsolidationPlan, Refusal, consolidate_episodes
from ._digester import WrittenDigest, digest_parts, write_digest
from ._episodes import encode_session, session_parts
from ._model import LLMStages, RulesStages, StageModel
from ._observer import ObservedTurn, observe_turn, turn_parts
from ._redactor import redact_text
from ._restated import kept_edges, kept_facts
from ._window import observe_window, windows

__all__ = [
    "PROVISIONAL",
    "Budget",
    "CompactionPlan",
    "ConsolidationPlan",
    "EncodedBatch",
    "LLMStages",
    "ObservedTurn",
    "Refusal",
    "RulesStages",
    "StageModel",
    "WrittenDigest",
    "compact_subject",
    "compaction_parts",
    "consolidate_episodes",
    "consolidation_parts",
    "digest_parts",
    "encode_and_consolidate",
    "encode_session",
    "fitted",
    "input_budget",
    "kept_edges",
    "kept_facts",
    "merged",
    "observe_turn",
    "observe_window",
    "provisional_episode",
    "redact_text",
    "run_consolidation",
    "session_parts",
    "turn_parts",
    "windows",
    "write_digest",
]
