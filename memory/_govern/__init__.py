"""Governance: list, history, update, pin, forget, erase, export and import, stats, and recall feedback."""

from __future__ import annotations

from ._erasure import EraseReport, Erasure, ForgetReport
from ._feedback import FeedbackReport, RecallResult, Receipts, apply_feedback
from ._governance import Governance, carry_pins
from ._portability import Destination, ExportReport, ImportReport, Portability, Source
from ._views import MemoryPage, MemoryStats, MemoryVersion

__all__ = [
    "Destination",
    "EraseReport",
    "Erasure",
    "ExportReport",
    "FeedbackReport",
    "ForgetReport",
    "Governance",
    "ImportReport",
    "MemoryPage",
    "MemoryStats",
    "MemoryVersion",
    "Portability",
    "RecallResult",
    "Receipts",
    "Source",
    "apply_feedback",
    "carry_pins",
]
