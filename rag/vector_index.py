"""Nearest-neighbour search over a vector file: exact while cheap, IVF-PQ with an exact re-rank above.

The vectors live in a file of the version folder (`rag.index_store`), memory-mapped: the FAISS index
is built from it block by block (an approximate one is trained on a sample first, then filled block
by block, the autofaiss approach), and an approximate search re-scores its candidates from the same
file, so the PQ codes only have to find the neighbourhood. Neither building nor serving holds all
vectors in memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

BLOCK_ROWS = 16_384  # vectors read, converted and added at a time
TRAIN_PER_LIST = 40  # k-means needs ~39 points per centroid (FAISS warns below); more only slows training
TRAIN_MIN = 10_240  # and each PQ sub-quantizer has 256 centroids
IVF_NPROBE = 32  # benchmarks/scale.py: recall@10 against exact search at 10^5 and 10^6 chunks
REFINE = 8  # approximate candidates per wanted result, re-scored exactly from the vector file


def choose_index_type(count: int, flat_max: int, dimension: int) -> dict[str, Any]:
    """Exact search up to `flat_max` vectors; above, IVF (about sqrt(n) lists) with PQ codes of one byte per
    4 dimensions and an exact re-rank of `REFINE` x k candidates: on clustered vectors, PQ alone finds under
    half of the true top 10; one byte per 8 dimensions re-ranked 4x found 0.68, this 0.99
    (tests/test_vector_index.py's set; benchmarks/scale.py measures the Kafka docs' vectors)."""
    if count <= flat_max:
        return {"type": "Flat", "metric": "inner_product"}
    lists = max(16, int(math.sqrt(count)))
    sub_quantizers = dimension // 4 if dimension % 4 == 0 else 1
    return {
        "type": f"IVF{lists},PQ{sub_quantizers}",
        "metric": "inner_product",
        "nlist": lists,
        "nprobe": min(IVF_NPROBE, lists),
        "refine": REFINE,
    }


def build_vector_index(vectors: np.ndarray, spec: Mapping[str, Any], seed: int = 0) -> faiss.Index:
    """A FAISS index over `vectors` (any float dtype, usually a memory map), filled block by block."""
    count, dimension = vectors.shape
    index = faiss.index_factory(dimension, spec["type"], faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        size = min(count, max(TRAIN_MIN, int(spec["nlist"]) * TRAIN_PER_LIST))
        sample = np.sort(np.random.default_rng(seed).choice(count, size=size, replace=False))
        index.train(_block(vectors, sample))
    for start in range(0, count, BLOCK_ROWS):
        index.add(_block(vectors, slice(start, start + BLOCK_ROWS)))
    return index


def _block(vectors: np.ndarray, rows: Any) -> np.ndarray:
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


def write_vector_index(index: faiss.Index, path: Path) -> None:
    faiss.write_index(index, str(path))


@dataclass(frozen=True)
class VectorSearch:
    """A loaded index with the vector file it was built from (for re-ranking and for reading vectors)."""

    index: faiss.Index
    vectors: np.ndarray
    spec: Mapping[str, Any]

    @classmethod
    def load(cls, path: Path, vectors: np.ndarray, spec: Mapping[str, Any]) -> VectorSearch:
        # Flat codes are memory-mapped (processes share the page cache); an IVF-PQ index is small.
        flags = faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY if spec["type"] == "Flat" else 0
        index = faiss.read_index(str(path), flags)
        if "nprobe" in spec:
            faiss.extract_index_ivf(index).nprobe = int(spec["nprobe"])
        return cls(index, vectors, spec)

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        """Rows of the `k` nearest vectors to `query` (a float32 unit vector), best first."""
        k = min(k, self.size)
        if k <= 0:
            return np.zeros(0, np.int64)
        refine = int(self.spec.get("refine", 1))
        _, found = self.index.search(query.reshape(1, -1).astype(np.float32), min(k * refine, self.size))
        rows = found[0][found[0] >= 0]
        if refine == 1:
            return rows[:k]
        rows = np.sort(rows)  # ascending reads from the memory map
        exact = np.asarray(self.vectors[rows], dtype=np.float32) @ query
        return rows[np.argsort(-exact, kind="stable")[:k]]
