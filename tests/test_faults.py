"""Fault injection: nothing lost, nothing doubled, whatever fails in between.

Every turn says a unique token that the fake model (``tests/faults/model.py``) carries through every
stage; the census (``tests/faults/census.py``) reads every row of every table and follows each turn
through journal, working entries, episodes and facts: none lost, none doubled, at every tier. The
faults (``tests/faults/scenarios.py``):

- a model behind real litellm failing 30% of requests (connection reset, 503, timeout) and answering
  invalid output for 10%, for users side by side; then ``retry_pending()`` with the model healthy;
- ``kill -9`` of processes capturing, at random points, then a rerun of every capture (its outcome was
  unknown) and ``retry_pending()``;
- two processes capturing into one session at once;
- two workers consolidating the same users at once, sharing one APScheduler job store (the README's
  multi-worker setup);
- governance (pin, update, forget, feedback, two updates at once, another user's fact) and ``erase_user``
  beside capture and consolidation in several processes (``tests/faults/governed.py``): nothing lost,
  duplicated, resurrected or crossed between users.

Sized for CI (about a minute on two cores); ``python bench/faults.py --turns 1000`` runs them larger.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import messages_of
from tests.faults.governed import governed
from tests.faults.model import Faults, TokenModel
from tests.faults.scenarios import build, failing_model, faulty, kill_9, two_workers, two_writers
from tiermem import MemoryContext

pytestmark = [pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning"), pytest.mark.slow]


async def test_a_failing_model_loses_and_doubles_nothing(tmp_path: Path) -> None:
    # 48 turns: at this seed the faults still reach every stage (observe: error and invalid; the
    # consolidation call: an error) and retry_pending() heals turns and consolidations; bench/faults.py runs it large
    outcome = await failing_model(tmp_path, users=2, sessions=3, turns=8, seed=11)

    assert outcome.notes["captures deferred"] > 0  # the faults did reach the pipeline
    assert {"error", "invalid"} <= set(outcome.calls["observe"])
    assert outcome.census.problems() == []
    assert outcome.census.reached == dict.fromkeys(outcome.census.reached, 48)


async def test_kill_9_while_capturing_loses_and_doubles_nothing(tmp_path: Path) -> None:
    outcome = await kill_9(tmp_path, processes=2, sessions=2, turns=15, rounds=1, seed=21)

    assert outcome.notes["kills"] == 2
    assert outcome.notes["journaled before the rerun"] >= outcome.notes["captures returned before the kills"]
    # the rerun (of unknown outcome) returned every turn journaled before it, never a second one
    assert outcome.notes["rerun returned the first turn"] == outcome.notes["journaled before the rerun"]
    assert outcome.census.problems() == []
    assert outcome.census.reached == dict.fromkeys(outcome.census.reached, 60)


async def test_two_processes_capturing_into_one_session_keep_every_turn(tmp_path: Path) -> None:
    outcome = await two_writers(tmp_path, turns=40, seed=41)

    assert [p["captured"] for p in outcome.notes["processes"]] == [40, 40]
    assert outcome.notes["writer switches"] >= 4  # the two journals interleave: the captures did race
    assert outcome.census.problems() == []  # seqs unique too
    assert (outcome.census.rows["turns"], outcome.census.rows["episodes"]) == (80, 1)


async def test_two_workers_sharing_a_job_store_consolidate_each_episode_once(tmp_path: Path) -> None:
    outcome = await two_workers(tmp_path, mode="worker", users=3, sessions=8, seed=61)  # 6 batches of 4

    assert outcome.census.problems() == []
    assert outcome.notes["episodes"] == 24 and outcome.notes["per episode"] == {1: 24}  # no model call twice
    assert outcome.calls["encode_consolidate"] == {"ok": 6} and "consolidate" not in outcome.calls  # the default


async def test_governance_and_erasure_beside_capture_lose_double_resurrect_and_cross_nothing(tmp_path: Path) -> None:
    # 2 processes x 2 users x 2 sessions x 4 turns, 6 pieces of governance each, u-3 erased mid-session while
    # a capture of it is under way; bench/faults_governance.py runs it large
    outcome = await governed(tmp_path, processes=2, users=4, sessions=2, turns=4, ops=6, erase=1, seed=71)

    found = outcome.governance
    assert list(outcome.notes["erased"]) == ["u-3"]  # the erasure ran, beside the other work
    ran = {op["kind"] for op in outcome.ops if op["outcome"] == "ok" and op.get("recalled") is not False}
    assert ran == {"pin", "update", "forget", "feedback", "update twice"}
    assert any(op["outcome"] == "refused" for op in outcome.ops if op["kind"] == "cross-user")
    assert (found.lost, found.duplicated, found.resurrected, found.cross_user) == (0, 0, 0, 0), found.problems()
    assert found.failures == []
    assert outcome.census.expected == 24 and outcome.census.problems() == []


# -- bugs the suite found -------------------------------------------------------------------------


async def test_a_rerun_that_observes_a_pending_turn_says_it_is_a_duplicate(tmp_path: Path) -> None:
    """A rerun (same key) of a capture whose observation failed observes the turn journaled first, and
    must say so: the caller asks ``duplicate`` whether its capture added a turn (it did not)."""
    fake = TokenModel(Faults(failure_rate=1.0, invalid_rate=0.0))
    mem = build(tmp_path / "store", fake)
    ctx = MemoryContext(user_id="u-1", session_id="s-1")
    first = await mem.capture(ctx, messages_of("I keep bees."), idempotency_key="req-1")
    fake.faults.enabled = False

    again = await mem.capture(ctx, messages_of("I keep bees."), idempotency_key="req-1")

    assert first.deferred and again.turn.id == first.turn.id and again.turn.status == "observed"
    assert again.duplicate


def test_fault_rates_are_what_they_say() -> None:
    faults = faulty(seed=3)
    drawn = [faults.decide("observe", f"prompt {i}")[0] for i in range(4000)]
    share = {kind: drawn.count(kind) / len(drawn) for kind in ("error", "invalid")}
    assert abs(share["error"] - 0.30) < 0.03 and abs(share["invalid"] - 0.10) < 0.02
