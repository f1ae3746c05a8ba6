"""Pipelines: one module per LLM transformation, plus the offline rules model."""

from __future__ import annotations

from ._compaction import CompactionPlan, compact_subject
from ._consolidator import ConsolidationPlan, Refusal, consolidate_episodes
from ._digester import write_digest
from ._episodes import encode_session
from ._model import LLMStages, RulesStages, StageModel
from ._observer import ObservedTurn, observe_turn

__all__ = [
    "CompactionPlan",
    "ConsolidationPlan",
    "LLMStages",
    "ObservedTurn",
    "Refusal",
    "RulesStages",
    "StageModel",
    "compact_subject",
    "consolidate_episodes",
    "encode_session",
    "observe_turn",
    "write_digest",
]
