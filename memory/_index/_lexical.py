"""An in-process BM25 index of one user's rows, held next to their cached vectors.

LanceDB's full-text search with a user filter walks postings of every user and then filters, which
costs ten milliseconds and more per query on a shared table; the user's own rows, indexed in memory,
answer in well under one. The index reads what the store's full-text index reads (the ``text`` and
``context`` columns, one BM25 per column, the better one counting as in :class:`~lancedb.query.MultiMatchQuery`)
and splits and stems words as the engine does (:data:`~.._text.FTS_CONFIG`: runs of letters and
digits, accents folded, the Snowball English stemmer), dropping the project's stop words
(:data:`~.._text.STOP_WORDS`). Measured on LoCoMo, that recalls what LanceDB's index recalls; the
project's light stemmer (:func:`~.._text.stem`) in its place lost 1 point of R@10 on the dev split
and 2.5 on the disjoint slice (it splits "family" from "families"). It lives on a
:class:`~._vectors.VectorBlock`, so it is exactly as fresh as the vectors: written through by this
process's writes, dropped when another process writes.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import Stemmer

from .._filters import fts_cue
from .._text import STOP_WORDS

__all__ = ["FIELDS", "LexicalIndex", "pooled_scores", "query_terms"]

# The columns the store's full-text index covers (``_fts_query`` in _store_search.py), with equal boosts.
FIELDS = ("text", "context")
# BM25 constants: the engine's (Lance / tantivy) defaults.
_K1 = 1.2
_B = 0.75
# Longer tokens are dropped, as the engine's tokenizer does (``max_token_length``).
_MAX_TOKEN = 40
_STOP = -1
# The engine's tokenizer ("simple"): runs of letters and digits, of any script.
_TOKEN = re.compile(r"[^\W_]+")


def _snowball() -> Callable[[str], str]:
    """The engine's stemmer (Snowball English, from PyStemmer)."""
    stemmer = Stemmer.Stemmer("english")
    lock = threading.Lock()  # a PyStemmer stemmer is not thread-safe

    def snowball(word: str) -> str:
        with lock:
            return str(stemmer.stemWord(word))

    return snowball


_stem = lru_cache(maxsize=1 << 16)(_snowball())


def words(text: str) -> list[str]:
    """The engine's tokens of ``text``: lowercase runs of letters and digits, accents folded."""
    return _TOKEN.findall(ascii_folded(text).lower())


class _Analyzer:
    """Raw token -> term id, memoised: most tokens repeat, so stemming runs once per distinct word."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self._seen: dict[str, int] = {}
        # Texts analysed (for one build): a memory's ``context`` column is often its ``text`` again.
        self._texts: dict[str, list[int]] = {}

    def analyse(self, text: str) -> list[int]:
        """The term ids of ``text``, in order, stop words left out."""
        found = self._texts.get(text)
        if found is None:
            found = self._texts[text] = [t for t in map(self.term, words(text)) if t != _STOP]
        return found

    def term(self, word: str) -> int:
        found = self._seen.get(word)
        if found is None:
            found = self.vocab.setdefault(_stem(word), len(self.vocab)) if _indexed(word) else _STOP
            self._seen[word] = found
        return found

    def postings(
        self, texts: Sequence[str | None], first_doc: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(term, doc, tf) arrays of every distinct term of every text, and each text's length in terms."""
        ids: list[int] = []
        counts: list[int] = []
        for text in texts:
            found = self.analyse(text or "")
            ids.extend(found)
            counts.append(len(found))
        lengths = np.asarray(counts, dtype=np.int64)
        docs = np.repeat(np.arange(first_doc, first_doc + len(texts), dtype=np.int64), lengths)
        # One posting per (doc, term): count repeats with a unique over a combined key.
        width = max(len(self.vocab), 1)
        keys, tf = np.unique(docs * width + np.asarray(ids, dtype=np.int64), return_counts=True)
        return keys % width, keys // width, tf, lengths


@dataclass(kw_only=True)
class _Field:
    """One column's postings, sorted by term: term ``t`` owns ``[offsets[t], offsets[t + 1])``."""

    terms: np.ndarray  # int32 per posting (kept for incremental updates)
    docs: np.ndarray  # int32 per posting
    tf: np.ndarray  # float32 per posting
    lengths: np.ndarray  # float32 per doc: terms after analysis
    offsets: np.ndarray  # int64, one more than the vocabulary
    weights: np.ndarray  # float32 per posting: its BM25 before the term's idf (a field never changes)

    @classmethod
    def build(cls, terms: np.ndarray, docs: np.ndarray, tf: np.ndarray, lengths: np.ndarray, vocab: int) -> _Field:
        order = np.lexsort((docs, terms))
        terms, docs, tf = terms[order], docs[order], tf[order]
        offsets = np.zeros(vocab + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=vocab), out=offsets[1:])
        tf32, lengths32 = tf.astype(np.float32), lengths.astype(np.float32)
        # The mean doc length, 1 for none or empty ones (the engine's default).
        average = (float(lengths32.mean()) if len(lengths32) else 0.0) or 1.0
        norm = _K1 * (1.0 - _B + _B * lengths32[docs] / average)
        return cls(
            terms=terms.astype(np.int32),
            docs=docs.astype(np.int32),
            tf=tf32,
            lengths=lengths32,
            offsets=offsets,
            weights=(tf32 * (_K1 + 1.0) / (tf32 + norm)).astype(np.float32),
        )

    @property
    def nbytes(self) -> int:
        return int(
            self.terms.nbytes
            + self.docs.nbytes
            + self.tf.nbytes
            + self.lengths.nbytes
            + self.offsets.nbytes
            + self.weights.nbytes
        )

    def add(self, scores: np.ndarray, term_ids: Sequence[int]) -> None:
        """Add this column's BM25 of each query term to ``scores`` (one slot per doc)."""
        count = len(self.lengths)
        for term in term_ids if count else ():
            start, end = int(self.offsets[term]), int(self.offsets[term + 1])
            if start == end:
                continue
            idf = math.log(1.0 + (count - (end - start) + 0.5) / ((end - start) + 0.5))
            scores[self.docs[start:end]] += idf * self.weights[start:end]


