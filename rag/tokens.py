"""Late interaction: each chunk's token vectors, stored small, and how closely a question's tokens find theirs.

A chunk's vector is the mean of its tokens' vectors, so one passage about many things scores a little on
each; a question's word can still find the one token that says it. The score is ColBERT's MaxSim (Khattab
and Zaharia 2020): for every token of the question, its best cosine with any token of the chunk, averaged
over the question's tokens. It is a ranking feature (`rag.ranking.RANK_FEATURES`), not a retriever.

Token vectors come from the forward pass that makes the chunk's vector (`Embedder.encode_with_tokens`).
Each index projects them onto its own 128 principal directions (`TokenBasis`, fitted on the corpus's
tokens at publish) and stores them as float16: 256 bytes a token instead of 1,536, and every candidate
is scored in one matrix product (the features stage on the Kafka docs: 8.3 ms p50 with it, 8.5 without,
within run-to-run noise). Measured on the tuning parts (grouped 5-fold CV of the ranker, seventy-first
session): hit@1 0.559 without the feature, 0.577 with full-size token vectors, 0.584 with 128 directions,
0.571 with 64; the shipped fit, 0.589 (`evals/reports/fit_ranker.md`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag.embedding import normalised_rows
from rag.errors import IndexStoreError

TOKEN_DIMENSIONS = 128  # principal directions kept per index (module docstring)
BASIS_SAMPLE = 60_000  # token vectors the basis is fitted on, spread evenly over the corpus


@dataclass(frozen=True)
class TokenBasis:
    """Centre and principal directions of one corpus's token vectors: what its stored tokens are in."""

    mean: np.ndarray  # float32 (dim,)
    components: np.ndarray  # float32 (dim, k), orthonormal columns

    @classmethod
    def fit(cls, sample: np.ndarray, dimensions: int = TOKEN_DIMENSIONS) -> TokenBasis:
        """Principal component analysis of `sample` (tokens, dim); fewer directions when the sample is small."""
        sample = np.asarray(sample, dtype=np.float32)
        mean = sample.mean(axis=0) if len(sample) else np.zeros(sample.shape[1], np.float32)
        kept = max(1, min(dimensions, len(sample), sample.shape[1]))
        if len(sample) < 2:  # nothing to learn directions from: keep the first coordinates
            return cls(mean, np.eye(sample.shape[1], kept, dtype=np.float32))
        centred = (sample - mean).astype(np.float64)
        # The covariance's eigenvectors, largest first: the SVD of the sample itself took 11 s for the seeds' tokens.
        _, vectors = np.linalg.eigh(centred.T @ centred)
        return cls(mean.astype(np.float32), np.ascontiguousarray(vectors[:, ::-1][:, :kept], dtype=np.float32))

    @property
    def dimensions(self) -> int:
        return int(self.components.shape[1])

    def project(self, tokens: np.ndarray) -> np.ndarray:
        """`tokens` (n, dim) in this basis, each of length 1: float32 (n, k)."""
        tokens = np.asarray(tokens, dtype=np.float32).reshape(-1, len(self.mean))
        return normalised_rows((tokens - self.mean) @ self.components)

    def save(self, path: Path) -> None:
        with path.open("wb") as handle:
            np.savez(handle, mean=self.mean, components=self.components)

    @classmethod
    def load(cls, path: Path) -> TokenBasis:
        try:
            with np.load(path) as arrays:
                return cls(arrays["mean"].astype(np.float32), arrays["components"].astype(np.float32))
        except Exception as exc:  # a damaged zip is BadZipFile, an empty file EOFError: one line naming the file
            raise IndexStoreError(f"{path} is unreadable ({exc}): re-run 'kafka-rag ingest'") from exc


def token_bytes(tokens: np.ndarray) -> bytes:
    """A row's token vectors as they travel with it through ingest (shards, Spark): float16 bytes."""
    return np.asarray(tokens, dtype=np.float16).tobytes()


def token_matrix(data: bytes | None, dimension: int) -> np.ndarray:
    """`token_bytes` back as float32 (tokens, dimension); no tokens for a row that has none."""
    if not data:
        return np.zeros((0, dimension), dtype=np.float32)
    return np.frombuffer(data, dtype=np.float16).reshape(-1, dimension).astype(np.float32)


def late_interaction(question: np.ndarray, tokens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """MaxSim of the question's tokens (m, k) against each candidate's: candidate i holds
    `tokens[offsets[i]:offsets[i + 1]]`. 0 for a candidate without tokens, or a question without any."""
    counts = np.diff(offsets)
    scores = np.zeros(len(counts), dtype=np.float32)
    if len(question) == 0 or len(tokens) == 0:
        return scores
    similarity = question @ np.asarray(tokens, dtype=np.float32).T  # (m, all candidates' tokens)
    held = np.flatnonzero(counts > 0)
    best = np.maximum.reduceat(similarity, offsets[held], axis=1)  # each question token's best, per candidate
    scores[held] = best.mean(axis=0)
    return scores
