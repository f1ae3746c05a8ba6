"""Evidence: the observations, turns and time a consolidated fact comes from.

The consolidator dates each fact by it (``valid_from`` is its earliest turn's time) and orders a batch's
operations by it, so facts said over several sessions consolidated together keep the order they were said in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tiermem.memory._records import Episode, WorkingEntry

__all__ = ["Evidence", "Sources"]


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What one operation was said in: the observations that say it, their turns, its episodes, and when."""

    said: tuple[WorkingEntry, ...]
    turns: tuple[str, ...]
    episodes: list[str]
    since: datetime


_WORD = re.compile(r"[a-z0-9]+")
_GENERIC = frozenset({"user", "the", "and", "a", "an", "to", "of", "in", "on", "at", "for", "is", "was", "with", "s"})


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _GENERIC)


class Sources:
    """Where a fact came from: the observations (and so the turns) that say it, not the whole batch."""

    def __init__(self, episodes: Sequence[Episode], observations: Sequence[WorkingEntry], now: datetime) -> None:
        self._now = now
        self._episodes = {e.id: e for e in episodes}
        self._session = {e.session_id: e.id for e in episodes}
        self._observations = [(o, _words(o.text), self._session.get(o.session_id)) for o in observations]

    def evidence(
        self, text: str, subject: str, named: Sequence[str], excluding: Sequence[WorkingEntry] = ()
    ) -> Evidence:
        """The evidence of a fact stating ``text`` about ``subject``, without the observations ``excluding``
        unless nothing else says it.

        Said in the episodes ``named`` (all when none is valid): in each named one, what says it best there
        (a fact said again sessions later is dated by the first time); among all, what says it best.
        """
        episodes = self.episode_ids(named)
        groups = [[e] for e in episodes] if set(episodes) & set(named) else [episodes]
        said = [obs for group in groups for obs in self.matching(text, subject, group)]
        said = [o for o in said if o not in excluding] or said
        return Evidence(
            said=tuple(said), turns=self.turns(said, episodes), episodes=episodes, since=self.since(said, episodes)
        )

    def episode_ids(self, named: Sequence[str]) -> list[str]:
        valid = [i for i in named if i in self._episodes]
        return valid or list(self._episodes)

    def turns(self, said: Sequence[WorkingEntry], episodes: Sequence[str]) -> tuple[str, ...]:
        """Turns of the observations that say the fact; else the source episodes' turns."""
        if said:
            return tuple(dict.fromkeys(t for obs in said for t in obs.provenance))
        return tuple(dict.fromkeys(t for e in episodes for t in self._episodes[e].provenance))

    def since(self, said: Sequence[WorkingEntry], episodes: Sequence[str]) -> datetime:
        """When the fact was first said: its earliest observation's turn, else its episodes' first turn."""
        times = [o.created_at for o in said] or [self._episodes[e].started_at for e in episodes]
        return min([*times, self._now])

    def matching(self, text: str, subject: str, episodes: Sequence[str]) -> list[WorkingEntry]:
        """The best-matching observations of ``episodes`` (same subject first); none when nothing is close."""
        words = _words(text)
        scored = []
        for obs, obs_words, episode in self._observations:
            if episode not in episodes or not words or not obs_words:
                continue
            overlap = len(words & obs_words) / len(words | obs_words)
            scored.append((overlap + (0.05 if obs.subject == subject else 0.0), obs))
        scored.sort(key=lambda pair: -pair[0])
        if scored and scored[0][0] >= 0.2:
            best = scored[0][0]
            return [obs for score, obs in scored[:3] if score >= 0.6 * best]
        return []
