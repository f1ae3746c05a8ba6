"""Governance: access to shared scopes, list, history, corrections (update, pin), forget, erase, export and
import, stats, and recall feedback."""

from __future__ import annotations

from ._access import Access, Grant, Right
from ._corrections import Corrections, carry_pins
from ._erasure import EraseReport, Erasure, ForgetReport
from ._feedback import FeedbackReport, RecallResult, Receipts, apply_feedback
from ._governance import Governance
from ._portability import Destination, ExportReport, ImportReport, Portability, Source
from ._views import MemoryPage, MemoryStats, MemoryVersion

__all__ = [
    "Access",
    "Corrections",
    "Destination",
    "EraseReport",
    "Erasure",
    "ExportReport",
    "FeedbackReport",
    "ForgetReport",
    "Governance",
    "Grant",
    "ImportReport",
    "MemoryPage",
    "MemoryStats",
    "MemoryVersion",
    "Portability",
    "RecallResult",
    "Receipts",
    "Right",
    "Source",
    "apply_feedback",
    "carry_pins",
]
