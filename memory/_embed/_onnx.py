"""The default embedder: all-MiniLM-L6-v2 as an int8 ONNX model, with the threads that keep its runs in flight.

Its own module because it alone holds a thread pool and a lock that a forked child must start afresh
(the fork hook below); the other embedders are :mod:`._embedders`.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._errors import ConfigurationError, EmbedderError
from ._embedders import asset_path, normalise

if TYPE_CHECKING:  # the engines are imported when first used
    from onnxruntime import InferenceSession
    from tokenizers import Tokenizer

__all__ = ["OnnxEmbedder"]

log = logging.getLogger(__name__)


class OnnxEmbedder:
    """The default: all-MiniLM-L6-v2 as an int8 ONNX model, run by onnxruntime, loaded lazily.

    Texts are tokenized with the model's own ``tokenizer.json`` (truncated to 256 tokens), sorted
    by length and run one at a time (``batch_size``); the token embeddings are
    mean-pooled over the attention mask and L2-normalised, as sentence-transformers does for this
    model. ``threads`` is onnxruntime's intra-op thread count (default: the machine's cores, at most
    4; the threads sleep rather than spin between calls, so an idle process costs nothing). A call
    of several runs (a bulk write) made while no other call is in progress also keeps ``threads`` runs
    in flight on the one session: a run of one short text keeps few threads busy, and runs side by
    side embed about 20-30% more texts per second on 2 cores (``bench/EMBEDDERS.md``); each text's
    vector is the same either way.
    ``bench/export_onnx_embedder.py`` makes the shipped files.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        model_id: str | None = None,
        threads: int | None = None,
        # One text per run by default: int8 activations share one quantization range per run, so in a batch
        # a text's vector depends on its batch-mates (cosine ~0.99 to itself alone). Alone costs ~10-20% more
        # CPU in bulk (bench/EMBEDDERS.md); batch_size=8 trades that consistency for throughput.
        batch_size: int = 1,
    ) -> None:
        if path is not None and model_id is None:
            raise ConfigurationError("OnnxEmbedder(path=...) needs a model_id naming that model (stored in the store)")
        if batch_size < 1:
            raise ConfigurationError("OnnxEmbedder batch_size must be at least 1")
        self._path = Path(path) if path is not None else asset_path("minilm-onnx")
        self._id = model_id or "minilm-l6-onnx-int8-v1"
        self._threads = threads if threads is not None else max(1, min(4, os.cpu_count() or 1))
        self._batch_size = batch_size
        self._session: InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._lock = threading.Lock()
        self._dims: int | None = None
        self._runner: ThreadPoolExecutor | None = None
        self._calls = 0  # embed calls in progress: only a call alone spreads its runs (see embed)
        _LIVE.add(self)  # a forked child has none of the pool's threads, and its copy of the lock may be held

    @property
    def id(self) -> str:
        return self._id

    def _load(self) -> tuple[InferenceSession, Tokenizer]:
        with self._lock:
            if self._session is None:
                try:
                    import onnxruntime as ort
                    from tokenizers import Tokenizer
                except ImportError as exc:  # pragma: no cover - both are core dependencies
                    raise EmbedderError("the default embedder needs the onnxruntime and tokenizers packages") from exc
                model, vocab = self._path / "model.onnx", self._path / "tokenizer.json"
                if not (model.exists() and vocab.exists()):
                    raise EmbedderError(f"ONNX embedder files are missing at {self._path}")
                try:
                    tokenizer = Tokenizer.from_file(str(vocab))
                    tokenizer.no_padding()  # each batch is padded below, to its own longest text
                    if tokenizer.truncation is None:
                        tokenizer.enable_truncation(256)
                    options = ort.SessionOptions()
                    options.intra_op_num_threads = self._threads
                    options.inter_op_num_threads = 1
                    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                    options.log_severity_level = 3
                    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
                    width = session.get_outputs()[0].shape[-1]
                except Exception as exc:
                    raise EmbedderError(f"cannot load the ONNX embedder from {self._path}: {exc}") from exc
                if not isinstance(width, int):
                    raise EmbedderError(f"the ONNX model at {model} has no fixed output width")
                self._tokenizer, self._dims = tokenizer, width
                self._session = session
        assert self._tokenizer is not None  # set with the session
        return self._session, self._tokenizer

    @property
    def dimensions(self) -> int:
        if self._dims is None:
            self._load()
        assert self._dims is not None
        return self._dims

    def _pool(self) -> ThreadPoolExecutor:
        """The threads that keep several runs in flight, started on first use."""
        with self._lock:
            if self._runner is None:
                self._runner = ThreadPoolExecutor(self._threads, thread_name_prefix="tiermem-embed")
            return self._runner

    def _spread(self, run: Callable[[list[int]], np.ndarray], chunks: list[list[int]]) -> list[np.ndarray]:
        """``run`` of every chunk, ``threads`` at a time on the pool; a failure cancels the runs not yet started."""
        pool = self._pool()
        futures: list[Future[np.ndarray]] = []
        try:
            for chunk in chunks:
                futures.append(pool.submit(run, chunk))
        except RuntimeError as exc:  # the interpreter is shutting down and starts no threads: run them all here
            for future in futures:
                future.cancel()
            log.debug("embedding %d runs in the calling thread: %s", len(chunks), exc)
            return [run(chunk) for chunk in chunks]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        session, tokenizer = self._load()
        assert self._dims is not None
        out = np.zeros((len(texts), self._dims), dtype=np.float32)
        live = [i for i, text in enumerate(texts) if text.strip()]  # empty texts stay zero rows
        encodings = tokenizer.encode_batch([texts[i] for i in live], add_special_tokens=True)
        lengths = [len(e.ids) for e in encodings]
        order = sorted(range(len(live)), key=lengths.__getitem__)  # similar lengths share a batch
        chunks = [order[start : start + self._batch_size] for start in range(0, len(order), self._batch_size)]

        def run(chunk: list[int]) -> np.ndarray:
            width = max(lengths[k] for k in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, k in enumerate(chunk):
                ids[row, : lengths[k]] = encodings[k].ids
                mask[row, : lengths[k]] = 1
            try:
                (hidden,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
            except Exception as exc:
                raise EmbedderError(f"the ONNX embedder failed: {exc}") from exc
            weights = mask[:, :, None].astype(np.float32)
            pooled: np.ndarray = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            return pooled

        with self._lock:
            self._calls += 1
            alone = self._calls == 1
        try:
            # The same runs either way (a chunk's texts and batch-mates do not change), so the same vectors. Calls
            # already side by side (an import's groups) keep their runs in their own threads: spread as well, they
            # would only add threads contending for the same cores (measured slower, bench/EMBEDDERS.md).
            spread = alone and len(chunks) > 1 and self._threads > 1
            pooled = self._spread(run, chunks) if spread else [run(chunk) for chunk in chunks]
        finally:
            with self._lock:
                self._calls -= 1
        for chunk, vectors in zip(chunks, pooled, strict=True):
            out[[live[k] for k in chunk]] = vectors
        return normalise(out)


_LIVE: weakref.WeakSet[OnnxEmbedder] = weakref.WeakSet()  # one fork hook for all, not one per embedder made


def _forked() -> None:
    """In a forked child, every embedder: a free lock, no call in progress, and a pool started afresh on first use."""
    for embedder in list(_LIVE):
        embedder._lock, embedder._calls, embedder._runner = threading.Lock(), 0, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
