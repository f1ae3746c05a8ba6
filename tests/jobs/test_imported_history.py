"""An imported history and the janitor: the clocks count from the import, not from the conversations' dates,
and a run that would remove most of a user at once stops for that user unless forced (issue 32, item 2).

Through the real store (LanceDB in tmp_path), the offline rules model and a FrozenClock: the history
is two years old when it is imported (2024 conversations, the clock at 2026-03-01).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tiermem import MemoryContext, MemorySystem, system
from tiermem.jobs import JanitorReport, run_janitor
from tiermem.jobs._guard import stop_for
from tiermem.memory._options import HygieneOptions
from tiermem.memory._store._store import Where
from tiermem.memory.testing import FrozenClock, HashingEmbedder

# litellm lazily imports a module whose pydantic TypedDict warns on every model call (see test_capture_durability).
pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

USER = MemoryContext(user_id="u-hist")
START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
# (pet, sport, city) of each session
SAID = [
    ("Miso", "tennis", "Porto"), ("Luna", "chess", "Lisbon"), ("Tofu", "golf", "Madrid"), ("Pixel", "squash", "Paris"),
    ("Mochi", "rugby", "Berlin"), ("Biscuit", "hockey", "Vienna"), ("Pepper", "cricket", "Prague"),
    ("Olive", "rowing", "Rome"), ("Nori", "fencing", "Oslo"), ("Ziggy", "karate", "Dublin"), ("Juno", "judo", "Zurich"),
    ("Kiwi", "polo", "Ghent"),
]  # fmt: skip
SESSIONS, TURNS = 12, 36  # one fact per turn with the rules model: 36 facts, 12 episodes, 36 turns
TTL = timedelta(days=365)  # the default episodic TTL
# The rules model's facts start at 0.68-0.72 and fall under the 0.15 floor after about 392 days (half-life 180).
FADED = timedelta(days=3 * 365)


def history() -> list[dict[str, Any]]:
    """Twelve sessions two weeks apart in 2024, three turns each, each turn a fact."""
    said = [[f"I adopted a cat named {pet}.", f"I play {sport} on Sundays.", f"My sister Ana visited {city}."]
            for pet, sport, city in SAID]  # fmt: skip
    return [
        {
            "session_id": f"2024-{i:02d}",
            "turns": [
                {
                    "at": (START + timedelta(days=14 * i, minutes=t)).isoformat(),
                    "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
                }
                for t, text in enumerate(lines)
            ],
        }
        for i, lines in enumerate(said)
    ]


def census(mem: MemorySystem, ctx: MemoryContext = USER) -> dict[str, int]:
    """What the user holds: active facts, live episodes, stored turns."""
    where = Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})
    return {
        "facts": sum(1 for f in mem.store.query("facts", where) if f.status == "active"),
        "episodes": sum(1 for e in mem.store.query("episodes", where) if e.status != "expired"),
        "turns": mem.store.count("turns", where),
    }


def removed(report: JanitorReport) -> dict[str, int]:
    return {tier: n for tier, n in report.removed().items() if tier in ("facts", "episodes", "turns")}


NOTHING = {"facts": 0, "episodes": 0, "turns": 0}
EVERYTHING = {"facts": 36, "episodes": 12, "turns": 36}


@pytest.fixture
async def imported(store_path: str, clock: FrozenClock, embedder: HashingEmbedder) -> MemorySystem:
    mem = system(model="rules", store=store_path, embedder=embedder, clock=clock)
    report = await mem.import_conversations(USER, history())
    assert (report.turns, report.consolidated, report.errors) == (TURNS, SESSIONS, [])
    assert census(mem) == EVERYTHING
    return mem


async def forget_the_import_time(mem: MemorySystem) -> None:
    """The user's facts and episodes as an older tiermem stored them: no ``stored_at``, clocks from 2024."""
    facts = await mem.facts(USER)
    mem.tiers.put_facts([f.model_copy(update={"stored_at": None}) for f in facts])
    mem.tiers.put_episodes([e.model_copy(update={"stored_at": None}) for e in mem.tiers.episodes(USER)])


# -- what the clocks measure --------------------------------------------------------------------


async def test_the_next_janitor_run_keeps_every_fact_episode_and_turn(imported: MemorySystem) -> None:
    report = await run_janitor(imported)

    assert removed(report) == NOTHING and report.stopped == []
    assert census(imported) == EVERYTHING


async def test_an_import_keeps_the_conversations_dates_and_records_when_it_was_taken_in(
    imported: MemorySystem, clock: FrozenClock
) -> None:
    facts = await imported.facts(USER)
    episodes = imported.tiers.episodes(USER)
    turns = imported.store.query("turns", Where(eq=imported.tiers.scope(USER)))

    assert {f.stored_at for f in facts} == {e.stored_at for e in episodes} == {clock.now()}
    assert all(f.valid_from is not None and f.valid_from.year == 2024 for f in facts)
    assert all(f.created_at.year == f.reinforced_at.year == 2024 for f in facts)
    assert all(e.started_at.year == e.ended_at.year == 2024 for e in episodes)
    assert {t.created_at.year for t in turns} == {2024}


