"""Scoring a user's rows by chunks shared with helper threads: the same scores whoever computes them."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tiermem.memory._index import _products
from tiermem.memory._index._products import similarities


def _data(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, 384)).astype(np.float32), rng.standard_normal(384)


@pytest.mark.parametrize("rows", [2501, 10_000, 40_000], ids=["odd", "10k", "40k"])
def test_shared_products_equal_the_callers_own(rows: int) -> None:
    matrix, vector = _data(rows)
    step = _products.PRODUCT // 384 // _products.ROWS * _products.ROWS
    alone = np.concatenate(
        [matrix[s : s + step] @ vector.astype(np.float32) for s in range(0, rows, step)]
    )  # every chunk on this thread, in order
    for _ in range(20):  # helpers take a different share each time
        assert np.array_equal(similarities(matrix, vector), alone)


def test_products_from_many_threads_at_once_each_get_their_own_scores() -> None:
    data = [_data(7_000, seed) for seed in range(6)]
    wanted = [similarities(m, v) for m, v in data]
    found: dict[int, list[np.ndarray]] = {i: [] for i in range(len(data))}

    def run(i: int) -> None:
        for _ in range(15):
            found[i].append(similarities(*data[i]))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(data))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(got, wanted[i]) for i, runs in found.items() for got in runs)


def test_a_product_needs_no_helper_to_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    # Helpers that never run (a busy machine, or none configured): the caller computes every chunk.
    matrix, vector = _data(9_000)
    wanted = similarities(matrix, vector)
    stalled = threading.Event()
    monkeypatch.setattr(_products._HELPERS, "offer", lambda product: stalled.set())
    assert np.array_equal(similarities(matrix, vector), wanted)
    assert stalled.is_set()


def test_a_failing_chunk_is_raised_to_the_caller() -> None:
    matrix, _ = _data(5_000)
    with pytest.raises(ValueError):
        similarities(matrix, np.ones(100))  # the wrong width: every chunk fails, the caller hears of it


def test_a_stalled_helper_is_not_waited_for_and_never_writes_late(monkeypatch: pytest.MonkeyPatch) -> None:
    # A helper that takes a chunk and is then descheduled: the caller computes that chunk itself and
    # returns; when the helper wakes, the chunk is done and the scores already returned stay as they are.
    matrix, vector = _data(9_000)
    wanted = similarities(matrix, vector)
    taken, release, late = threading.Event(), threading.Event(), threading.Event()

    def stalled_helper(product: _products._Product) -> None:
        def run() -> None:
            with product.lock:
                chunk = product.taken
                product.taken += 1
            taken.set()
            release.wait()
            product._compute(chunk)
            late.set()

        threading.Thread(target=run, daemon=True).start()
        taken.wait()

    monkeypatch.setattr(_products._HELPERS, "offer", stalled_helper)
    found = similarities(matrix, vector)
    assert np.array_equal(found, wanted)
    found[:] = -1.0  # the caller's to change, as top_k does
    release.set()
    assert late.wait(10)
    assert np.all(found == -1.0)
