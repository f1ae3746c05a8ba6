"""A record's text: checked on the way into the repository, and the text its vector is embedded from."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from ._errors import InvalidArgumentError
from ._records import Chunk, Digest, Edge, Episode, Fact, Message, Turn, WorkingEntry
from ._text import CHAT_WORDS, content_terms, encodable, split_sentences

__all__ = [
    "EMBED_RECIPE",
    "MAX_TEXT",
    "Embedded",
    "changed_since",
    "checked_text",
    "embedded_text",
    "embedded_vectors",
    "own_voice",
    "turn_sentences",
    "turn_sides",
]

MAX_TEXT = 8000
# The version of :func:`embedded_text`, recorded in each store beside its embedder: bump it when the
# text a record is embedded from changes, so a store embedded the old way is reported and
# ``tiermem reembed`` re-embeds it (a store recording none was embedded by version 1).
# 2: a turn's messages without their role labels; 3: what is written of the user, in their voice;
# 4: a turn's two sides apart, a vector each (what people said, what the assistant replied);
# 5: and a vector for each sentence of a side that says more than one
EMBED_RECIPE = 5
Embedded = Turn | WorkingEntry | Episode | Fact | Edge | Digest | Chunk
# The record types whose embedded text each recipe changed from the one before: a store moving up only
# re-embeds those (recipe 2 touched turns alone). Add an entry with every bump.
RECIPE_CHANGES: dict[int, tuple[type[Embedded], ...]] = {
    2: (Turn,),
    3: (WorkingEntry, Episode, Fact, Digest),
    4: (Turn,),
    5: (Turn,),
}
# The most sentences of one turn embedded apart: past it, neighbouring sentences share a vector (a pasted
# document stays a few dozen vectors, not hundreds).
MAX_SENTENCES = 32


def changed_since(recipe: str) -> tuple[type[Embedded], ...] | None:
    """The record types embedded otherwise now than by ``recipe``; None when not known (re-embed them all)."""
    try:
        since = int(recipe)
    except ValueError:
        return None
    versions = range(since + 1, EMBED_RECIPE + 1)
    if not 1 <= since <= EMBED_RECIPE or any(v not in RECIPE_CHANGES for v in versions):
        return None
    return tuple(dict.fromkeys(t for v in versions for t in RECIPE_CHANGES[v]))


def embedded_text(record: Embedded) -> str:
    """The text whose vector a record is stored with: an episode's summary, otherwise its text.

    A turn's is what people said in it (:func:`turn_sides`; the assistant's reply has a vector of its
    own), each message after its speaker's name if it has one (not after its role); an
    edge's is ``source --relation--> target``. Retrieval keys are
    not embedded: measured, broader terms in the vector cost the default embedder hit@1 and let the
    static one recall more unrelated cues (bench/RESULTS-paraphrase.md, "Retrieval keys"); they are
    searched by full text instead (:func:`~tiermem.memory._index._rows.search_context`).
    A change here is a new :data:`EMBED_RECIPE`.
    """
    if isinstance(record, Episode):
        return own_voice(record.summary)
    if isinstance(record, WorkingEntry | Fact | Digest):
        return own_voice(record.text)
    if isinstance(record, Turn):
        # A role ("user", "assistant") labels half of all turns alike: it tells nothing about a turn and
        # moves every turn's vector one way, off the background the meaning gate is calibrated on
        # (labelled background sentences: mean centered cosine 0.12, not 0.0), so paraphrases fell under
        # the gate (bench/RESULTS.md, "Recall by meaning over turns"). A speaker's name stays: a cue names it.
        return turn_sides(record)[0]
    return record.text


def turn_sides(turn: Turn) -> tuple[str, str]:
    """A turn's two embedded texts: what people said (its user's messages, and any message naming its
    speaker) and what was said back (the assistant's, a tool's); a turn of one side gives it twice.

    Apart, because one vector of both is neither: a reply that only acknowledges ("Got it, I'll keep
    that in mind.") dilutes the user's words below the meaning gate, and a short prompt ("Anything
    else?") dilutes an answer that carries the turn's meaning. A cue meets a turn at the better of
    the two (bench/RESULTS.md, "A vector for each side of a turn").
    """

    def joined(messages: Sequence[Message]) -> str:
        return "\n".join(f"{m.name}: {m.content}" if m.name else m.content for m in messages)

    said = [m for m in turn.messages if m.role == "user" or m.name]
    replied = [m for m in turn.messages if not (m.role == "user" or m.name)]
    if not said or not replied:
        whole = joined(turn.messages)
        return whole, whole
    return joined(said), joined(replied)


def turn_sentences(turn: Turn) -> list[str]:
    """The sentences of a turn embedded apart, for each side that says more than one: a sentence of chat alone
    ("Thanks so much!") left out, one of a single content word ("Hi, I'm Sam.") joined to the next (or the
    one before), a named speaker's with the name; none for a side of one (its vector is the side's).

    One vector of many sentences is mostly the others: a fact the user mentions in passing inside a long
    request ("... by the way, I can't eat nuts, so ...") fell from hit@10 0.97 at the sentence to 0.50 in
    six sentences, and past 256 tokens it is not embedded at all. A cue meets a turn at its best vector
    (bench/RESULTS.md, "A vector for each sentence"). A sentence of one word is that word's vector, close to
    any cue naming it ("Where does Sam work?"): what a word alone matches, full-text search finds.
    """
    said = [m for m in turn.messages if m.role == "user" or m.name]
    replied = [m for m in turn.messages if not (m.role == "user" or m.name)]
    found: list[str] = []
    for side in (said, replied):
        units = [unit for m in side for unit in _statements(m.content, m.name)]
        if len(units) > 1:
            found.extend(units)
    if len(found) > MAX_SENTENCES:  # neighbours grouped, as evenly as they go
        n = len(found)
        found = [" ".join(found[g * n // MAX_SENTENCES : (g + 1) * n // MAX_SENTENCES]) for g in range(MAX_SENTENCES)]
    return found


def _statements(content: str, name: str | None) -> list[str]:
    """A message's sentences that say something, a one-word sentence joined to its neighbour."""
    units: list[str] = []
    pending = ""
    for sentence in split_sentences(content):
        words = len(content_terms(sentence, ignore=CHAT_WORDS))
        if not words:
            continue
        sentence = f"{pending} {sentence}".strip()
        if words < 2 and not pending:
            pending = sentence
            continue
        units.append(sentence)
        pending = ""
    if pending:
        units[-1:] = [f"{units[-1]} {pending}" if units else pending]
    return [f"{name}: {u}" for u in units] if name else units


