"""Late interaction: each chunk's token vectors, stored small, and how closely a question's tokens find theirs.

A chunk's vector is the mean of its tokens' vectors, so one passage about many things scores a little on
each; a question's word can still find the one token that says it. The score is ColBERT's MaxSim (Khattab
and Zaharia 2020): for every token of the question, its best cosine with any token of the chunk, averaged
over the question's tokens. It is a ranking feature (`rag.ranking.RANK_FEATURES`), not a retriever.

Token vectors come from the forward pass that makes the chunk's vector (`Embedder.encode_with_tokens`).
The model reads 256 word pieces; for a longer chunk (three in ten of the Kafka docs') they are followed by
the tokens of the evidence units its read part does not hold whole (`rag.ingest.unread_units`), so a
question about a long chunk's tail finds it too (token vectors version 3; the ranker refitted on them,
cross-validated hit@1 0.585 -> 0.592, eighty-fifth and eighty-sixth sessions, `evals/reports/quality_history.md`).
Each index projects them onto its own 128 principal directions (`TokenBasis`) and stores each direction
as one signed byte (`TokenBasis.codes`, int8): 128 bytes a token, half of those directions as float16 and
a twelfth of the model's float32 vector, and every candidate is scored in one matrix product of its codes
with the question's tokens scaled to match (`TokenBasis.question`), which moves a MaxSim by less than
0.01 (tests/test_tokens.py). The basis is fitted before anything is embedded, on a sample of chunks spread
over the corpus (`rag.ingest.fit_token_basis`), so each chunk's tokens are coded as they are made and
nothing is staged unprojected; a re-ingest keeps the last version's basis, in which its carried codes are.

Measured with float16 tokens in a basis fitted on all of them (the features stage on the Kafka docs: 8.3 ms
p50 with the feature, 8.5 without, within run-to-run noise; grouped 5-fold CV of the ranker on the tuning
parts, seventy-first session: hit@1 0.559 without the feature, 0.577 with full-size token vectors, 0.584
with 128 directions, 0.571 with 64; the shipped fit, 0.589, `evals/reports/fit_ranker.md`). The codes and
the sampled basis, with that ranker unrefitted, held out on the docs tuning part (seventy-fourth session,
`evals/reports/quality_history.md`): hit@1 0.565 -> 0.568, key-fact recall 0.694 -> 0.698.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag.embedding import normalised_rows
from rag.errors import IndexStoreError

TOKEN_DIMENSIONS = 128  # principal directions kept per index (module docstring)
BASIS_SAMPLE = 60_000  # token vectors the basis is fitted on at most, spread evenly over its sample
CODE_LIMIT = 127  # a code is a signed byte, symmetric about 0
# A direction's span is this much more than the sample's largest coordinate on it: a basis kept for later
# builds codes tokens its sample never saw, and a coordinate past the span is clipped.
CODE_HEADROOM = 1.5
MIN_SPAN = 0.2  # a tiny sample's flat direction would get a span near 0 and blow every other token's code up


@dataclass(frozen=True)
class TokenBasis:
    """Centre, principal directions and code spans of one corpus's token vectors: what its stored codes are in."""

    mean: np.ndarray  # float32 (dim,)
    components: np.ndarray  # float32 (dim, k), orthonormal columns
    scales: np.ndarray  # float32 (k,): a projected coordinate of ±scale is coded ±CODE_LIMIT

    @classmethod
    def fit(cls, sample: np.ndarray, dimensions: int = TOKEN_DIMENSIONS) -> TokenBasis:
        """Principal component analysis of `sample` (tokens, dim); fewer directions when the sample is small.
        Each direction's span is `CODE_HEADROOM` times the sample's largest projected coordinate on it,
        within [`MIN_SPAN`, 1] (a projected token has length 1, so no coordinate passes 1)."""
        sample = np.asarray(sample, dtype=np.float32)
        mean = sample.mean(axis=0) if len(sample) else np.zeros(sample.shape[1], np.float32)
        kept = max(1, min(dimensions, len(sample), sample.shape[1]))
        if len(sample) < 2:  # nothing to learn directions or spans from: the first coordinates, whole
            return cls(mean, np.eye(sample.shape[1], kept, dtype=np.float32), np.ones(kept, np.float32))
        centred = (sample - mean).astype(np.float64)
        # The covariance's eigenvectors, largest first: the SVD of the sample itself took 11 s for the seeds' tokens.
        _, vectors = np.linalg.eigh(centred.T @ centred)
        components = np.ascontiguousarray(vectors[:, ::-1][:, :kept], dtype=np.float32)
        peaks = np.abs(normalised_rows((sample - mean) @ components)).max(axis=0)  # as `project` makes them
        return cls(mean, components, np.clip(CODE_HEADROOM * peaks, MIN_SPAN, 1.0).astype(np.float32))

    @property
    def dimensions(self) -> int:
        return int(self.components.shape[1])

    def project(self, tokens: np.ndarray) -> np.ndarray:
        """`tokens` (n, dim) in this basis, each of length 1: float32 (n, k)."""
        tokens = np.asarray(tokens, dtype=np.float32).reshape(-1, len(self.mean))
        return normalised_rows((tokens - self.mean) @ self.components)

    def codes(self, tokens: np.ndarray) -> np.ndarray:
        """`tokens` (n, dim) as stored: int8 (n, k), each projected coordinate over its direction's span."""
        scaled = np.rint(self.project(tokens) / self.scales * CODE_LIMIT)
        return np.clip(scaled, -CODE_LIMIT, CODE_LIMIT).astype(np.int8)

    def question(self, tokens: np.ndarray) -> np.ndarray:
        """A question's `tokens` (n, dim) to multiply with stored codes: float32 (n, k) whose product with a
        token's codes is the cosine of the two projected tokens (a code is CODE_LIMIT x coordinate / span)."""
        return self.project(tokens) * (self.scales / CODE_LIMIT)

    def save(self, path: Path) -> None:
        with path.open("wb") as handle:
            np.savez(handle, mean=self.mean, components=self.components, scales=self.scales)

    @classmethod
    def load(cls, path: Path) -> TokenBasis:
        """A saved basis; one written before codes had spans (no "scales") is refused like a damaged one."""
        try:
            with np.load(path) as arrays:
                return cls(*(arrays[name].astype(np.float32) for name in ("mean", "components", "scales")))
        except Exception as exc:  # a damaged zip is BadZipFile, an empty file EOFError: one line naming the file
            raise IndexStoreError(f"{path} is unreadable ({exc}): re-run 'kafka-rag ingest'") from exc


def token_codes(data: bytes | None, dimensions: int) -> np.ndarray:
    """A row's stored codes (as they travel with it through ingest: shards, Spark) as int8 (tokens,
    dimensions); no tokens for a row that has none."""
    if not data:
        return np.zeros((0, dimensions), dtype=np.int8)
    if len(data) % dimensions:
        raise IndexStoreError(
            f"{len(data)} bytes of token codes are not whole tokens of {dimensions} directions: "
            "they were coded in another basis; re-run 'kafka-rag ingest'"
        )
    return np.frombuffer(data, dtype=np.int8).reshape(-1, dimensions)


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
