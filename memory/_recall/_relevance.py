"""What counts as related: a cue's informative words, and a calibrated null for similarity by meaning.

A memory that shares an informative word with the cue is related on that evidence. One that only
meaning connects must be more similar to the cue than unrelated sentences are, and by more the
more memories it competed with: the best of 4,000 unrelated memories is far more similar to any
cue than the best of 3. So for each embedder a null distribution of "similarity between unrelated
sentences" is measured once, on shipped background sentences (everyday statements, questions and
news of many topics): the similarities of every pair of them, after removing their common direction
(static embeddings put every sentence at cosine 0.6-0.8 from every other; centering on the
background mean spreads them out and ranks paraphrases better). A memory is related by meaning
when its centered similarity to the cue passes the null's ``1 - rate / n`` quantile, ``n`` the
number of memories searched and ``rate`` the share of unrelated cues allowed to return anything
(a Bonferroni bound, the null's bulk modelled as normal).

Both parts are corpus-free, so recall behaves the same for the first memory and the ten-thousandth.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from statistics import NormalDist
from typing import Protocol

import numpy as np

from .._text import terms

__all__ = ["BACKGROUND", "Calibration", "calibration", "terms"]

# Sentences about nothing in particular, of many topics and forms (statements, questions, news):
# the background every similarity is measured against. Never tuned on the benchmarks' data.
BACKGROUND = (
    "The meeting was moved to Thursday afternoon.",
    "I need to buy groceries after work.",
    "The weather has been rainy all week.",
    "She finished reading the novel last night.",
    "We watched a movie at the cinema.",
    "The train was delayed by twenty minutes.",
    "He is learning to play the guitar.",
    "The kids went to the park after school.",
    "I cooked pasta for dinner yesterday.",
    "The office is closed on public holidays.",
    "They adopted a cat from the shelter.",
    "My phone battery died during the trip.",
    "The project deadline is next Friday.",
    "We planned a birthday party for Anna.",
    "The museum has a new exhibition on modern art.",
    "I go jogging every morning before breakfast.",
    "The restaurant was fully booked on Saturday.",
    "He fixed the leaking kitchen tap.",
    "The concert tickets sold out quickly.",
    "She volunteers at the animal shelter on weekends.",
    "The flight to Madrid leaves at noon.",
    "I started a new job at a bank last month.",
    "Our neighbours are renovating their house.",
    "The doctor recommended more exercise and sleep.",
    "He bought a second-hand bicycle online.",
    "The library extended its opening hours.",
    "We spent the holiday at the seaside.",
    "The printer in the office is broken again.",
    "She is studying for her final exams.",
    "I painted the bedroom walls light blue.",
    "The football match ended in a draw.",
    "They moved to a smaller apartment in the city.",
    "My sister is getting married in June.",
    "The garden needs watering every evening.",
    "He takes the bus to work every day.",
    "The bakery on the corner sells great bread.",
    "We are saving money for a new car.",
    "The children built a snowman in the yard.",
    "I forgot my umbrella at the cafe.",
    "She called her grandmother on Sunday.",
    "The bus was crowded this morning.",
    "Can you send me the slides from yesterday's meeting?",
    "The supermarket ran out of oat milk again.",
    "Our landlord finally fixed the heating.",
    "I spent the evening answering emails.",
    "The dentist appointment is at half past three.",
    "We argued about where to go for the holidays.",
    "He forgot to water the plants while we were away.",
    "She ordered a new sofa for the living room.",
    "The neighbours' dog barks every night.",
    "I finally cleaned out the garage.",
    "Traffic on the motorway was terrible.",
    "My cousin is visiting from Canada next week.",
    "The school play is on Thursday evening.",
    "We had pizza and watched a film.",
    "I lost my keys somewhere in the park.",
    "The gym was empty on Sunday morning.",
    "The new coffee machine at work is great.",
    "I renewed my library card online.",
    "He got a parking ticket outside the station.",
    "She is knitting a jumper for her nephew.",
    "We booked a cottage in the mountains.",
    "I have a dentist check-up next month.",
    "My laptop screen cracked when it fell.",
    "The kids are off school for half term.",
    "The plumber is coming on Wednesday.",
    "I signed up for a photography course.",
    "We celebrated our anniversary at a small restaurant.",
    "The hairdresser cut my hair too short.",
    "My grandmother turns ninety this year.",
    "The central bank raised interest rates again.",
    "Scientists discovered a new species of frog in the rainforest.",
    "The election results will be announced tonight.",
    "A storm knocked down power lines across the region.",
    "The stock market fell sharply after the announcement.",
    "Engineers are testing a new bridge design.",
    "The city council approved the new budget.",
    "Astronomers observed a distant galaxy merging with another.",
    "The museum returned the stolen painting.",
    "Farmers are worried about the long drought.",
    "The software update fixed several security bugs.",
    "A new study links sleep to memory.",
    "The airline cancelled dozens of flights because of fog.",
    "The company reported record profits this quarter.",
    "Volcanic ash closed the airport for two days.",
    "The researchers published their results in a journal.",
    "The parliament debated the new immigration law.",
    "Prices of electricity have doubled since last winter.",
    "The archaeologists found Roman coins near the river.",
    "The team won the championship after extra time.",
    "Rainfall this autumn was above average.",
    "The hospital opened a new children's ward.",
    "The database migration took all weekend.",
    "The compiler warns about unused variables.",
    "The satellite was launched from French Guiana.",
    "Ocean temperatures reached a record high.",
    "The court postponed the trial until next year.",
    "A new vaccine is being tested in clinical trials.",
    "The factory will close at the end of the month.",
    "The orchestra performed a symphony by Brahms.",
    "How do I reset my password?",
    "What time does the pharmacy close today?",
    "Where did I put the spare charger?",
    "Who is picking the children up from school?",
    "Is it going to rain tomorrow?",
    "What should we cook for the guests on Saturday?",
    "How much does a return ticket to the coast cost?",
    "When is the next train to the airport?",
    "Which film won the award last night?",
    "Why is the printer not working?",
    "Do we need to bring anything to the party?",
    "What is the capital of Australia?",
    "How long does it take to boil an egg?",
    "Can you recommend a good book about history?",
    "What is the best way to learn a language?",
    "How many people live in Tokyo?",
    "What does this error message mean?",
    "Where can I park near the stadium?",
    "Who wrote this song?",
    "How do plants turn sunlight into energy?",
    "The recipe needs two cups of flour and an egg.",
    "He repainted the fence over the weekend.",
    "The wedding photos finally arrived.",
    "She switched to decaf in the afternoons.",
    "The cat knocked a glass off the table.",
    "My back hurts after sitting all day.",
    "The hotel room had a view of the harbour.",
    "I started using a budgeting app.",
    "The baby slept through the night for the first time.",
    "Our internet provider raised its prices.",
    "He is training for a half marathon.",
    "The tomatoes in the garden are finally ripe.",
    "I need to renew my car insurance.",
    "The concert was cancelled because of the rain.",
    "We visited the castle on the hill.",
    "My colleague is leaving the company in June.",
    "The washing machine is making a strange noise.",
    "I took the dog to the vet for its vaccinations.",
)


class _Embeds(Protocol):
    @property
    def id(self) -> str: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


_UNIT = NormalDist()


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """One embedder's background: its mean direction and the null of centered similarities."""

    center: np.ndarray  # mean background vector, subtracted from every vector before comparing
    null_mean: float  # mean centered cosine of two unrelated (background) sentences
    null_std: float  # and its standard deviation

    def query(self, vector: np.ndarray) -> np.ndarray:
        """The cue's vector, centered and unit length: what vector search ranks memories by."""
        shifted: np.ndarray = np.asarray(vector, dtype=np.float32) - self.center
        norm = float(np.linalg.norm(shifted))
        return (shifted / norm if norm > 0 else shifted).astype(np.float32)

    def similarity(self, query: np.ndarray, vectors: np.ndarray | list[np.ndarray]) -> np.ndarray:
        """Centered cosine of each row of ``vectors`` to a :meth:`query` vector; a row of a vector per side
        (``(rows, 2, d)``, a turn's) at its better side, and a list of arrays (a turn's ``(k, d)``: its sides
        and sentences) each at its best vector."""
        if isinstance(vectors, list):
            if not vectors:
                return np.zeros(0, dtype=np.float64)
            each = [np.atleast_2d(np.asarray(v, dtype=np.float32)) for v in vectors]
            starts = np.cumsum([0, *(len(v) for v in each[:-1])])
            return np.asarray(np.maximum.reduceat(self.similarity(query, np.concatenate(each)), starts), np.float64)
        if np.ndim(vectors) == 3:
            stacked = np.asarray(vectors, dtype=np.float32)
            flat = self.similarity(query, stacked.reshape(-1, stacked.shape[-1]))
            return flat.reshape(stacked.shape[0], -1).max(axis=1) if len(stacked) else flat
        rows = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        if rows.size == 0:
            return np.zeros(len(rows), dtype=np.float64)
        shifted_dot = rows @ query - float(self.center @ query)
        norms = np.sqrt(
            np.maximum(
                np.einsum("ij,ij->i", rows, rows) - 2.0 * (rows @ self.center) + float(self.center @ self.center),
                1e-12,
            )
        )
        return np.asarray(shifted_dot / norms, dtype=np.float64)

    def threshold(self, searched: int, rate: float) -> float:
        """The centered similarity the best of ``searched`` unrelated memories reaches with probability ``rate``."""
        if not 0 < rate < 1 or self.null_std <= 0:
            return float("inf")
        tail = min(rate / max(searched, 1), 0.5)
        return self.null_mean + self.null_std * _UNIT.inv_cdf(1.0 - tail)


def _calibrate(vectors: np.ndarray) -> Calibration:
    matrix = np.asarray(vectors, dtype=np.float64)
    center = matrix.mean(axis=0)
    shifted = matrix - center
    norms = np.linalg.norm(shifted, axis=1, keepdims=True)
    shifted = shifted / np.where(norms > 0, norms, 1.0)
    pairs = (shifted @ shifted.T)[np.triu_indices(len(shifted), k=1)]
    return Calibration(center=center.astype(np.float32), null_mean=float(pairs.mean()), null_std=float(pairs.std()))


_CACHE: dict[tuple[str, int], Calibration] = {}
_LOCK = threading.Lock()


def calibration(embedder: _Embeds) -> Calibration:
    """The embedder's calibration, measured on :data:`BACKGROUND` once per process and embedder."""
    key = (embedder.id, 0)
    with _LOCK:
        cached = _CACHE.get(key)
    if cached is not None:
        return cached
    vectors = embedder.embed(list(BACKGROUND))
    result = _calibrate(vectors)
    with _LOCK:
        return _CACHE.setdefault(key, result)