def embedded_vectors(
    records: Sequence[Embedded], embed: Callable[[list[str]], np.ndarray]
) -> np.ndarray | list[np.ndarray]:
    """The vectors ``records`` are stored with, embedded in one call: ``(n, d)``, a row each, for every kind
    but turns; for turns a ``(k, d)`` array each, its sides first (what people said, what was said back:
    :func:`turn_sides`) then its sentences (:func:`turn_sentences`)."""
    turns = [isinstance(r, Turn) for r in records]
    if any(turns) and not all(turns):
        raise InvalidArgumentError("turns and other records are embedded apart: they are stored in different tables")
    if not any(turns):
        return np.asarray(embed([embedded_text(r) for r in records]))
    texts = [[*turn_sides(r), *turn_sentences(r)] for r in records if isinstance(r, Turn)]
    unique = list(dict.fromkeys(t for each in texts for t in each))  # a one-sided turn's text is embedded once
    matrix = np.asarray(embed(unique))
    at = {text: n for n, text in enumerate(unique)}
    return [matrix[[at[t] for t in each]] for each in texts]


# "the user" where it is the subject of a clause: at the start, or after a conjunction or a clause's stop.
_SUBJECT_BEFORE = re.compile(
    r"(?:^|[.;:!?,(]|\b(?:and|but|or|so|that|when|while|because|since|until|after|before|if|as|then|where|who)\b)"
    r"\s*$",
    re.IGNORECASE,
)
_THE_USER = re.compile(
    r"\b(?:the\s+user|user(?=\s+(?:is|has|was|had|does|did|can|will|would|likes|wants)\b))('s)?\b"
    r"(?!\s+(?:interfaces?|experiences?|base|manuals?|accounts?|names?|ids?|guides?|stor(?:y|ies)|research|"
    r"groups?|data|testing|tests?|feedback|flows?|journeys?|profiles?|settings|agreements?|acceptance|input|"
    r"sessions?|tables?|models?|roles?|permissions|lists?|management|space|mode|friendly|count|agent)\b)",
    re.IGNORECASE,
)  # not "the user interface", "the user base": "user" as a noun's modifier
_VERBS = {"is": "am", "has": "have", "does": "do"}
_I_VERB = re.compile(r"\b(I|i) (is|has|does)\b")


def own_voice(text: str) -> str:
    """``text`` written of the user ("The user's sister moved to Rome.") in the user's own voice ("My sister
    moved to Rome."): the text its vector is embedded from, not the text shown.

    Observers write every memory about the user in the third person, so "the user" starts most of them:
    like a role label it moves every such vector one way, away from a cue the user asks in the first
    person (paraphrase cues against their memories rewritten so: centered similarity median 0.456 ->
    0.385, a fifth more of them under the meaning gate; in the user's voice again 0.454). Verbs are
    left as written ("I drinks"), which moves a vector far less than "the user" does.
    """

    def voiced(m: re.Match[str]) -> str:
        before = text[: m.start()]
        capital = not before.strip() or before.rstrip()[-1:] in ".!?"
        word = "my" if m.group(1) else "I" if _SUBJECT_BEFORE.search(before) else "me"
        return word[:1].upper() + word[1:] if capital else word

    voiced_text = _THE_USER.sub(voiced, text)
    return _I_VERB.sub(lambda m: f"{m.group(1)} {_VERBS[m.group(2)]}", voiced_text)


def checked_text(value: object, what: str = "text") -> str:
    """``value`` with its white space folded, if it is a non-empty string of at most :data:`MAX_TEXT` characters."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{what} must be a non-empty string")
    if len(value) > MAX_TEXT:
        raise InvalidArgumentError(f"{what} is longer than {MAX_TEXT} characters")
    return " ".join(encodable(value, what).split())