@pytest.mark.parametrize(
    ("after_import", "force", "expected"),
    [
        (TTL - timedelta(days=1), False, NOTHING),
        # Every episode goes; the turns stay, each the evidence of a live fact (see test_ttl_provenance).
        (TTL + timedelta(days=1), False, {"facts": 0, "episodes": 12, "turns": 0}),
        # The facts faded too, so their turns go with them: all of the user at once, which needs force.
        (FADED, True, EVERYTHING),
    ],
    ids=["a-day-before-the-ttl", "a-day-after-the-ttl", "after-the-facts-faded"],
)
async def test_the_ttl_and_decay_count_from_the_import(
    imported: MemorySystem, clock: FrozenClock, after_import: timedelta, force: bool, expected: dict[str, int]
) -> None:
    report = await run_janitor(imported, clock.now() + after_import, force=force)

    assert removed(report) == expected and report.stopped == []
    assert census(imported) == {tier: n - expected[tier] for tier, n in EVERYTHING.items()}


async def test_records_stored_before_stored_at_existed_keep_their_old_clocks(imported: MemorySystem) -> None:
    await forget_the_import_time(imported)

    report = await run_janitor(imported, dry_run=True, force=True)

    assert removed(report) == EVERYTHING  # read as before: decay from reinforced_at, TTL from ended_at


# -- the removal guard --------------------------------------------------------------------------


async def test_the_guard_stops_a_run_that_would_remove_most_of_a_user(
    imported: MemorySystem, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    await forget_the_import_time(imported)  # the store: an import whose clocks count from 2024
    other = MemoryContext(user_id="u-live")
    old = await imported.add_semantic_fact(other, "The user plays the cello.")
    await imported.add_semantic_fact(other, "The user likes green tea.")
    await imported.add_semantic_fact(other, "The user lives in Porto.")
    imported.tiers.put_facts([old.model_copy(update={"reinforced_at": clock.now() - timedelta(days=800)})])

    with caplog.at_level(logging.WARNING, logger="tiermem.jobs.janitor"):
        report = await run_janitor(imported)

    (stop,) = report.stopped
    assert (stop.user_id, stop.would_remove, stop.held, stop.share) == ("u-hist", EVERYTHING, 84, 1.0)
    assert census(imported) == EVERYTHING  # nothing of the stopped user changed
    assert report.facts_archived == 1  # the other user's run went on
    kept = sorted(f.text for f in await imported.facts(other))
    assert kept == ["The user likes green tea.", "The user lives in Porto."]
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "stopped for default/u-hist" in warning.getMessage() and "force" in warning.getMessage()


async def test_a_forced_run_goes_past_the_guard(imported: MemorySystem) -> None:
    await forget_the_import_time(imported)

    report = await run_janitor(imported, force=True)

    assert removed(report) == EVERYTHING and report.stopped == []
    assert census(imported) == NOTHING


@pytest.mark.parametrize(
    ("would_remove", "held", "options", "stops"),
    [
        ({"facts": 36, "episodes": 12, "turns": 36}, 84, {}, True),
        ({"facts": 30, "episodes": 0, "turns": 12}, 84, {}, False),  # exactly half: not more than half
        ({"facts": 30, "episodes": 0, "turns": 13}, 84, {}, True),
        ({"facts": 3, "episodes": 1, "turns": 5}, 9, {}, False),  # a small user's last session: ageing
        ({"facts": 3, "episodes": 1, "turns": 5}, 9, {"guard_min_removed": 0}, True),
        ({"facts": 36, "episodes": 12, "turns": 36}, 84, {"max_removed_share": None}, False),
        ({"facts": 20, "episodes": 0, "turns": 0}, 84, {"max_removed_share": 0.2}, True),
    ],
    ids=["all", "half", "over-half", "under-the-minimum", "no-minimum", "guard-off", "lower-share"],
)
def test_what_the_guard_stops(would_remove: dict[str, int], held: int, options: dict[str, Any], stops: bool) -> None:
    stop = stop_for(USER, would_remove, held, HygieneOptions(**options))

    assert (stop is not None) is stops


# -- dry runs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("after_import", "force"),
    [(TTL + timedelta(days=1), False), (FADED, True)],
    ids=["a-day-after-the-ttl", "after-the-facts-faded"],
)
async def test_a_dry_run_reports_per_tier_what_the_run_removes(
    imported: MemorySystem, clock: FrozenClock, after_import: timedelta, force: bool
) -> None:
    now = clock.now() + after_import

    dry = await run_janitor(imported, now, dry_run=True, force=force)
    assert census(imported) == EVERYTHING
    real = await run_janitor(imported, now, force=force)

    assert dry.removed() == real.removed() and removed(real) != NOTHING
    assert (dry.turns_kept, dry.citations_rewritten) == (real.turns_kept, real.citations_rewritten)


async def test_a_dry_run_says_which_users_the_guard_would_stop(imported: MemorySystem) -> None:
    await forget_the_import_time(imported)

    dry = await run_janitor(imported, dry_run=True)

    assert [(s.user_id, s.would_remove) for s in dry.stopped] == [("u-hist", EVERYTHING)]
    assert removed(dry) == NOTHING and dry.as_dict()["stopped"] == [
        {"namespace": "default", "user_id": "u-hist", "would_remove": EVERYTHING, "held": 84, "share": 1.0}
    ]
