"""Nearest-neighbour search over a vector file: exact below the threshold, IVF (4-bit codes) with an exact re-rank.

Clustered synthetic vectors (points around a few hundred centres, like a corpus' topics) with the real
FAISS; the recall at real scale is measured by benchmarks/scale.py.
"""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from rag.vector_index import (
    BLOCK_ROWS,
    REFINE,
    TRAIN_MIN,
    TRAIN_PER_LIST,
    VectorFile,
    VectorSearch,
    choose_index_type,
    write_vector_index,
)

DIMENSION = 32


def _clustered(count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(200, DIMENSION))
    points = centres[rng.integers(len(centres), size=count)] + rng.normal(scale=0.3, size=(count, DIMENSION))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points.astype(np.float32)


def _loaded(tmp_path, vectors: np.ndarray, flat_max: int) -> VectorSearch:
    spec = choose_index_type(len(vectors), flat_max, DIMENSION)
    write_vector_index(vectors, spec, tmp_path / "vectors.faiss")
    path = tmp_path / "vectors.f32"
    vectors.tofile(path)
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=vectors.shape) if len(vectors) else vectors
    return VectorSearch.load(tmp_path / "vectors.faiss", mapped, spec)


def test_exact_up_to_the_threshold_then_ivf_pq_with_a_re_rank():
    assert choose_index_type(1000, 1000, 384) == {"type": "Flat", "metric": "inner_product"}
    above = choose_index_type(1_000_000, 1000, 384)
    assert above["type"] == "IVF1000,SQ4" and above["refine"] == REFINE
    assert above["nprobe"] <= above["nlist"]
    assert choose_index_type(2000, 1000, 384)["nlist"] >= 16  # small sets still get enough lists to probe


def test_flat_search_is_exact(tmp_path):
    vectors = _clustered(500)
    search = _loaded(tmp_path, vectors, flat_max=1000)
    query = vectors[7]
    expected = np.argsort(-(vectors @ query), kind="stable")[:10]
    assert search.search(query, 10).tolist() == expected.tolist()
    assert search.search(query, 10_000).shape == (500,)  # asking for more than there is gives all


def test_approximate_search_re_ranks_exactly_and_keeps_recall(tmp_path):
    vectors = _clustered(20_000, seed=1)
    search = _loaded(tmp_path, vectors, flat_max=1000)
    assert search.spec["type"].startswith("IVF") and search.size == len(vectors)
    noisy = vectors[:100] + np.random.default_rng(2).normal(scale=0.1, size=(100, DIMENSION)).astype(np.float32)
    queries = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)  # questions near the corpus' topics
    recalls = []
    for query in queries:
        found = search.search(query, 10)
        scores = vectors[found] @ query
        assert (np.diff(scores) <= 1e-6).all()  # best first, by the exact score from the vector file
        exact = np.argsort(-(vectors @ query))[:10]
        recalls.append(len(set(found.tolist()) & set(exact.tolist())) / 10)
    assert np.mean(recalls) >= 0.9


@pytest.mark.parametrize("count", [0, 1])
def test_tiny_and_empty_sets(tmp_path, count):
    vectors = _clustered(max(count, 1))[:count]
    search = _loaded(tmp_path, vectors, flat_max=1000)
    assert search.search(np.ones(DIMENSION, np.float32) / DIMENSION**0.5, 5).tolist() == list(range(count))


@pytest.mark.parametrize("distinct", [20_000, 10])  # most lists hold codes / most are empty (FAISS's two layouts)
@pytest.mark.parametrize("place_rows", [131_072, 3_000])  # codes placed in one pass, or in several
def test_the_streamed_ivf_file_is_the_one_faiss_writes(tmp_path, monkeypatch, distinct, place_rows):
    """The IVF writer reads its vectors from a file and writes each list's codes where they belong; FAISS
    must read the result as its own file."""
    monkeypatch.setattr("rag.vector_index.PLACE_ROWS", place_rows)
    count, lists = 20_000, 64
    vectors = _clustered(distinct, seed=3)[np.arange(count) % distinct]
    vectors.astype(np.float16).tofile(tmp_path / "vectors.f16")
    vectors = vectors.astype(np.float16).astype(np.float32)  # what the writer reads back
    spec = {"type": f"IVF{lists},SQ4", "nlist": lists}
    stored = VectorFile(tmp_path / "vectors.f16", np.dtype(np.float16), vectors.shape)
    write_vector_index(stored, spec, tmp_path / "streamed.faiss", seed=5)
    reference = faiss.index_factory(DIMENSION, spec["type"], faiss.METRIC_INNER_PRODUCT)
    size = min(count, max(TRAIN_MIN, lists * TRAIN_PER_LIST))
    reference.train(vectors[np.sort(np.random.default_rng(5).choice(count, size=size, replace=False))])
    for start in range(0, count, BLOCK_ROWS):  # FAISS breaks near-ties by batch: add as the writer encodes
        reference.add(vectors[start : start + BLOCK_ROWS])
    faiss.write_index(reference, str(tmp_path / "reference.faiss"))
    assert (tmp_path / "streamed.faiss").read_bytes() == (tmp_path / "reference.faiss").read_bytes()
    # No scratch file left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference.faiss", "streamed.faiss", "vectors.f16"]


def test_a_vector_file_reads_slices_and_sorted_rows(tmp_path):
    vectors = _clustered(BLOCK_ROWS * 2 + 5, seed=4)
    vectors.tofile(tmp_path / "vectors.f32")
    stored = VectorFile(tmp_path / "vectors.f32", np.dtype(np.float32), vectors.shape)
    assert len(stored) == len(vectors)
    np.testing.assert_array_equal(stored[BLOCK_ROWS - 2 : BLOCK_ROWS + 3], vectors[BLOCK_ROWS - 2 : BLOCK_ROWS + 3])
    np.testing.assert_array_equal(stored[len(vectors) - 3 : len(vectors) + 10], vectors[-3:])  # clipped at the end
    rows = np.asarray([0, 7, BLOCK_ROWS - 1, BLOCK_ROWS, 2 * BLOCK_ROWS + 4])
    np.testing.assert_array_equal(stored[rows], vectors[rows])
    assert stored[np.zeros(0, np.int64)].shape == (0, DIMENSION)