@dataclass(kw_only=True)
class LexicalIndex:
    """BM25 over the ``text`` and ``context`` of a block's rows (row ``i`` is doc ``i``)."""

    vocab: dict[str, int]
    fields: dict[str, _Field]

    @classmethod
    def build(cls, columns: Mapping[str, Sequence[str | None]]) -> LexicalIndex:
        vocab: dict[str, int] = {}
        analyzer = _Analyzer(vocab)
        raw = {name: analyzer.postings(columns[name], 0) for name in FIELDS}
        return cls(vocab=vocab, fields={name: _Field.build(*p, len(vocab)) for name, p in raw.items()})

    def __len__(self) -> int:
        return len(self.fields[FIELDS[0]].lengths)

    @property
    def nbytes(self) -> int:
        """Postings and lengths, plus about a hundred bytes per vocabulary entry (the dict and its strings)."""
        return sum(f.nbytes for f in self.fields.values()) + 100 * len(self.vocab)

    def upsert(self, keep: np.ndarray, columns: Mapping[str, Sequence[str | None]]) -> LexicalIndex:
        """A new index of the rows ``keep`` selects, in order, then ``columns``' rows appended.

        Only the new rows are analysed; the kept postings are renumbered and merged.
        """
        vocab = dict(self.vocab)
        analyzer = _Analyzer(vocab)
        kept = int(keep.sum())
        renumber = np.cumsum(keep) - 1
        fields: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        for name in FIELDS:
            old = self.fields[name]
            live = keep[old.docs]
            terms, docs, tf, lengths = analyzer.postings(columns[name], kept)
            fields[name] = (
                np.concatenate([old.terms[live], terms]),
                np.concatenate([renumber[old.docs[live]], docs]),
                np.concatenate([old.tf[live], tf]),
                np.concatenate([old.lengths[keep], lengths]),
            )
        return LexicalIndex(vocab=vocab, fields={n: _Field.build(*f, len(vocab)) for n, f in fields.items()})

    def scores(self, cue_terms: Sequence[str]) -> np.ndarray:
        """Each row's BM25 for the cue: per column the sum over cue terms, the better column counting.

        The better column, not both: that is how the engine scores a multi-column match (measured
        against LanceDB 0.40), and a turn's ``context`` repeats its ``text``.
        """
        best = np.zeros(len(self), dtype=np.float32)
        ids = [self.vocab[t] for t in cue_terms if t in self.vocab]
        for field in self.fields.values() if ids else ():
            scores = np.zeros(len(self), dtype=np.float32)
            field.add(scores, ids)
            np.maximum(best, scores, out=best)
        return best

    def top(self, cue_terms: Sequence[str], keep: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """The ``limit`` best-scoring rows among ``keep`` that match a cue term: (row, score), best first."""
        scores = self.scores(cue_terms)
        scores[~keep] = 0.0
        matched = np.flatnonzero(scores > 0)
        if len(matched) > limit:
            matched = matched[np.argpartition(-scores[matched], limit - 1)[:limit]]
        matched = matched[np.argsort(-scores[matched], kind="stable")]
        return [(int(i), float(scores[i])) for i in matched]


def _indexed(word: str) -> bool:
    """Whether a word is a term: not a stop word, and no longer than the engine keeps."""
    return len(word) <= _MAX_TOKEN and word not in STOP_WORDS


# Latin letters that are not a base letter plus accents (so NFKD leaves them), folded as the engine folds them.
_LETTERS = str.maketrans(
    {"ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe",
     "Œ": "OE", "þ": "th", "Þ": "TH", "\u0131": "i"}
)  # fmt: skip


def ascii_folded(text: str) -> str:
    """Accents dropped ("Zürich" is "Zurich", "Łódź" is "Lodz"), as the engine's ``ascii_folding`` does."""
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text.translate(_LETTERS)) if not unicodedata.combining(c))


def query_terms(text: str) -> list[str]:
    """The distinct analysed terms of a cue, read as words only (as the store's full-text search reads it)."""
    return list(dict.fromkeys(_stem(w) for w in words(fts_cue(text)) if _indexed(w)))


def pooled_scores(cue: str, texts: Sequence[str], contexts: Sequence[str]) -> np.ndarray:
    """Each text's BM25 for ``cue`` with the statistics of these texts alone, as the store's index scores.

    For memories found in several indexes (the user's own and a shared scope's): each index's BM25
    weighs a word by its own rows, so their scores are not comparable; over the pool they are.
    """
    index = LexicalIndex.build({"text": list(texts), "context": list(contexts)})
    return index.scores(query_terms(cue)).astype(np.float64)
