"""What the ``tiermem`` data commands print: plain text for people, JSON for scripts.

No command-line library here (the CLI module alone imports it): each function turns records the
public API returned into a string; the command echoes it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from .._govern import ForgetReport, MemoryStats, MemoryVersion
from .._items import MemoryItem, RankedMemoryItem
from .._records import MemoryContext
from .._write import HistoryReport

__all__ = [
    "counts_text",
    "dumps",
    "forget_text",
    "history_text",
    "item_text",
    "items_text",
    "janitor_text",
    "stats_text",
    "store_stats_text",
    "users_text",
    "versions_text",
]

_TEXT_WIDTH = 100  # a line of ``show`` stays readable in a terminal; ``get`` and ``--json`` give it whole


def _plain(value: object) -> object:
    """Models, dataclasses, tuples and datetimes as JSON values, recursively."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def dumps(value: object) -> str:
    """``value`` (a model, a list of models, a dict ...) as indented JSON."""
    return json.dumps(_plain(value), indent=2, ensure_ascii=False)


def _day(when: datetime | str | None) -> str:
    if when is None:
        return ""
    return (datetime.fromisoformat(when) if isinstance(when, str) else when).date().isoformat()


def _status(item: MemoryItem) -> str:
    """A fact's status, "closed" for an edge that no longer holds, else the record's kind."""
    meta = item.metadata
    if "status" in meta:
        return str(meta["status"])
    if meta.get("current") is False:
        return "closed"
    return str(meta.get("kind", ""))


def _one_line(text: str, width: int = _TEXT_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def items_text(items: Sequence[MemoryItem]) -> str:
    """One line per memory: id, tier, subject, status, date, text (and score for a recall); what no longer
    holds is marked "(past, until DATE)" before its text."""
    if not items:
        return "(no memories)"
    rows = []
    for item in items:
        score = [f"{item.score:.3f}"] if isinstance(item, RankedMemoryItem) else []
        text = " ".join(filter(None, [item.past_mark(), _one_line(item.text)]))
        rows.append([*score, item.id, item.tier, item.subject, _status(item), _day(item.created_at), text])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]) for row in rows)


def item_text(item: MemoryItem) -> str:
    """One memory in full: its fields, then its metadata and provenance."""
    lines = [
        f"id:          {item.id}",
        f"tier:        {item.tier}",
        f"subject:     {item.subject}",
        f"confidence:  {item.confidence:.2f}",
        f"created:     {item.created_at.isoformat()}",
        f"updated:     {item.updated_at.isoformat()}",
        f"text:        {item.text}",
    ]
    if past := item.past_mark():
        lines.append(f"past:        {past}")
    if item.provenance:
        lines.append(f"provenance:  {', '.join(item.provenance)}")
    lines += [f"{key + ':':<12} {value}" for key, value in item.metadata.items() if value not in (None, "", [], {})]
    return "\n".join(lines)


