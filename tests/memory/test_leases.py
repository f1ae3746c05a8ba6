"""Leases kept in the store: one holder at a time, across processes; expired leases are taken over."""

from __future__ import annotations

import itertools
import json
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.object_storage import S3Store
from tests.subprocesses import run_together
from tiermem import InvalidArgumentError, Store
from tiermem.memory._store._leases import Lease, Leases

KEY = "consolidate:default:u-1"
TTL = timedelta(minutes=5)
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Wall:
    """A settable stand-in for the wall clock (leases take ``now``; the library's clock is not theirs)."""

    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(str(tmp_path / "store"), embedder_id="hashing-v1-8", dimensions=8)


@pytest.fixture
def wall() -> Wall:
    return Wall()


@pytest.fixture
def leases(store: Store, wall: Wall) -> Leases:
    return Leases(store, now=wall)


def test_a_live_lease_keeps_others_out_until_released(leases: Leases) -> None:
    first = leases.acquire(KEY, holder="a", ttl=TTL)
    assert first is not None and first.holder == "a" and first.expires_at == T0 + TTL
    assert leases.acquire(KEY, holder="b", ttl=TTL) is None
    assert leases.holder(KEY) == first
    leases.release(first)
    assert leases.holder(KEY) is None
    second = leases.acquire(KEY, holder="b", ttl=TTL)
    assert second is not None and second.holder == "b"


def test_an_expired_lease_is_taken_over_and_the_old_holder_has_lost_it(leases: Leases, wall: Wall) -> None:
    dead = leases.acquire(KEY, holder="dead", ttl=TTL)
    assert dead is not None
    wall.at = T0 + TTL - timedelta(seconds=1)
    assert leases.acquire(KEY, holder="b", ttl=TTL) is None  # not yet
    wall.at = T0 + TTL
    taken = leases.acquire(KEY, holder="b", ttl=TTL)
    assert taken is not None and taken.expires_at == T0 + 2 * TTL
    assert leases.renew(dead, ttl=TTL) is None
    leases.release(dead)  # too late: a no-op, the new holder keeps it
    assert leases.holder(KEY) == taken


def test_renewing_extends_a_lease_even_after_expiry_if_nobody_took_it(leases: Leases, wall: Wall) -> None:
    lease = leases.acquire(KEY, holder="a", ttl=TTL)
    assert lease is not None
    wall.at = T0 + 2 * TTL  # expired, but still the row's token
    renewed = leases.renew(lease, ttl=TTL)
    assert renewed == Lease(key=KEY, holder="a", token=lease.token, expires_at=wall.at + TTL)
    assert leases.acquire(KEY, holder="b", ttl=TTL) is None


def test_renewing_a_released_lease_does_not_bring_it_back(leases: Leases) -> None:
    lease = leases.acquire(KEY, holder="a", ttl=TTL)
    assert lease is not None
    leases.release(lease)
    assert leases.renew(lease, ttl=TTL) is None
    assert leases.holder(KEY) is None


def test_the_same_holder_acquires_again_with_a_new_token(leases: Leases) -> None:
    old = leases.acquire(KEY, holder="a", ttl=TTL)
    new = leases.acquire(KEY, holder="a", ttl=TTL)
    assert old is not None and new is not None and new.token != old.token
    assert leases.renew(old, ttl=TTL) is None
    leases.release(old)  # the old token no longer releases it
    assert leases.holder(KEY) == new


def test_hold_releases_after_the_block_and_yields_none_when_busy(leases: Leases) -> None:
    with leases.hold(KEY, holder="a", ttl=TTL) as lease:
        assert lease is not None
        with leases.hold(KEY, holder="b", ttl=TTL) as busy:
            assert busy is None
    assert leases.holder(KEY) is None
    with pytest.raises(RuntimeError), leases.hold(KEY, holder="a", ttl=TTL):
        raise RuntimeError("the block failed")
    assert leases.holder(KEY) is None  # released on the way out of a failure too


