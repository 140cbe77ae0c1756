"""Which FAISS index above which size: recall of HNSW and IVF against exact search, and query latency.

Vectors: the chunk vectors of a built kafka-docs index (benchmarks/ingest.py leaves one in
$TMPDIR/kafka-rag-bench/kafka-docs/index; or pass --index), at their real size N and at a
synthetic N=100k made of the real vectors plus points sampled around them (real vector + Gaussian
noise, renormalised: cosine ~0.85 to its origin, so the set keeps the corpus' clustering). Without
a kafka-docs index, the seeds vectors plus random unit vectors stand in, and the output says so.
Queries: the golden questions embedded with the real model (what the assistant searches with),
plus perturbed real vectors that are not in the index.

Exact search is IndexFlatIP; HNSW is M=32, efConstruction=80 (the first default) and 200 (the one in use), with
efSearch in {16, 32, 64, 128, 256, 512}; IVF is IVF{~4 sqrt N},Flat trained on the set with nprobe
in {1, 4, 16}. Every search asks for k=40 (the retriever's candidate depth); recall@10 compares the
first 10 with the exact top 10, and "score mass" is the summed similarity of the approximate top 10
over the exact one (near 1 when the misses are near-ties). Latency is per query, one query at a
time, single-threaded (faiss.omp_set_num_threads(1)).

    .venv/bin/python benchmarks/index_recall.py [--index DIR] [--synthetic 100000] [--queries 200]

It prints the configuration it recommends next to the project's defaults (`flat_index_max` in
rag/settings.py, HNSW32 efConstruction/efSearch in rag/index_store.py), which came from this run.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from evals.golden import load_golden
from rag.index_store import HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH, HNSW_M, read_chunk_table
from rag.settings import Settings

REPO = Path(__file__).resolve().parents[1]
DEFAULT_INDEX = Path(tempfile.gettempdir()) / "kafka-rag-bench" / "kafka-docs" / "index"
GOLDEN = REPO / "evals" / "golden.jsonl"
K = 40
RECALL_AT = 10
EF_CONSTRUCTION = (80, HNSW_EF_CONSTRUCTION)  # the first default, and the denser graph in use since this run
EF_SEARCH = (16, 32, 64, 128, 256, 512)  # 16..128 asked for; two more to see where recall saturates
NPROBE = (1, 4, 16)
NOISE = 0.6  # ||noise|| relative to a unit vector: cosine to the origin ~ 1/sqrt(1 + 0.36) = 0.86
LATENCY_BUDGET_MS = 5.0  # single-thread dense search budget per question, well inside the ask p50


def normalise(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def chunk_vectors(index_dir: Path) -> np.ndarray:
    table = read_chunk_table(index_dir)
    assert table is not None, f"no index in {index_dir}"
    return np.asarray(table.column("vector").to_pylist(), dtype=np.float32)


def real_vectors(index: Path | None, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """(vectors, where they come from): a kafka-docs index, else seeds vectors padded with random ones."""
    candidates = [index] if index else [DEFAULT_INDEX]
    for path in candidates:
        if path and (path / "CURRENT").is_file():
            return chunk_vectors(path), f"chunk vectors of {path}"
    if index:
        raise SystemExit(f"No index at {index}: build one with 'kafka-rag ingest CORPUS --index {index}'")
    seeds = REPO / "index"
    if not (seeds / "CURRENT").is_file():
        raise SystemExit("No kafka-docs index and no index/ of the seeds: run benchmarks/ingest.py or make index")
    vectors = chunk_vectors(seeds)
    padding = normalise(rng.normal(size=(2000 - len(vectors), vectors.shape[1])))
    return np.vstack([vectors, padding]), (
        f"NO kafka-docs index: {len(vectors)} seeds vectors from {seeds} "
        f"plus {len(padding)} random unit vectors (less realistic)"
    )


def around(vectors: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` points near randomly chosen `vectors` (same clusters, not duplicates)."""
    origins = vectors[rng.integers(0, len(vectors), size=count)]
    noise = rng.normal(size=origins.shape).astype(np.float32) * (NOISE / math.sqrt(vectors.shape[1]))
    return normalise(origins + noise)


def question_vectors() -> np.ndarray | None:
    """The golden questions as the assistant embeds them, or None without the golden set."""
    if not GOLDEN.is_file():
        return None
    from rag.embedding import load_embedder
    from rag.settings import DEFAULT_MODEL

    questions = [item.question for item in load_golden(GOLDEN)]
    return load_embedder(DEFAULT_MODEL).encode(questions)


