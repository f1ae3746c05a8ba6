"""Matrix-vector products in fixed chunks, shared with idle cores without ever waiting for one.

A recall scores every cached row of a user (``matrix @ query``). OpenBLAS would split a big product
across its own threads, but waking them on a busy machine costs scheduler ticks, and a score would
depend on how many cores split it; so each chunk is small enough for one BLAS thread, and chunks start
on multiples of ``ROWS`` rows, where the kernel's row blocks start: a score is the same whoever
computes its chunk and however the product is chunked.

The caller computes chunks itself and offers the rest to helper threads (one per other core). A
helper takes the next chunk nobody took; the caller waits only for chunks a helper already started,
and not for long: past about two chunks' time it computes them itself. So a helper the scheduler
never runs costs about one chunk, and on an idle machine the product takes about 1/cores of the time.
numpy's matmul releases the GIL, so the chunks really overlap.
"""

from __future__ import annotations

import os
import queue
import threading
import time

import numpy as np

__all__ = ["PRODUCT", "ROWS", "similarities"]

# Elements per chunk: the most OpenBLAS multiplies on the calling thread. It splits an sgemv of
# 115,200 x 4 = 460,800 elements or more across its threads (OpenBLAS 0.3.31; measured: 1,199 rows of 384
# take one core, 1,201 two). Chunks of 2**19 woke its threads (at load 9 on 2 cores: p50 22 ms, p95
# 200 ms for 10k rows of 384; in chunks of 2**18, 1.3 ms and 10 ms). The largest chunk under it
# (1,152 rows of 384, not 2**18's 640) means fewer hand-overs: a 10k-row product alone took 0.28 ms
# instead of 0.45 with one helper on an idle machine. Inside recall (10k rows) it measured about 0.5 ms
# either way, the difference within the noise.
PRODUCT = 115_200 * 4 - 1
ROWS = 64
# Seconds added to the wait for helpers' chunks: a wake-up and a lock hand-over.
_SLACK = 0.0002


class _Product:
    """One product's chunks, taken one at a time by the caller and any helper that gets to it.

    A chunk is computed into its own buffer and copied in under the lock, once: a helper that the
    scheduler stalled mid-chunk, and that the caller stopped waiting for, finds its chunk done and
    never writes into scores already returned.
    """

    def __init__(self, matrix: np.ndarray, query: np.ndarray, out: np.ndarray, step: int) -> None:
        self.matrix, self.query, self.out, self.step = matrix, query, out, step
        self.chunks = -(-len(matrix) // step)
        self.taken = 0
        self.done = [False] * self.chunks
        self.finished = 0
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.all_done = threading.Event()

    def _compute(self, chunk: int) -> None:
        start = chunk * self.step
        try:
            scores = np.matmul(self.matrix[start : start + self.step], self.query)
        except BaseException as exc:  # reported by the caller, never lost in a helper
            self.error, scores = exc, None
        with self.lock:
            if self.done[chunk]:
                return
            if scores is not None:
                self.out[start : start + len(scores)] = scores
            self.done[chunk] = True
            self.finished += 1
            if self.finished == self.chunks:
                self.all_done.set()

    def work(self) -> int:
        """Compute chunks until none is left to take; returns how many this thread computed."""
        computed = 0
        while True:
            with self.lock:
                chunk = self.taken
                if chunk >= self.chunks:
                    return computed
                self.taken += 1
            self._compute(chunk)
            computed += 1

    def finish(self, patience: float) -> None:
        """Wait up to ``patience`` seconds for the chunks helpers took, then compute the rest here."""
        if self.all_done.wait(patience):
            return
        for chunk in range(self.chunks):
            if not self.done[chunk]:
                self._compute(chunk)


class _Helpers:
    """Daemon threads taking offered products; started on first use, again in a forked child."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = -1
        self._offers: queue.SimpleQueue[_Product] = queue.SimpleQueue()
        self.count = 0

    def offer(self, product: _Product) -> None:
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():  # a fork keeps the queue, not its threads
                    self._offers = queue.SimpleQueue()
                    self.count = max(0, min(3, _cores() - 1))
                    for n in range(self.count):
                        threading.Thread(target=self._serve, name=f"tiermem-product-{n}", daemon=True).start()
                    self._pid = os.getpid()
        for _ in range(self.count):
            self._offers.put(product)

    def _serve(self) -> None:
        offers = self._offers
        while True:
            offers.get().work()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


_HELPERS = _Helpers()


def similarities(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` in float32, by chunks of at most ``PRODUCT`` elements (see the module)."""
    query = vector.astype(np.float32)
    out = np.empty(len(matrix), dtype=np.float32)
    step = max(ROWS, PRODUCT // max(1, matrix.shape[1]) // ROWS * ROWS)
    product = _Product(matrix, query, out, step)
    if product.chunks > 1:
        _HELPERS.offer(product)
    started = time.perf_counter()
    mine = product.work()
    if product.chunks > 1:
        # A helper's chunk takes about as long as one of ours; a helper the scheduler preempted takes far
        # longer, and its chunks are computed again here rather than waited for.
        product.finish(2 * (time.perf_counter() - started) / max(1, mine) + _SLACK)
    if product.error is not None:
        raise product.error
    return out
