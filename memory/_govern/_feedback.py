"""Feedback on recall: receipts, and what ``feedback`` does to the memories a receipt returned.

Every recall issues a receipt (``RecallResult.receipt``) naming the ids it returned. ``feedback(ctx,
receipt, used=[...], unhelpful=[...])`` then reinforces what was used, as consolidation reinforces
a fact seen again (confidence kept, decay restarted, one more reinforcement), and lowers what was not
helpful by :data:`STEP` of confidence (never below 0, never for a pinned memory). Facts and edges
carry confidence; an episode's salience moves the same way; turns, working entries and the digest
have neither and are reported unchanged. Each change is logged in the memory's
``metadata["feedback"]`` (the latest :data:`LOG_LENGTH`), which ``history`` shows.

Receipts live in the process that recalled, in a least-recently-issued cache of
:data:`MAX_RECEIPTS` (a receipt is a few hundred bytes): feedback follows recall within one agent
turn, so a durable table (and its share of erase, export and stats) would buy little. A receipt
from another process, or pushed out of the cache, is refused as unknown. Feedback is applied once
per receipt: the same call again returns the first report (``repeated=True``) and changes nothing.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from .._decay import reinforce
from .._errors import InvalidArgumentError, MemoryNotFoundError
from .._items import RankedMemoryItem
from .._records import Edge, Episode, Fact, MemoryContext
from .._store import TableName, user_writes
from ._governance import Governance, Record

__all__ = ["LOG_LENGTH", "MAX_RECEIPTS", "STEP", "FeedbackReport", "RecallResult", "Receipts", "apply_feedback"]

MAX_RECEIPTS = 10_000
STEP = 0.1
LOG_LENGTH = 20


class RecallResult(list[RankedMemoryItem]):
    """What ``recall`` returns: the ranked memories (a plain list of them, as always) and ``receipt``,
    the id to pass to ``feedback``."""

    receipt: str

    def __init__(self, items: Iterable[RankedMemoryItem] = (), *, receipt: str = "") -> None:
        super().__init__(items)
        self.receipt = receipt


class FeedbackReport(BaseModel):
    """What ``feedback`` changed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    receipt: str = Field(description="The receipt the feedback was for.")
    reinforced: tuple[str, ...] = Field(default=(), description="Used memories reinforced.")
    lowered: tuple[str, ...] = Field(default=(), description="Unhelpful memories whose confidence went down a step.")
    unchanged: tuple[str, ...] = Field(
        default=(), description="Memories left as they were: pinned (never lowered), gone, or without confidence."
    )
    repeated: bool = Field(default=False, description="Feedback for this receipt was already applied: nothing changed.")


@dataclass(kw_only=True)
class _Receipt:
    namespace: str
    user_id: str
    ids: frozenset[str]
    issued_at: datetime
    given: tuple[frozenset[str], frozenset[str]] | None = None
    report: FeedbackReport | None = None


class Receipts:
    """The receipts recall issued in this process, the latest :data:`MAX_RECEIPTS` of them."""

    def __init__(self, limit: int = MAX_RECEIPTS) -> None:
        self.limit = limit
        self._receipts: OrderedDict[str, _Receipt] = OrderedDict()
        self.lock = threading.Lock()

    def issue(self, ctx: MemoryContext, ids: Iterable[str], now: datetime) -> str:
        rid = "rcpt_" + secrets.token_hex(16)
        with self.lock:
            self._receipts[rid] = _Receipt(
                namespace=ctx.namespace, user_id=ctx.user_id, ids=frozenset(ids), issued_at=now
            )
            while len(self._receipts) > self.limit:
                self._receipts.popitem(last=False)
        return rid

    def find(self, ctx: MemoryContext, receipt: str) -> _Receipt:
        """The receipt, if this process issued it to ``ctx``'s user (another user's is unknown too)."""
        with self.lock:
            found = self._receipts.get(receipt)
        if found is None or (found.namespace, found.user_id) != (ctx.namespace, ctx.user_id):
            raise InvalidArgumentError(
                f"unknown receipt {receipt!r}: feedback takes a receipt recall returned to this user in this "
                f"process (the latest {self.limit} are kept)"
            )
        return found


def _ids(value: object, what: str) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise InvalidArgumentError(f"{what} must be a list of memory ids")
    if not all(isinstance(v, str) and v for v in value):
        raise InvalidArgumentError(f"{what} must hold non-empty string ids")
    return frozenset(value)


def _logged(metadata: Mapping[str, object], event: dict[str, object]) -> dict[str, object]:
    previous = metadata.get("feedback", ())
    log = [*(previous if isinstance(previous, list | tuple) else ()), event][-LOG_LENGTH:]
    return {**metadata, "feedback": log}