HOSTILE_KEYS = ["consolidate:default:o'brien", "k' OR '1'='1", "digest\x1fdefault\x1fu-1", "użytkownik-😀", "%"]


@pytest.mark.parametrize("key", HOSTILE_KEYS, ids=["quote", "or-1-eq-1", "unit-separator", "unicode", "percent"])
def test_keys_are_values_never_sql(leases: Leases, key: str) -> None:
    other = leases.acquire(KEY, holder="other", ttl=TTL)
    mine = leases.acquire(key, holder="me", ttl=TTL)
    assert other is not None and mine is not None
    assert leases.acquire(key, holder="b", ttl=TTL) is None
    leases.release(mine)
    assert leases.holder(key) is None
    assert leases.holder(KEY) == other


@pytest.mark.parametrize(
    ("key", "holder", "ttl"),
    [("", "a", TTL), (KEY, "", TTL), (KEY, "a", timedelta(0)), ("k\x00", "a", TTL), ("x" * 5000, "a", TTL)],
    ids=["empty-key", "empty-holder", "zero-ttl", "nul-key", "long-key"],
)
def test_unusable_arguments_are_refused_before_any_write(
    leases: Leases, store: Store, key: str, holder: str, ttl: timedelta
) -> None:
    with pytest.raises(InvalidArgumentError):
        leases.acquire(key, holder=holder, ttl=ttl)
    assert "leases" not in store._db.list_tables().tables


# -- across processes ---------------------------------------------------------------------------------

HAMMER = textwrap.dedent(
    """
    import json, sys, time
    from datetime import timedelta
    from pathlib import Path
    from tiermem.memory._store._leases import Leases
    from tiermem import Store

    store_path, rounds, me, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    leases = Leases(Store(store_path, embedder_id="hashing-v1-8", dimensions=8))
    leases.store._leases()
    (go.parent / f"ready-{me}").touch()
    while not go.exists():
        time.sleep(0.005)
    held, tries = [], 0
    while len(held) < rounds and tries < 400:
        tries += 1
        lease = leases.acquire("consolidate:default:u-1", holder=f"p{me}", ttl=timedelta(minutes=5))
        if lease is None:
            continue
        start = time.monotonic_ns()  # system-wide on Linux: comparable between processes
        time.sleep(0.01)
        end = time.monotonic_ns()
        leases.release(lease)
        held.append((start, end))
    print(json.dumps({"held": held, "tries": tries}))
    """
)


def _no_overlap(results: list[dict[str, Any]], *, at_least: int) -> None:
    intervals = sorted((start, end) for r in results for start, end in r["held"])
    assert len(intervals) >= at_least, results
    assert not [(a, b) for a, b in itertools.pairwise(intervals) if b[0] < a[1]]


def test_four_processes_never_hold_one_key_at_once(store: Store, tmp_path: Path) -> None:
    results = _together(HAMMER, [[store.uri, "6"]] * 4, tmp_path)
    _no_overlap(results, at_least=4 * 3)  # and every process got through most of its rounds
    assert Leases(store).holder(KEY) is None


def test_leases_on_object_storage(s3_store: S3Store, tmp_path: Path) -> None:
    """The same guarantees on S3 (moto's server): only LanceDB operations, no file locks."""
    store = Store(s3_store.uri, embedder_id="hashing-v1-8", dimensions=8, storage_options=s3_store.storage_options)
    wall = Wall()
    leases = Leases(store, now=wall)
    first = leases.acquire(KEY, holder="a", ttl=TTL)
    assert first is not None and leases.acquire(KEY, holder="b", ttl=TTL) is None
    wall.at = T0 + TTL
    assert leases.acquire(KEY, holder="b", ttl=TTL) is not None and leases.renew(first, ttl=TTL) is None
    results = _together(HAMMER, [[s3_store.uri, "4"]] * 2, tmp_path, env=s3_store.env())
    _no_overlap(results, at_least=2 * 2)


def _together(
    script: str, args: list[list[str]], tmp_path: Path, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    return [json.loads(out.strip().splitlines()[-1]) for out in run_together(script, args, tmp_path, env=env)]
