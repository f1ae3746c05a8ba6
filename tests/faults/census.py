"""The census: every turn a workload captured, followed through journal, working entries, episodes and facts.

Each turn says one token (see :mod:`tests.faults.model`); the census reads every row of every table of the
store (not the library's reads: duplicate rows must show) and counts, per tier, the turns that reached it
(*lost*: expected, not there) and the turns found there more than once (*doubled*), plus rows sharing an id
in any table and facts sharing a text.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tiermem import Episode, Fact, MemoryContext, Store, Turn, WorkingEntry

from .model import fact_text, token, tokens_in

__all__ = ["TABLES", "TIERS", "Census", "Spec", "rows", "take_census", "workload"]

TABLES = ("turns", "working", "episodes", "facts", "edges", "digests", "aliases", "leases")
TIERS = ("journal", "observed", "working", "episodes", "consolidated", "facts")
_START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@dataclass(frozen=True, kw_only=True)
class Spec:
    """One turn of a workload: who says which token, and how the capture names it."""

    user_id: str
    session_id: str
    index: int
    token: str
    key: str | None = None
    at: datetime | None = None

    @property
    def ctx(self) -> MemoryContext:
        return MemoryContext(user_id=self.user_id, session_id=self.session_id)

    @property
    def messages(self) -> list[dict[str, str]]:
        return [
            {"role": "user", "content": f"Remember {self.token}: it came up on turn {self.index} today."},
            {"role": "assistant", "content": "Noted, I will keep that in mind."},
        ]

    def as_json(self) -> dict[str, Any]:
        """What a worker process captures (``tests/faults/child.py``)."""
        at = self.at.isoformat() if self.at else None
        fields = {k: getattr(self, k) for k in ("user_id", "session_id", "index", "token", "key")}
        return {**fields, "at": at, "messages": self.messages}


def workload(
    *, users: int, sessions: int, turns: int, seed: int, naming: str = "derived", prefix: str = "s"
) -> list[Spec]:
    """``users`` x ``sessions`` x ``turns`` turns, each with its token.

    ``naming``: ``"derived"`` (the library derives each key from the messages), ``"keyed"`` (a caller key),
    ``"dated"`` (``at=``, the turn's own time) or ``"mixed"`` (keyed and dated in turn).
    """
    specs = []
    for u in range(users):
        for s in range(sessions):
            for i in range(turns):
                kind = naming if naming != "mixed" else ("keyed", "dated")[i % 2]
                specs.append(
                    Spec(
                        user_id=f"u-{u}",
                        session_id=f"{prefix}-{s}",
                        index=i,
                        token=token(seed, u, prefix, s, i),
                        key=f"req-{seed}-{u}-{prefix}-{s}-{i}" if kind == "keyed" else None,
                        at=_START + timedelta(days=s, minutes=i) if kind == "dated" else None,
                    )
                )
    return specs


def rows(store: Store, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` as stored, duplicates included (the library's reads are not used)."""
    if table not in store._table_names():
        return []
    data = store.table(table).to_arrow() if table != "leases" else store._leases().to_arrow()
    columns = ["id", "record"] if "record" in data.column_names else ["id"]
    return data.select(columns).to_pylist()  # type: ignore[no-any-return]


def _records(rows: Iterable[dict[str, Any]], model: type[Any]) -> list[Any]:
    return [model.model_validate(json.loads(r["record"])) for r in rows]


@dataclass(kw_only=True)
class Census:
    """Per tier: turns expected, reached, lost and doubled; per table: duplicate rows."""

    expected: int
    reached: dict[str, int] = field(default_factory=dict)
    doubled: dict[str, int] = field(default_factory=dict)
    duplicate_rows: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    same_text_facts: int = 0
    strangers: int = 0
    """Turns journaled that the workload never captured."""
    unfinished: dict[str, int] = field(default_factory=dict)
    """Work left: turns not observed, episodes not consolidated, working entries still active."""
    reinforced: int = 0
    """Token facts reinforced (each token is said in one episode: reinforcing one would repeat evidence)."""
    seq_clashes: int = 0
    """Turns sharing a ``seq`` with another turn of their session."""
    details: list[str] = field(default_factory=list)

    def lost(self, tier: str) -> int:
        return self.expected - self.reached.get(tier, 0)

    def problems(self) -> list[str]:
        """What is wrong, one line each; empty when nothing was lost or doubled anywhere."""
        found = [f"{tier}: {self.lost(tier)} of {self.expected} turns lost" for tier in TIERS if self.lost(tier)]
        found += [f"{tier}: {n} turns doubled" for tier, n in self.doubled.items() if n]
        found += [f"{table}: {n} duplicate rows" for table, n in self.duplicate_rows.items() if n]
        found += [f"{what}: {n} unfinished" for what, n in self.unfinished.items() if n]
        if self.same_text_facts:
            found.append(f"facts: {self.same_text_facts} facts share their text with another")
        if self.strangers:
            found.append(f"journal: {self.strangers} turns nobody captured")
        if self.reinforced:
            found.append(f"facts: {self.reinforced} facts reinforced by a repeat of their own evidence")
        if self.seq_clashes:
            found.append(f"journal: {self.seq_clashes} turns share their seq")
        return found + self.details[:20]


def take_census(store: Store, specs: Sequence[Spec], *, rewritten: Collection[str] = ()) -> Census:
    """Count every turn of ``specs`` through every tier of ``store``.

    ``rewritten``: tokens a governance write took out of the texts derived from their turn (a fact
    updated or forgotten): those turns are followed by provenance only (journal, observed, episodes,
    consolidated), not into working entries and facts.
    """
    tables = {name: rows(store, name) for name in TABLES}
    census = Census(expected=len(specs))
    for name, stored in tables.items():
        ids = Counter(r["id"] for r in stored)
        census.rows[name] = len(stored)
        census.duplicate_rows[name] = sum(n - 1 for n in ids.values())
    turns: list[Turn] = _records(tables["turns"], Turn)
    entries: list[WorkingEntry] = _records(tables["working"], WorkingEntry)
    episodes: list[Episode] = _records(tables["episodes"], Episode)
    facts: list[Fact] = _records(tables["facts"], Fact)
    _journal(census, specs, turns)
    by_token = {t: turn for turn in turns for t in tokens_in(m.content for m in turn.messages)}
    wanted = {s.token for s in specs}

    def follow(tier: str, found: Mapping[str, Sequence[Any]], check: Any = None) -> None:
        reached = doubled = 0
        followed = [s for s in specs if tier not in ("working", "facts") or s.token not in rewritten]
        for spec in followed:
            hits = found.get(spec.token, [])
            ok = [h for h in hits if check is None or check(spec, h)]
            reached += 1 if ok else 0
            doubled += 1 if len(hits) > 1 else 0
            if not ok and len(census.details) < 20:
                census.details.append(f"{tier}: {spec.user_id}/{spec.session_id}#{spec.index} {spec.token} missing")
        census.reached[tier] = reached + len(specs) - len(followed)  # the rewritten reached it, then left it
        census.doubled[tier] = doubled

    def turn_of(spec: Spec) -> Turn | None:
        return by_token.get(spec.token)

    follow("observed", {t: [x] for t, x in by_token.items() if x.status == "observed"})
    follow("working", _index(entries, lambda e: e.text), lambda s, e: (t := turn_of(s)) and t.id in e.provenance)
    by_turn: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        for turn_id in set(episode.provenance):
            by_turn[turn_id].append(episode)
    in_episodes = {t: by_turn.get(x.id, []) for t, x in by_token.items()}
    follow("episodes", in_episodes)
    follow("consolidated", in_episodes, lambda s, e: e.status == "consolidated")
    active = [f for f in facts if f.status == "active"]
    follow("facts", _index(active, lambda f: f.text), lambda s, f: _traced(s, f, turn_of(s)))
    census.same_text_facts = sum(n - 1 for n in Counter(" ".join(f.text.lower().split()) for f in active).values())
    census.reinforced = sum(  # feedback ("used") reinforces too: not a repeat of evidence
        1 for f in active if f.reinforcements > _fed_back(f) and set(tokens_in([f.text])) <= wanted
    )
    census.unfinished = {
        "turns not observed": sum(1 for t in turns if t.status != "observed"),
        "episodes not consolidated": sum(1 for e in episodes if e.status != "consolidated"),
        "working entries active": sum(1 for e in entries if e.status == "active"),
    }
    return census


def _journal(census: Census, specs: Sequence[Spec], turns: Sequence[Turn]) -> None:
    said = Counter(t for turn in turns for t in tokens_in(m.content for m in turn.messages))
    wanted = {s.token for s in specs}
    census.reached["journal"] = sum(1 for s in specs if said[s.token])
    census.doubled["journal"] = sum(1 for s in specs if said[s.token] > 1)
    census.strangers = sum(1 for turn in turns if not set(tokens_in(m.content for m in turn.messages)) & wanted)
    seqs = Counter((t.namespace, t.user_id, t.session_id, t.seq) for t in turns)
    census.seq_clashes = sum(n for n in seqs.values() if n > 1)


def _fed_back(fact: Fact) -> int:
    """How often feedback reinforced ``fact`` (each use logged in ``metadata["feedback"]``)."""
    events = fact.metadata.get("feedback", ())
    if not isinstance(events, list):
        return 0
    return sum(1 for e in events if isinstance(e, dict) and e.get("signal") == "used")


def _index(records: Iterable[Any], text: Any) -> dict[str, list[Any]]:
    """Records by the tokens their text says."""
    found: dict[str, list[Any]] = defaultdict(list)
    for record in records:
        for t in tokens_in([text(record)]):
            found[t].append(record)
    return found


def _traced(spec: Spec, fact: Fact, turn: Turn | None) -> bool:
    """The fact says the token; a fact of one token also names its turn in its provenance."""
    if turn is None:
        return False
    return fact.text != fact_text([spec.token]) or turn.id in fact.provenance