def versions_text(versions: Sequence[MemoryVersion]) -> str:
    """The supersession chain oldest first, each version with its validity and the turns behind it."""
    blocks = []
    for v in versions:
        flags = " pinned" if v.pinned else ""
        since = (v.valid_from or v.item.created_at).isoformat(timespec="minutes")
        until = v.valid_to.isoformat(timespec="minutes") if v.valid_to else "now"
        lines = [f"{v.item.id}  {v.status}{flags}  {since} -> {until}", f"  {v.item.subject}: {v.item.text}"]
        if v.supersedes:
            lines.append(f"  replaces {', '.join(v.supersedes)}")
        for turn in v.turns:
            said = _one_line(turn.text.replace("\n", " | "), 200)
            lines.append(f"  from {turn.id} ({turn.created_at.isoformat(timespec='minutes')}): {said}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def users_text(users: Sequence[MemoryContext]) -> str:
    if not users:
        return "(no users)"
    width = max(len(u.namespace) for u in users)
    return "\n".join(f"{u.namespace.ljust(width)}  {u.user_id}" for u in users)


def _megabytes(size: int | None) -> str:
    return "unknown (not a local folder)" if size is None else f"{size / 1_000_000:.1f} MB ({size} bytes)"


def stats_text(stats: MemoryStats) -> str:
    """Counts per tier and status, pending work, bytes on disk."""
    lines = []
    for tier, per_status in stats.counts.items():
        shown = ", ".join(f"{n} {status}" for status, n in sorted(per_status.items())) or "0"
        lines.append(f"{tier + ':':<10} {shown}")
    pending = ", ".join(f"{n} {what}" for what, n in stats.pending.items() if n) or "none"
    lines += [f"{'pending:':<10} {pending}", f"{'on disk:':<10} {_megabytes(stats.bytes_on_disk)} (whole store)"]
    return "\n".join(lines)


def store_stats_text(per_user: Sequence[tuple[MemoryContext, MemoryStats]], size: int | None) -> str:
    """One line per user (memories per tier, turns pending), then the store's size."""
    lines = []
    for ctx, stats in per_user:
        totals = {tier: sum(c.values()) for tier, c in stats.counts.items()}
        shown = ", ".join(f"{n} {tier}" for tier, n in totals.items() if n)
        lines.append(
            f"{ctx.namespace}/{ctx.user_id}: {shown or 'empty'}; {stats.pending.get('turns', 0)} turns pending"
        )
    lines.append(f"{len(per_user)} user(s); on disk: {_megabytes(size)}")
    return "\n".join(lines)


def forget_text(report: ForgetReport) -> str:
    """What ``forget`` removed."""
    parts = {
        "version(s)": report.forgotten, "edge(s)": report.edges_removed,
        "derived record(s)": report.derived_removed, "turn(s)": report.turns_removed,
    }  # fmt: skip
    text = "forgot " + ", ".join(f"{len(ids)} {what}" for what, ids in parts.items() if ids)
    text += f"; rewrote {len(report.texts_rewritten)} record(s) without it" if report.texts_rewritten else ""
    return text + ("; the digest was rewritten" if report.digest_rewritten else "")


def history_text(report: HistoryReport) -> str:
    """What ``import-history`` did."""
    again = f" ({report.duplicates} already there)" if report.duplicates else ""
    text = f"imported {report.conversations} conversation(s), {report.turns} turn(s){again}: "
    text += f"{report.episodes} episode(s), {report.consolidated} consolidated"
    text += f"; {report.deferred} deferred (retried by the worker)" if report.deferred else ""
    for work in report.leased:  # not done: another holder's lease covers it
        until = f"until {work.until.isoformat(timespec='seconds')}" if work.until else "released since"
        text += f"\nnot done: {work.what} is leased by {work.holder or 'another process'} ({until}); run it again then"
    return text


def counts_text(verb: str, counts: Mapping[str, int]) -> str:
    """``imported 3 fact, 1 episode`` from a report's counts per kind."""
    shown = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    return f"{verb} {shown or 'nothing'}"


def janitor_text(report: Mapping[str, Any]) -> str:
    """What a janitor run removed (a dry run: would remove) per tier, and the users its guard stopped."""
    verb = "would remove" if report["dry_run"] else "removed"
    removed = {
        "fact(s) archived": report["facts_archived"], "episode(s) expired": report["episodes_expired"],
        "turn(s) deleted": report["turns_removed"], "working entries faded": report["working_faded"],
        "edge(s) closed or deleted": report["edges_removed"],
    }  # fmt: skip
    lines = [f"{report['users']} user(s), {verb}: " + ", ".join(f"{n} {what}" for what, n in removed.items())]
    if report["turns_kept"]:
        lines.append(f"{report['turns_kept']} turn(s) of expired episodes kept: live facts cite them")
    for stop in report["stopped"]:
        spared = ", ".join(f"{n} {tier}" for tier, n in stop["would_remove"].items())
        lines.append(
            f"stopped for {stop['namespace']}/{stop['user_id']}: it would remove {spared} "
            f"({stop['share']:.0%} of {stop['held']}); nothing of theirs changed (--force runs it)"
        )
    return "\n".join(lines)
