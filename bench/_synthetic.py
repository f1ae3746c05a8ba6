"""Deterministic synthetic facts and queries for the store benchmarks (no model, no network).

Every text comes from a handful of sentence templates filled from fixed word lists with a seeded
``numpy`` generator, so the same seed always gives the same corpus. The vocabulary is large enough
that a keyword query matches a small fraction of a user's facts (a food or a city is shared by
roughly 1 fact in 60), which keeps full-text search realistic rather than degenerate.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np

from tiermem import Fact, MemoryContext

__all__ = ["NAMES", "fact_batches", "queries"]


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


FOODS = _words(
    "sushi ramen pizza tacos paella curry dumplings pho falafel hummus lasagna risotto burritos kimchi "
    "bibimbap croissants bagels pretzels goulash moussaka tiramisu baklava churros empanadas ceviche "
    "gnocchi pierogi schnitzel couscous tagine shakshuka samosas biryani tempura udon gyoza nachos "
    "quesadillas enchiladas brisket cheesecake pancakes waffles granola oatmeal lentils chili gazpacho "
    "bruschetta focaccia mochi macarons scones crepes fondue raclette poutine jambalaya gumbo"
)
CITIES = _words(
    "Lisbon Porto Madrid Seville Barcelona Paris Lyon Marseille Berlin Munich Hamburg Vienna Prague "
    "Budapest Warsaw Krakow Copenhagen Stockholm Oslo Helsinki Reykjavik Dublin Edinburgh London "
    "Amsterdam Brussels Zurich Geneva Milan Rome Naples Venice Florence Athens Istanbul Cairo Marrakesh "
    "Nairobi Capetown Mumbai Delhi Bangkok Hanoi Singapore Tokyo Kyoto Osaka Seoul Beijing Shanghai "
    "Sydney Melbourne Auckland Vancouver Toronto Montreal Chicago Boston Denver Austin Lima"
)
MONTHS = _words("January February March April May June July August September October November December")
SPORTS = _words("tennis football basketball volleyball badminton squash chess golf hockey baseball cricket rugby")
DAYS = _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
JOBS = _words(
    "nurse teacher architect plumber chef pilot lawyer accountant designer engineer journalist dentist "
    "pharmacist librarian carpenter electrician photographer translator veterinarian firefighter"
)
PETS = _words("dog cat parrot rabbit hamster turtle goldfish ferret lizard canary")
PET_NAMES = _words("Biscuit Pepper Luna Milo Olive Ziggy Nacho Pickle Mochi Rocket Waffles Juniper")
TOPICS = _words(
    "astronomy gardening photography woodworking meditation sailing pottery calligraphy beekeeping "
    "birdwatching knitting origami climbing surfing skiing painting baking cycling running yoga"
)
INSTRUMENTS = _words("guitar piano violin cello drums flute saxophone trumpet ukulele harp")
NAMES = ("maria", "jon", "priya", "tom", "aiko", "lena")

_TEMPLATES = (
    "{S} likes {food} and visited {city} in {month}.",
    "{S} plays {sport} with {P} every {day}.",
    "{S} works as a {job} in {city}.",
    "{S} adopted a {pet} named {petname} in {month}.",
    "{S} is learning {topic} and wants to try it in {city}.",
    "{S} has been practising the {instrument} since {month}.",
    "{S} does not eat {food} because of an allergy.",
    "{S} is planning a trip to {city} with {P} in {month}.",
)


def _phrase(subject: str) -> str:
    return "The user" if subject == "user" else subject.capitalize()


def _fill(rng: np.random.Generator, subject: str) -> str:
    def pick(words: tuple[str, ...] | list[str]) -> str:
        return words[int(rng.integers(len(words)))]

    template = _TEMPLATES[int(rng.integers(len(_TEMPLATES)))]
    other = pick([n for n in NAMES if n != subject])
    return template.format(
        S=_phrase(subject),
        P=other.capitalize(),
        food=pick(FOODS),
        city=pick(CITIES),
        month=pick(MONTHS),
        sport=pick(SPORTS),
        day=pick(DAYS),
        job=pick(JOBS),
        pet=pick(PETS),
        petname=pick(PET_NAMES),
        topic=pick(TOPICS),
        instrument=pick(INSTRUMENTS),
    )


def _subject(rng: np.random.Generator) -> str:
    # Half the facts are about the user, the rest about a few people in their life.
    return "user" if rng.random() < 0.5 else NAMES[int(rng.integers(len(NAMES)))]


def fact_batches(
    owners: list[tuple[str, int]], *, namespace: str, seed: int, batch: int = 5000
) -> Iterator[list[Fact]]:
    """Facts for ``(user_id, count)`` pairs, interleaved across users, in batches of ``batch``.

    Interleaving spreads every user's rows over all data files, the way a shared store that
    grows over time would look (no user's rows sit neatly in one fragment).
    """
    rng = np.random.default_rng(seed)
    base = datetime(2025, 1, 1, tzinfo=UTC)
    order = np.concatenate([np.full(n, i, dtype=np.int32) for i, (_, n) in enumerate(owners)])
    rng.shuffle(order)
    seen = [0] * len(owners)
    out: list[Fact] = []
    for index, owner in enumerate(order.tolist()):
        user_id = owners[owner][0]
        k = seen[owner]
        seen[owner] += 1
        subject = _subject(rng)
        text = _fill(rng, subject)
        when = base + timedelta(minutes=int(index))
        fact = Fact.new(
            MemoryContext(namespace=namespace, user_id=user_id),
            subject=subject,
            text=text,
            now=when,
            confidence=float(np.round(0.5 + 0.5 * rng.random(), 3)),
            provenance=(f"turn_{user_id}_{k}",),
        )
        # A template may repeat a sentence for the same user; tiermem would keep one fact, the load keeps both.
        out.append(fact.model_copy(update={"id": f"{fact.id}_{k}"}))
        if len(out) >= batch:
            yield out
            out = []
    if out:
        yield out


_QUERY_TEMPLATES = (
    "What food does the user like?",
    "Which cities has the user visited in {month}?",
    "Does the user like {food}?",
    "When did {P} visit {city}?",
    "Who plays {sport} with the user?",
    "What is the name of {P}'s {pet}?",
    "Where does {P} work as a {job}?",
    "Is the user allergic to {food}?",
    "Which instrument is {P} learning?",
    "Trip to {city} in {month}",
    "{topic} hobby",
    "what does the user do on {day}",
)


def queries(n: int, *, seed: int) -> list[str]:
    """``n`` deterministic questions over the same vocabulary as the facts."""
    rng = np.random.default_rng(seed)

    def pick(words: tuple[str, ...] | list[str]) -> str:
        return words[int(rng.integers(len(words)))]

    out = []
    for _ in range(n):
        template = _QUERY_TEMPLATES[int(rng.integers(len(_QUERY_TEMPLATES)))]
        out.append(
            template.format(
                P=pick(NAMES).capitalize(),
                food=pick(FOODS),
                city=pick(CITIES),
                month=pick(MONTHS),
                sport=pick(SPORTS),
                day=pick(DAYS),
                job=pick(JOBS),
                pet=pick(PETS),
                topic=pick(TOPICS),
            )
        )
    return out
