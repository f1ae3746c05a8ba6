"""The write side and composition root: ``system()``, capture, sessions, consolidation, imports, retries.

The only folder of ``tiermem.memory`` that imports ``tiermem.pipelines`` and ``tiermem.jobs``.
"""

from __future__ import annotations

from ._blocking_system import BlockingMemorySystem
from ._conversation_import import (
    MAX_OBSERVE_WINDOW,
    OBSERVE_WINDOW,
    Conversation,
    HistoryProgress,
    HistoryReport,
    HistoryTurn,
    LeasedWork,
)
from ._ingest import IngestEstimate, IngestProgress, IngestReport
from ._janitor import janitor_pass
from ._sharing import SharedProposal
from ._system import CaptureResult, ConsolidationResult, DigestResult, RetryReport, SessionResult, system
from ._write_side import MemorySystem
from ._write_tools import Forget, ForgetArguments, RememberArguments, agent_tools

__all__ = [
    "MAX_OBSERVE_WINDOW",
    "OBSERVE_WINDOW",
    "BlockingMemorySystem",
    "CaptureResult",
    "ConsolidationResult",
    "Conversation",
    "DigestResult",
    "Forget",
    "ForgetArguments",
    "HistoryProgress",
    "HistoryReport",
    "HistoryTurn",
    "IngestEstimate",
    "IngestProgress",
    "IngestReport",
    "LeasedWork",
    "MemorySystem",
    "RememberArguments",
    "RetryReport",
    "SessionResult",
    "SharedProposal",
    "agent_tools",
    "janitor_pass",
    "system",
]
