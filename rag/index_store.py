"""The index directory: versioned builds, an atomic `CURRENT` pointer, and a loader that checks the model.

    index/
      CURRENT                      name of the serving version (replaced atomically with os.replace)
      versions/<version>/          one complete build
        manifest.json              what was built, from what, with which model and settings
        chunks.parquet             the chunk table, vectors included (re-ingest reuses them)
        faiss.index                inner-product index over L2-normalised vectors
        bm25/                      the bm25s lexical index
      versions/.staging-<version>/ a build in progress; never read, removed on failure

A build writes a staging folder, renames it into place, and only then swaps `CURRENT`: a crash or
Ctrl-C at any point leaves the previous version serving and untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rag.chunking import lexical_text
from rag.embedding import ModelIdentity
from rag.errors import IndexMismatchError, IndexNotFoundError, IndexStoreError
from rag.lexical import build_bm25, load_bm25, save_bm25
from rag.synthetic import SyntheticQuery, synthetic_queries
from rag.units import UNITS_VERSION

SCHEMA_VERSION = 1
KEEP_VERSIONS = 3
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 200  # benchmarks/index_recall.py: at 100k vectors 80 could not reach 0.98 recall@10
HNSW_EF_SEARCH = 512  # 0.985 recall@10 of the golden questions at 100k, ~1 ms per query on one thread

CHUNK_SCHEMA = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("doc_id", pa.string()),
        ("source_path", pa.string()),
        ("title", pa.string()),
        ("section_path", pa.list_(pa.string())),
        ("text", pa.string()),
        ("identifiers", pa.list_(pa.string())),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("url", pa.string()),
        ("vector", pa.list_(pa.float32())),
        ("unit_vectors", pa.list_(pa.list_(pa.float32()))),  # one per `rag.units.build_units` unit, in order
    ]
)


@dataclass(frozen=True)
class LoadedIndex:
    """One published version, loaded for reading; shared by all requests of a process."""

    version: str
    path: Path
    manifest: dict[str, Any]
    chunks: pa.Table  # CHUNK_SCHEMA without the vector columns
    vectors: np.ndarray  # float32 (n, dim), row i = chunk row i
    unit_vectors: list[np.ndarray]  # per chunk row: float32 (units, dim)
    faiss_index: faiss.Index
    bm25: Any


def new_version_name() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def current_version(index_dir: Path) -> str | None:
    pointer = index_dir / "CURRENT"
    if not pointer.is_file():
        return None
    name = pointer.read_text(encoding="utf-8").strip()
    return name if name and (index_dir / "versions" / name / "manifest.json").is_file() else None


def read_manifest(index_dir: Path) -> dict[str, Any] | None:
    version = current_version(index_dir)
    if version is None:
        return None
    return json.loads((index_dir / "versions" / version / "manifest.json").read_text(encoding="utf-8"))


def read_chunk_table(index_dir: Path) -> pa.Table | None:
    """The serving version's chunk table with vectors (for re-ingest), or None without an index."""
    version = current_version(index_dir)
    if version is None:
        return None
    return pq.read_table(index_dir / "versions" / version / "chunks.parquet")


def choose_index_type(count: int, flat_max: int) -> dict[str, Any]:
    """Exact search while it is cheap; HNSW above `flat_max` chunks (see benchmarks/index_recall.py)."""
    if count <= flat_max:
        return {"type": "Flat", "metric": "inner_product"}
    return {
        "type": f"HNSW{HNSW_M}",
        "metric": "inner_product",
        "M": HNSW_M,
        "efConstruction": HNSW_EF_CONSTRUCTION,
        "efSearch": HNSW_EF_SEARCH,
    }


