"""Deterministic everyday first-person memories: the filler of the paraphrase benchmark's larger stores.

``python bench/_filler.py`` rewrites ``tests/data/filler.json`` (4,000 memories), which the
paraphrase benchmark (bench/paraphrase.py), the embedder comparison and the recall tests read.
Each memory is a sentence template filled from fixed word lists by a seeded generator, so the same
seed always gives the same list. The templates describe small events and errands, the texture of
a real user's memory, and avoid stating the facts the paraphrase cues ask about.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

__all__ = ["filler", "main"]


def _split(text: str, sep: str = " ") -> list[str]:
    return text.split(sep)


_PEOPLE = _split(
    "Anna Ben Carla David Elena Farid Grace Hugo Ines Jonas Kemal Laura Marco Nadia Oscar Paula Quentin Rosa "
    "Stefan Tara Umar Vera Wes Yara Zoe Aunt Uncle"
)
_SHOPS = _split("bakery pharmacy hardware-store bookshop supermarket florist butcher post-office dry-cleaner market")
_ITEMS = [
    "batteries",
    "lightbulbs",
    "a birthday card",
    "shampoo",
    "a notebook",
    "envelopes",
    "a doormat",
    "candles",
    "a phone charger",
    "a raincoat",
    "socks",
    "a frying pan",
    "a houseplant",
    "stamps",
    "a travel mug",
    "towels",
    "coat hangers",
    "a desk lamp",
    "a picture frame",
    "a spatula",
    "a blanket",
    "a toothbrush",
    "sunscreen",
]
_DAYS = _split("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
_MONTHS = _split("January February March April May June July August September October November December")
_MEALS = _split("breakfast brunch lunch dinner coffee drinks dessert")
_PLACES = _split(
    "the harbour cafe|the old town|the riverside|the garden centre|the shopping centre|the town square|"
    "the seafront|the country pub|the noodle bar|the pizzeria|the village hall|the botanical garden|"
    "the farmers' market|the ice rink|the cinema|the bowling alley|the art gallery|the zoo",
    "|",
)
_CHORES = _split(
    "cleaned the oven|sorted the recycling|ironed the shirts|defrosted the freezer|vacuumed the stairs|"
    "washed the curtains|tidied the garage|mowed the lawn|descaled the kettle|wiped down the fridge|"
    "folded the laundry|swept the patio|watered the houseplants|changed the bed sheets",
    "|",
)
_FILMS = _split(
    "a documentary about whales|an old western|a romantic comedy|a courtroom drama|a horror film|"
    "a cartoon with the kids|a French film|a nature series|a cooking show|a detective series|a quiz show",
    "|",
)
_ERRANDS = _split(
    "the parcel that never arrived|the broken dishwasher|the invoice for the plumber|the school trip form|"
    "the lost library card|the parking permit|the leaking gutter|the gym membership|the dentist bill|"
    "the insurance renewal|the recycling collection|the noisy upstairs flat",
    "|",
)
_FEELINGS = _split("tired|cheerful|a bit stressed|relaxed|restless|proud|nostalgic|grumpy|hopeful|bored", "|")
_WEATHER = _split("rainy|sunny|windy|foggy|freezing|humid|stormy|mild", "|")
_TEMPLATES = (
    "I had {meal} with {person} at {place} on {day}.",
    "I bought {item} at the {shop} on {day}.",
    "I {chore} on {day} morning.",
    "I watched {film} with {person} on {day} night.",
    "I need to call {person} about {errand}.",
    "{person} lent me {item} last {day}.",
    "I felt {feeling} after the long {day} in {month}.",
    "It was {weather} all day when I went to {place} in {month}.",
    "{person} invited me to {place} for {meal} next {day}.",
    "I forgot {item} at {place} on {day}.",
    "I wrote to {person} about {errand} in {month}.",
    "{person} and I {chore} together in {month}.",
    "I met {person} by chance at the {shop} in {month}.",
    "I promised {person} to sort out {errand} before {day}.",
    "We took {person} to {place} for {meal} in {month}.",
    "I returned {item} to the {shop} on {day} because it was faulty.",
    "I spent a {weather} {day} at {place} with {person}.",
    "I was {feeling} when {person} cancelled {meal} on {day}.",
)
_PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "filler.json"


def filler(n: int = 4000, *, seed: int = 7) -> list[str]:
    """``n`` distinct everyday memories, the same for the same seed."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        text = rng.choice(_TEMPLATES).format(
            meal=rng.choice(_MEALS),
            person=rng.choice(_PEOPLE),
            place=rng.choice(_PLACES),
            day=rng.choice(_DAYS),
            item=rng.choice(_ITEMS),
            shop=rng.choice(_SHOPS).replace("-", " "),
            chore=rng.choice(_CHORES),
            film=rng.choice(_FILMS),
            errand=rng.choice(_ERRANDS),
            feeling=rng.choice(_FEELINGS),
            weather=rng.choice(_WEATHER),
            month=rng.choice(_MONTHS),
        )
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def main() -> None:
    doc = {
        "description": f"Deterministic everyday filler memories, from {Path(__file__).name} (seed 7).",
        "memories": filler(),
    }
    _PATH.write_text(json.dumps(doc, indent=0, ensure_ascii=False) + "\n")
    print(f"wrote {len(doc['memories'])} memories to {_PATH}")


if __name__ == "__main__":
    main()
