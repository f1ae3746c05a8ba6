"""What a forget takes out of derived text: the forgotten memory's words that nothing kept says.

``forget`` deletes a memory, and every text derived from it (an episode's summary, an observation,
the digest, retrieval keys, a turn's context) must stop saying it. A sentence is drawn from the
forgotten memory when it carries one of its *forgotten terms*: the content words of the forgotten
texts (lightly stemmed, as recall matches them: "cellos" is "cello") that no kept text uses, the
kept texts being the user's remaining facts and relations and their display names. The extractive
rewrite drops those sentences; a model's rewrite is valid only if it carries none of them.

Erring towards removal is deliberate: a sentence that shares a forgotten term with the forgotten
memory goes even when it came from elsewhere, so no forgotten word stays findable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ._text import split_sentences, terms

__all__ = ["Forgotten"]


@dataclass(frozen=True, kw_only=True)
class Forgotten:
    """The texts a forget removes, and the terms only they carry."""

    texts: tuple[str, ...]
    """The forgotten memories' texts (what a model rewriting a summary is told to leave out)."""
    terms: frozenset[str]
    """Their content terms that no kept text uses."""

    @classmethod
    def of(cls, texts: Iterable[str], *, kept: Iterable[str]) -> Forgotten:
        """The forgotten ``texts``, their terms less those of the ``kept`` texts."""
        unique = tuple(dict.fromkeys(" ".join(t.split()) for t in texts if t.strip()))
        said = frozenset[str]().union(*(terms(t) for t in unique))
        known = frozenset[str]().union(*(terms(k) for k in kept))
        return cls(texts=unique, terms=said - known)

    def __bool__(self) -> bool:
        return bool(self.terms)

    def carried(self, text: str) -> frozenset[str]:
        """The forgotten terms ``text`` still carries."""
        return terms(text) & self.terms

    def carries(self, text: str) -> bool:
        """Whether ``text`` says anything only the forgotten memory said."""
        return bool(self.carried(text))

    def redact(self, text: str) -> str:
        """``text`` without its sentences that carry a forgotten term (empty when none is left)."""
        if not self.carries(text):
            return text
        return " ".join(s for s in split_sentences(text) if not self.carries(s))