def build_faiss(vectors: np.ndarray, spec: Mapping[str, Any]) -> faiss.Index:
    dimension = vectors.shape[1]
    index: faiss.Index
    if spec["type"] == "Flat":
        index = faiss.IndexFlatIP(dimension)
    else:
        hnsw = faiss.IndexHNSWFlat(dimension, int(spec["M"]), faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = int(spec["efConstruction"])
        hnsw.hnsw.efSearch = int(spec["efSearch"])
        index = hnsw
    if len(vectors):
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def write_version(
    index_dir: Path,
    table: pa.Table,
    manifest: dict[str, Any],
    *,
    flat_max: int,
    before_publish: Any = None,
) -> str:
    """Write a complete version and switch `CURRENT` to it; returns the version name.

    `before_publish` is a hook called after the version folder is complete and before the pointer
    moves (tests use it to simulate a crash at the worst moment).
    """
    versions = index_dir / "versions"
    versions.mkdir(parents=True, exist_ok=True)
    version = new_version_name()
    staging = versions / f".staging-{version}"
    final = versions / version
    try:
        staging.mkdir()
        vectors = np.asarray(table.column("vector").to_pylist(), dtype=np.float32).reshape(len(table), -1)
        spec = choose_index_type(len(table), flat_max)
        faiss.write_index(build_faiss(vectors, spec), str(staging / "faiss.index"))
        save_bm25(build_bm25(_embedding_texts(table)), staging / "bm25")
        pq.write_table(table, staging / "chunks.parquet")
        pq.write_table(synthetic_table(table), staging / SYNTHETIC_FILE)
        manifest = {**manifest, "schema_version": SCHEMA_VERSION, "version": version, "faiss": spec}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
        staging.rename(final)
        if before_publish is not None:
            before_publish(final)
        _switch_pointer(index_dir, version)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if current_version(index_dir) != version:  # never published: nothing may keep it
            shutil.rmtree(final, ignore_errors=True)
        raise
    _prune_old_versions(versions, keep=version)
    return version


SYNTHETIC_FILE = "synthetic_queries.parquet"


def synthetic_table(table: pa.Table) -> pa.Table:
    """The ranker's synthetic training queries for this version's chunks (`rag.synthetic`)."""
    rows = [
        {"query": q.query, "chunk_id": q.chunk_id, "kind": q.kind}
        for chunk_id, path, text in zip(
            table.column("chunk_id").to_pylist(),
            table.column("section_path").to_pylist(),
            table.column("text").to_pylist(),
            strict=True,
        )
        for q in synthetic_queries(chunk_id, path, text)
    ]
    schema = pa.schema([("query", pa.string()), ("chunk_id", pa.string()), ("kind", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema)


def read_synthetic(path: Path) -> list[SyntheticQuery]:
    """A version's synthetic queries; none for a version built before they existed."""
    file = path / SYNTHETIC_FILE
    if not file.is_file():
        return []
    return [SyntheticQuery(**row) for row in pq.read_table(file).to_pylist()]


def _embedding_texts(table: pa.Table) -> list[str]:
    return [
        lexical_text(path, text)
        for path, text in zip(table.column("section_path").to_pylist(), table.column("text").to_pylist(), strict=True)
    ]


def _switch_pointer(index_dir: Path, version: str) -> None:
    temporary = index_dir / f".CURRENT.{os.getpid()}.tmp"
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(version + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, index_dir / "CURRENT")


def _prune_old_versions(versions: Path, keep: str) -> None:
    complete = sorted(p for p in versions.iterdir() if p.is_dir() and not p.name.startswith("."))
    for old in complete[:-KEEP_VERSIONS]:
        if old.name != keep:
            shutil.rmtree(old, ignore_errors=True)
    now = time.time()
    for stale in versions.glob(".staging-*"):  # left by a killed build (kill -9 skips our cleanup)
        if now - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)


def load_index(index_dir: Path, expected_model: ModelIdentity | None = None) -> LoadedIndex:
    """Load the serving version; refuse it when it was built with another embedding model."""
    version = current_version(index_dir)
    if version is None:
        raise IndexNotFoundError(f"No index at {index_dir}/: run 'kafka-rag ingest' first")
    path = index_dir / "versions" / version
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    if expected_model is not None:
        check_model(manifest, expected_model)
    built_units = manifest.get("chunker", {}).get("units_version")
    if built_units != UNITS_VERSION:  # its unit vectors would not line up with the units quoted from them
        raise IndexMismatchError(
            f"Index version {version} in {index_dir}/ was built with evidence units version {built_units}, "
            f"this code uses {UNITS_VERSION}: re-run 'kafka-rag ingest'"
        )
    try:
        table = pq.read_table(path / "chunks.parquet")
        vectors = np.asarray(table.column("vector").to_pylist(), dtype=np.float32).reshape(len(table), -1)
        dimension = vectors.shape[1]
        unit_vectors = [
            np.asarray(u, dtype=np.float32).reshape(-1, dimension) for u in table.column("unit_vectors").to_pylist()
        ]
        index = faiss.read_index(str(path / "faiss.index"))
        bm25 = load_bm25(path / "bm25")
    except (OSError, RuntimeError, ValueError) as exc:
        raise IndexStoreError(
            f"Index version {version} in {index_dir}/ is unreadable ({exc}): re-run 'kafka-rag ingest'"
        ) from exc
    if hasattr(index, "hnsw"):
        index.hnsw.efSearch = int(manifest["faiss"].get("efSearch", HNSW_EF_SEARCH))
    return LoadedIndex(
        version, path, manifest, table.drop(["vector", "unit_vectors"]), vectors, unit_vectors, index, bm25
    )


def check_model(manifest: Mapping[str, Any], expected: ModelIdentity) -> None:
    """Same dimension and fingerprint, whatever the backends: torch and onnx vectors agree, so either serves an
    index built by the other; int8 vectors do not, so its fingerprint differs and it needs its own index."""
    built = manifest.get("model", {})
    if built.get("dimension") != expected.dimension or built.get("fingerprint") != expected.fingerprint:
        raise IndexMismatchError(
            f"The index was built with embedding model '{built.get('name')}' on backend {built.get('backend')} "
            f"(dimension {built.get('dimension')}, fingerprint {built.get('fingerprint')}) but the configured model "
            f"is '{expected.name}' on backend {expected.backend} (dimension {expected.dimension}, fingerprint "
            f"{expected.fingerprint}): re-run 'kafka-rag ingest' with this model and backend, or set "
            f"KAFKA_RAG_MODEL={built.get('name')} and KAFKA_RAG_EMBED_BACKEND={built.get('backend')}"
        )


def summarize(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The short manifest view shown by the CLI, the UI footer and eval reports."""
    counts = manifest.get("counts", {})
    return {
        "version": manifest.get("version"),
        "documents": counts.get("documents", 0),
        "chunks": counts.get("chunks", 0),
        "skipped": len(manifest.get("skipped", [])),
        "model": manifest.get("model", {}).get("name"),
        "backend": manifest.get("model", {}).get("backend"),
        "built_at": manifest.get("built_at"),
        "index_type": manifest.get("faiss", {}).get("type"),
    }


def rows_to_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([{name: row[name] for name in CHUNK_SCHEMA.names} for row in rows], schema=CHUNK_SCHEMA)
