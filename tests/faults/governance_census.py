"""The governance census: every piece of governance and every erasure checked against every row of the store.

Four counts, each 0 when nothing went wrong:

- *lost*: a captured turn of a user kept missing from a tier it should reach (from the turns' census), or a
  governance change that does not hold at the end (a pin gone, an update or forget undone, feedback
  missing from its fact);
- *duplicated*: a row id twice in a table, a turn found twice in a tier, two active versions of one fact
  (a chain of ``superseded_by`` with more than one active link), two active facts of one text;
- *resurrected*: a row of an erased user in any table (a lease naming them included), after the erase
  returned and all work finished;
- *cross-user*: a row carrying a token another user said, an attempt on another user's fact that was not
  refused as not found, or that fact changed.

Rows are read as stored (:func:`.census.rows`), records as raw JSON: duplicates and stray fields show.
A forgotten fact's turns stay (``forget`` keeps what the user said): only the other tables are searched for it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from tiermem import Store

from .census import TABLES, TIERS, Census, Spec, rows
from .model import tokens_in

__all__ = ["GovernanceCensus", "govern_census"]


@dataclass(kw_only=True)
class GovernanceCensus:
    """The four counts, one line per finding, and the failures the processes reported."""

    lost: int = 0
    duplicated: int = 0
    resurrected: int = 0
    cross_user: int = 0
    details: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def count(self, what: str, detail: str, n: int = 1) -> None:
        if n:
            setattr(self, what, getattr(self, what) + n)
            self.details.append(f"{what}: {detail}")

    def problems(self) -> list[str]:
        """Every finding and every failure; empty when the four counts are 0 and nothing failed."""
        return [*self.details[:30], *(f"failure: {f}" for f in self.failures[:10])]


def govern_census(
    store: Store, specs: Sequence[Spec], turns: Census, ops: Sequence[dict[str, Any]], erased: Collection[str]
) -> GovernanceCensus:
    """Check ``ops`` (the processes' governance log) and the erasure of ``erased`` against ``store``."""
    found = GovernanceCensus()
    for tier in TIERS:
        found.count("lost", f"{tier}: {turns.lost(tier)} turns missing", turns.lost(tier))
    for table, n in turns.duplicate_rows.items():
        found.count("duplicated", f"{table}: {n} rows share an id", n)
    for tier, n in turns.doubled.items():
        found.count("duplicated", f"{tier}: {n} turns found twice", n)
    found.count("duplicated", f"facts: {turns.same_text_facts} active facts share a text", turns.same_text_facts)
    tables = {name: rows(store, name) for name in TABLES}
    records = {name: [json.loads(r["record"]) for r in stored if "record" in r] for name, stored in tables.items()}
    owner = {s.token: s.user_id for s in specs}
    owner |= {t: op["user"] for op in ops if op.get("new_text") for t in tokens_in([op["new_text"]])}
    for name, table_records in records.items():
        for record in table_records:
            user = record.get("user_id")
            if user in erased:
                found.count("resurrected", f"{name} {record['id']} of erased {user}")
            strangers = {owner[t] for t in tokens_in([json.dumps(record)]) if t in owner} - {user}
            if strangers:
                found.count("cross_user", f"{name} {record['id']} of {user} says what {sorted(strangers)} said")
    for lease in tables["leases"]:
        named = [u for u in erased if str(lease["id"]).endswith(f":{u}")]
        if named:
            found.count("resurrected", f"lease {lease['id']} names erased {named[0]}")
    facts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records["facts"]:
        facts[record["id"]].append(record)
    _versions(found, records["facts"])
    everything = [(name, r) for name, table_records in records.items() if name != "turns" for r in table_records]
    for op in ops:
        if op["user"] not in erased and op.get("owner") not in erased:
            _check(found, op, {i: v[-1] for i, v in facts.items()}, everything)
    return found


def _versions(found: GovernanceCensus, facts: Sequence[dict[str, Any]]) -> None:
    """Two active versions of one fact: its ``superseded_by`` chain, grouped, has more than one active."""
    parent = {f["id"]: f["id"] for f in facts}

    def root(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for f in facts:
        if f.get("superseded_by") in parent:
            parent[root(f["id"])] = root(f["superseded_by"])
    active: dict[str, int] = defaultdict(int)
    for f in facts:
        active[root(f["id"])] += f["status"] == "active"
    for group, n in active.items():
        found.count("duplicated", f"facts: {n} active versions of {group}", max(n - 1, 0))


def _check(
    found: GovernanceCensus, op: dict[str, Any], facts: dict[str, dict[str, Any]], everything: list[tuple[str, Any]]
) -> None:
    """Whether one piece of governance holds at the end."""
    kind, fid, outcome = op["kind"], op.get("fact"), op.get("outcome")
    fact = facts.get(fid) if fid else None
    what = f"{kind} of {fid} ({op['user']})"
    if kind == "cross-user":
        if outcome not in ("refused", "skipped", "erased"):
            found.count("cross_user", f"{what}: another user's fact was {outcome}, not refused")
        changed = fact is None or fact["status"] != "active" or fact["pinned"] or fact["text"] != op["text"]
        if changed or (fact or {}).get("metadata", {}).get("feedback"):
            found.count("cross_user", f"{what}: the fact of {op['owner']} changed: {fact}")
        return
    if outcome != "ok" or op.get("recalled") is False:
        return  # skipped (being erased), or feedback on a fact recall did not return
    if kind == "pin" and not (fact and fact["status"] == "active" and fact["pinned"]):
        found.count("lost", f"{what}: not an active pinned fact at the end: {fact}")
    elif kind in ("update", "update twice"):
        won = [op["new"]] if kind == "update" else op["won"]
        if len(won) != 1:
            found.count("duplicated" if won else "lost", f"{what}: {len(won)} of two updates went through")
        new = facts.get(won[0]) if won else None
        if not (fact and fact["status"] == "superseded" and won and fact["superseded_by"] == won[0]):
            found.count("lost", f"{what}: the old version is not superseded by the update: {fact}")
        if not (new and new["status"] == "active" and tokens_in([new["text"]]) == tokens_in([op["new_text"]])):
            found.count("lost", f"{what}: the update is not the active version: {new}")
    elif kind == "forget":
        gone = set(tokens_in([op["text"]]))
        if fact is not None:
            found.count("lost", f"{what}: the forgotten fact is back: {fact}")
        said = [f"{name} {r['id']}" for name, r in everything if r.get("user_id") == op["user"]
                and gone & set(tokens_in([json.dumps(r)]))]  # fmt: skip
        if said:
            found.count("lost", f"{what}: {len(said)} rows still say it: {said[:3]}")
    elif kind == "feedback":
        events = (fact or {}).get("metadata", {}).get("feedback", [])
        if not any(e.get("receipt") == op["receipt"] for e in events):
            found.count("lost", f"{what}: the feedback is not on the fact: {fact}")