def search_all(index: faiss.Index, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Top-K ids per query, searching one query at a time; and each query's latency in ms."""
    ids = np.empty((len(queries), K), dtype=np.int64)
    latencies = np.empty(len(queries))
    for i, query in enumerate(queries):
        started = time.perf_counter()
        _, found = index.search(query.reshape(1, -1), K)
        latencies[i] = (time.perf_counter() - started) * 1000
        ids[i] = found[0]
    return ids, latencies


def recall(found: np.ndarray, exact: np.ndarray, depth: int) -> float:
    return float(np.mean([len(set(f[:depth]) & set(e[:depth])) / depth for f, e in zip(found, exact, strict=True)]))


def score_ratio(found: np.ndarray, exact: np.ndarray, vectors: np.ndarray, queries: np.ndarray) -> float:
    """Similarity mass of the approximate top 10 over the exact top 10: near 1 when misses are near-ties."""

    def mass(ids: np.ndarray) -> np.ndarray:
        picked = vectors[np.where(ids[:, :RECALL_AT] < 0, 0, ids[:, :RECALL_AT])]
        return np.einsum("qkd,qd->q", picked, queries)

    return float(np.mean(mass(found) / mass(exact)))


def size_mb(index: faiss.Index) -> float:
    return faiss.serialize_index(index).nbytes / 1e6


def measure(vectors: np.ndarray, queries: np.ndarray, questions: int) -> list[dict]:
    """One row per index and search setting; the first `questions` queries are the golden questions."""
    n, dimension = vectors.shape
    flat = faiss.IndexFlatIP(dimension)
    flat.add(vectors)
    exact, _ = search_all(flat, queries)

    def row(name: str, param: str, build_s: float, index: faiss.Index) -> dict:
        found, latencies = search_all(index, queries)
        asked = slice(0, questions or len(queries))
        return {
            "index": name,
            "param": param,
            "build_s": build_s,
            "questions10": recall(found[asked], exact[asked], RECALL_AT),
            "recall10": recall(found, exact, RECALL_AT),
            "recall40": recall(found, exact, K),
            "mass10": score_ratio(found, exact, vectors, queries),
            "mean_ms": latencies.mean(),
            "p95_ms": np.percentile(latencies, 95),
            "mb": size_mb(index),
        }

    rows = [row("Flat (exact)", "", 0.0, flat)]
    for ef_construction in EF_CONSTRUCTION:
        started = time.perf_counter()
        hnsw = faiss.IndexHNSWFlat(dimension, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = ef_construction
        hnsw.add(vectors)
        build = time.perf_counter() - started
        for ef in EF_SEARCH:
            hnsw.hnsw.efSearch = ef
            rows.append(row(f"HNSW{HNSW_M} efC{ef_construction}", f"efSearch={ef}", build, hnsw))

    nlist = max(1, round(4 * math.sqrt(n)))
    started = time.perf_counter()
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(dimension), dimension, nlist, faiss.METRIC_INNER_PRODUCT)
    ivf.cp.min_points_per_centroid = 5  # small real sets: train on what there is, without the warning
    ivf.train(vectors)
    ivf.add(vectors)
    build = time.perf_counter() - started
    for nprobe in NPROBE:
        ivf.nprobe = nprobe
        rows.append(row(f"IVF{nlist},Flat", f"nprobe={nprobe}", build, ivf))
    return rows


def print_table(n: int, rows: list[dict]) -> None:
    print(f"\nN = {n:,} vectors")
    print(
        f"| index | search | build s | recall@{RECALL_AT} questions | recall@{RECALL_AT} all | recall@{K} all "
        f"| score mass@{RECALL_AT} | ms/query mean | ms/query p95 | MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['index']} | {r['param']} | {r['build_s']:.1f} | {r['questions10']:.3f} | {r['recall10']:.3f} | "
            f"{r['recall40']:.3f} | {r['mass10']:.4f} | {r['mean_ms']:.3f} | {r['p95_ms']:.3f} | {r['mb']:.0f} |"
        )


def recommend(results: dict[int, list[dict]]) -> str:
    largest = max(results)
    rows = results[largest]
    flat_ms = rows[0]["mean_ms"]
    per_vector_ms = flat_ms / largest
    flat_max = int(LATENCY_BUDGET_MS / per_vector_ms)
    hnsw = [r for r in rows if r["index"].startswith("HNSW")]
    # The retriever takes 40 dense candidates: both the questions' top 10 and the top 40 must hold up.
    good = [r for r in hnsw if r["questions10"] >= 0.98 and r["recall40"] >= 0.95]
    chosen = min(good, key=lambda r: r["mean_ms"]) if good else max(hnsw, key=lambda r: r["questions10"])
    return (
        f"recommendation: exact search costs {flat_ms:.1f} ms/query at N={largest:,} single-threaded, "
        f"so flat stays under {LATENCY_BUDGET_MS:.0f} ms up to ~{flat_max:,} vectors "
        f"-> flat_index_max ~ {_round(flat_max):,} (now {Settings().flat_index_max:,}); above it "
        f"{chosen['index']} with {chosen['param']} (questions' recall@10 {chosen['questions10']:.3f}, "
        f"recall@40 {chosen['recall40']:.3f}, {chosen['mean_ms']:.2f} ms/query; now "
        f"efC{HNSW_EF_CONSTRUCTION} efSearch={HNSW_EF_SEARCH})"
        + ("" if good else ": no configuration tried reaches 0.98/0.95")
    )


def _round(value: int) -> int:
    magnitude = 10 ** max(0, len(str(value)) - 1)
    return max(magnitude, (value // magnitude) * magnitude)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help=f"a built index (default: {DEFAULT_INDEX})")
    parser.add_argument("--synthetic", type=int, default=100_000, help="size of the synthetic set")
    parser.add_argument("--queries", type=int, default=200, help="perturbed real vectors used as extra queries")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(args.seed)

    vectors, origin = real_vectors(args.index, rng)
    questions = question_vectors()
    perturbed = around(vectors, args.queries, rng)
    queries = perturbed if questions is None else np.vstack([questions, perturbed])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a shared machine: figures are noisy)")
    print(f"vectors: {origin}: {len(vectors):,} x {vectors.shape[1]}")
    print(
        f"queries: {0 if questions is None else len(questions)} golden questions + {len(perturbed)} perturbed "
        "real vectors, one at a time, 1 thread, k=40"
    )

    asked = 0 if questions is None else len(questions)
    results = {len(vectors): measure(vectors, queries, asked)}
    print_table(len(vectors), results[len(vectors)])
    if args.synthetic > len(vectors):
        synthetic = np.vstack([vectors, around(vectors, args.synthetic - len(vectors), rng)])
        results[len(synthetic)] = measure(synthetic, queries, asked)
        print_table(len(synthetic), results[len(synthetic)])
    print("\n" + recommend(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
