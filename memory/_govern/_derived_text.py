"""Forget reaches every derived text: what was written from a forgotten memory stops saying it.

Deleting a memory leaves its words in the texts derived from it: an episode's summary ("Tom plays
the cello"), an observation of the session, the digest, a surviving memory's retrieval keys, and
the next turn's context (its copy of the previous turn, searched with it). :class:`DerivedText`
rewrites each of them before the memory is deleted (so a crash leaves a forget to rerun), each
record keeping its id and getting a fresh vector:

- an episode's summary through the stage model (``rewrite``; the rules model drops the sentences
  drawn from the forgotten memory, an LLM rewrites the summary and its answer must carry none of the
  forgotten terms). When the model fails, after its retries, the extractive rewrite is stored and the
  episode carries the error (``metadata["redact_error"]``): the forgotten text is never left in
  place meanwhile. A summary with nothing left goes, like an episode without source;
- observations lose those sentences (one left empty goes); retrieval keys carrying a forgotten term go;
- a surviving turn whose previous turn is removed (``include_turns``) loses its context;
- a digest that still carries a forgotten term is deleted and rewritten, like one written from it.

What is forgotten is :class:`~tiermem.memory._redaction.Forgotten`: the removed memories' texts (a
removed turn's by what its people said), less the words the user's remaining facts and relations use.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from .._blocking import run_blocking
from .._errors import ModelError
from .._records import Episode, MemoryContext, Turn
from .._redaction import Forgotten
from .._store import TableName, Where
from .._subjects import USER
from .._text import terms
from .._tiers import scope
from ._governance import Governance, Record

__all__ = ["DerivedText", "TextRewriter"]

log = logging.getLogger(__name__)

TextRewriter = Callable[[str, Forgotten], Awaitable[str]]
"""Rewrites a derived text without the forgotten memory (the stage model's ``redact`` stage)."""


class DerivedText:
    """Rewrites what survives a forget so that none of it says the forgotten memory."""

    def __init__(self, governance: Governance, *, rewrite: TextRewriter | None = None) -> None:
        self.governance = governance
        self.store = governance.store
        self.rewrite = rewrite

    def forgotten(self, ctx: MemoryContext, gone: dict[TableName, set[str]]) -> Forgotten:
        """What ``gone`` (ids per table, about to be deleted) says that the user's kept memory does not."""
        where = Where(eq=scope(ctx))
        said: list[str] = []
        kept: list[str] = [a.name for a in self.store.query("aliases", where)]
        memory: list[Record] = [*self.store.query("facts", where), *self.store.query("edges", where)]
        for r in memory:  # the memory kept: its words stay wherever they are
            (said if r.id in gone["facts"] | gone["edges"] else kept).append(_said(r))
        removed: list[Record] = [
            *self.store.get("working", where, sorted(gone["working"])),
            *self.store.get("episodes", where, sorted(gone["episodes"])),
            *self.store.get("turns", where, sorted(gone["turns"])),
        ]
        said += [_said(r) for r in removed]
        return Forgotten.of(said, kept=kept)

    async def rewrite_all(
        self, ctx: MemoryContext, gone: dict[TableName, set[str]], forgotten: Forgotten
    ) -> tuple[set[str], bool]:
        """Rewrite every surviving derived text that carries ``forgotten``: the ids rewritten, and whether
        the digest still carries it. Records it empties join ``gone``, and so does such a digest."""
        if not forgotten:
            return set(), False
        where = Where(eq=scope(ctx))
        episodes = await run_blocking(self.store.query, "episodes", where)
        carrying = [e for e in episodes if e.id not in gone["episodes"] and forgotten.carries(e.summary)]
        rewritten = {e.id: await self._episode(e, forgotten) for e in carrying}
        done = await run_blocking(
            self._store_rewrites, ctx, gone, forgotten, [e for e in rewritten.values() if e is not None]
        )
        gone["episodes"] |= {i for i, new in rewritten.items() if new is None}
        digests = await run_blocking(self.store.query, "digests", where)
        carried = any(forgotten.carries(d.text) for d in digests) and not gone["digests"]
        if carried:
            gone["digests"] |= {d.id for d in digests}
        return done, carried

    async def _episode(self, episode: Episode, forgotten: Forgotten) -> Episode | None:
        """``episode`` with its summary rewritten (None: nothing is left of it)."""
        meta = {k: v for k, v in episode.metadata.items() if k != "redact_error"}
        try:
            summary = await (self.rewrite or _redact_async)(episode.summary, forgotten)
        except ModelError as exc:  # retried by the model already: store the extractive rewrite, keep the error
            # Said without the model's message: it quotes the text, and so the forgotten memory.
            error = f"{type(exc).__name__}: the {exc.model or 'model'}'s rewrite failed after {exc.attempts} attempts"
            log.warning("forget: episode %s rewritten extractively; %s", episode.id, error)
            summary, meta = forgotten.redact(episode.summary), {**meta, "redact_error": error}
        summary = " ".join(summary.split())
        if not summary:
            return None
        subjects = tuple(s for s in episode.subjects if s == USER or not terms(s.replace("-", " ")) <= forgotten.terms)
        now = self.governance.clock.now()
        return episode.model_copy(
            update={"summary": summary, "subjects": subjects or (USER,), "updated_at": now, "metadata": meta}
        )

    def _store_rewrites(
        self, ctx: MemoryContext, gone: dict[TableName, set[str]], forgotten: Forgotten, episodes: list[Episode]
    ) -> set[str]:
        """Store the rewritten episodes, and the observations, keys and turn contexts rewritten here; their ids."""
        where = Where(eq=scope(ctx))
        self.governance.put("episodes", episodes)
        working: list[Record] = []
        for entry in self.store.query("working", where):
            if entry.id in gone["working"]:
                continue
            text = forgotten.redact(entry.text)
            if not text:
                gone["working"].add(entry.id)
            elif text != entry.text or _carrying(entry.keys, forgotten):
                working.append(entry.model_copy(update={"text": text, "keys": _kept(entry.keys, forgotten)}))
        self.governance.put("working", working)
        facts: list[Record] = [
            f.model_copy(update={"keys": _kept(f.keys, forgotten)})
            for f in self.store.query("facts", where)
            if f.id not in gone["facts"] and _carrying(f.keys, forgotten)
        ]
        self.governance.put("facts", facts)
        turns = _orphaned_contexts(self.store.query("turns", where), gone["turns"]) if gone["turns"] else []
        self.governance.put("turns", turns)
        return {r.id for r in [*episodes, *working, *facts, *turns]}


async def _redact_async(text: str, forgotten: Forgotten) -> str:
    return forgotten.redact(text)


def _said(record: Record) -> str:
    """What a record says: a turn by its people (not the assistant's reply), an episode by its summary."""
    if isinstance(record, Turn):
        return " ".join(m.content for m in record.messages if m.role == "user")
    if isinstance(record, Episode):
        return record.summary
    return record.text


def _carrying(keys: Iterable[str], forgotten: Forgotten) -> bool:
    return any(forgotten.carries(k) for k in keys)


def _kept(keys: Iterable[str], forgotten: Forgotten) -> tuple[str, ...]:
    return tuple(k for k in keys if not forgotten.carries(k))


def _orphaned_contexts(turns: list[Turn], removed: set[str]) -> list[Record]:
    """The surviving turns right after a removed one, without the context they copied from it."""
    by_place = {(t.session_id, t.seq): t for t in turns}
    return [
        t.model_copy(update={"context": ""})
        for t in turns
        if t.id not in removed and t.context and (p := by_place.get((t.session_id, t.seq - 1))) and p.id in removed
    ]