def _reinforced(record: Fact | Edge, now: datetime) -> Fact | Edge:
    """Seen again, as consolidation would see it: confidence kept, decay restarted, counted."""
    if isinstance(record, Fact):
        return reinforce(record, confidence=record.confidence, now=now)
    return reinforce(record, confidence=record.confidence, now=now)


def _changed(record: object, signal: str, receipt: str, now: datetime) -> Fact | Edge | Episode | None:
    """The record after one feedback signal, or None when it does not change."""
    event: dict[str, object] = {"at": now.isoformat(), "receipt": receipt, "signal": signal}
    changed: Fact | Edge | Episode
    if isinstance(record, Fact | Edge):
        before = record.confidence
        if signal == "used":
            changed = _reinforced(record, now)
        elif isinstance(record, Fact) and record.pinned:
            return None
        else:
            changed = record.model_copy(update={"confidence": max(0.0, round(before - STEP, 6)), "updated_at": now})
        event |= {"confidence": [before, changed.confidence]}
    elif isinstance(record, Episode):
        if signal == "unhelpful" and record.pinned:
            return None
        before = record.salience
        after = min(1.0, before + STEP) if signal == "used" else max(0.0, before - STEP)
        changed = record.model_copy(update={"salience": round(after, 6), "updated_at": now})
        event |= {"salience": [before, changed.salience]}
    else:
        return None
    return changed.model_copy(update={"metadata": _logged(changed.metadata, event)})


def _holds(governance: Governance, owner: MemoryContext, rid: str) -> bool:
    try:
        governance.find(owner, rid)
    except MemoryNotFoundError:
        return False
    return True


def apply_feedback(
    governance: Governance,
    receipts: Receipts,
    ctx: MemoryContext,
    receipt: object,
    *,
    used: object = (),
    unhelpful: object = (),
    shared: Sequence[tuple[MemoryContext, bool]] = (),
) -> FeedbackReport:
    """The blocking body of ``feedback``: checks everything, then writes each changed table once.

    ``shared``: the owner of each shared scope ``ctx`` reads (checked by the caller), and whether it may
    lower what is there (a write grant): a team fact recall returned is reinforced by any reader's
    "used", lowered only by a writer's "unhelpful" (for a reader it stays unchanged)."""
    if not isinstance(receipt, str) or not receipt:
        raise InvalidArgumentError("receipt must be the receipt id recall returned")
    good, bad = _ids(used, "used"), _ids(unhelpful, "unhelpful")
    if good & bad:
        raise InvalidArgumentError(f"ids both used and unhelpful: {sorted(good & bad)}")
    issued = receipts.find(ctx, receipt)
    foreign = sorted((good | bad) - issued.ids)
    if foreign:
        raise InvalidArgumentError(f"ids not returned by receipt {receipt!r}: {foreign}")
    with receipts.lock:  # once per receipt, also when two threads give it at once
        if issued.report is not None:
            if issued.given != (good, bad):
                raise InvalidArgumentError(f"feedback for receipt {receipt!r} was already given, with other ids")
            return issued.report.model_copy(update={"repeated": True})
        now = governance.clock.now()
        reinforced: list[str] = []
        lowered: list[str] = []
        unchanged: list[str] = []
        signals = {rid: "used" for rid in good} | {rid: "unhelpful" for rid in bad}
        # One owner at a time, under its own lease only (never two held at once): the user's own first, then
        # each shared scope holding one of the ids (looked for before its lease is taken, read again under it).
        for n, (owner, lowers) in enumerate([(ctx, True), *shared]):
            held = sorted(signals) if n == 0 else [rid for rid in sorted(signals) if _holds(governance, owner, rid)]
            if not held:
                continue
            writes: dict[TableName, list[Record]] = {}
            with user_writes(governance.store, owner):  # each record read and written back with nothing between
                for rid in held:
                    try:
                        table, record = governance.find(owner, rid)
                    except MemoryNotFoundError:  # forgotten since the recall (or another owner's)
                        continue
                    signal = signals.pop(rid)
                    changed = None if signal == "unhelpful" and not lowers else _changed(record, signal, receipt, now)
                    if changed is None:  # unchanged: pinned, or a reader's "unhelpful" on a shared memory
                        unchanged.append(rid)
                        continue
                    writes.setdefault(table, []).append(changed)
                    (reinforced if signal == "used" else lowered).append(rid)
                for table, records in writes.items():
                    governance.put(table, records)
        unchanged.extend(sorted(signals))  # found in no scope the caller reads: forgotten since the recall
        issued.given = (good, bad)
        issued.report = FeedbackReport(
            receipt=receipt, reinforced=tuple(reinforced), lowered=tuple(lowered), unchanged=tuple(unchanged)
        )
        return issued.report
