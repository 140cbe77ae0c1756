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


def read_pointer(index_dir: Path) -> str | None:
    """The version name `CURRENT` holds, whether or not that version exists; None without a pointer."""
    pointer = index_dir / "CURRENT"
    try:
        name = pointer.read_text(encoding="utf-8", errors="replace").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise IndexStoreError(f"Cannot read {pointer} ({exc.strerror}): check its permissions") from exc
    return name


def current_version(index_dir: Path) -> str | None:
    name = read_pointer(index_dir)
    return name if name and (index_dir / "versions" / name / "manifest.json").is_file() else None


def serving_path(index_dir: Path) -> Path:
    """The folder of the version `CURRENT` names; a clear error when there is none or it is missing."""
    name = read_pointer(index_dir)
    if name is None:
        raise IndexNotFoundError(f"No index at {index_dir}/: run 'kafka-rag ingest' first")
    pointer = index_dir / "CURRENT"
    if not name or "/" in name or name.startswith("."):
        raise IndexStoreError(
            f"{pointer} does not name a version ({name[:40]!r}): run 'kafka-rag index rollback' or 'kafka-rag ingest'"
        )
    path = index_dir / "versions" / name
    if not path.is_dir():
        raise IndexStoreError(
            f"{pointer} names version {name}, but {path}/ is missing: "
            "run 'kafka-rag index rollback' or 'kafka-rag ingest'"
        )
    return path


_REQUIRED = {
    "schema_version": int,
    "version": str,
    "model": dict,
    "chunker": dict,
    "faiss": dict,
    "counts": dict,
}
_REQUIRED_MODEL = {"name": str, "dimension": int, "fingerprint": str}


def read_version_manifest(path: Path) -> dict[str, Any]:
    """A version's manifest, checked: unreadable JSON, missing fields or another schema version name the file."""
    file = path / "manifest.json"
    repair = "re-run 'kafka-rag ingest' (or 'kafka-rag index rollback' to an earlier version)"
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IndexStoreError(f"{file} is missing: {repair}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise IndexStoreError(f"{file} is not valid JSON ({_short(exc)}): {repair}") from None
    if not isinstance(manifest, dict):
        raise IndexStoreError(f"{file} is not a JSON object: {repair}")
    for name, kind in _REQUIRED.items():
        if not isinstance(manifest.get(name), kind):
            raise IndexStoreError(f"{file} has no valid '{name}' field: {repair}")
    for name, kind in _REQUIRED_MODEL.items():
        if not isinstance(manifest["model"].get(name), kind):
            raise IndexStoreError(f"{file} has no valid 'model.{name}' field: {repair}")
    if manifest["schema_version"] != SCHEMA_VERSION:
        raise IndexStoreError(
            f"{file} is index schema version {manifest['schema_version']}, this code reads version "
            f"{SCHEMA_VERSION}: re-run 'kafka-rag ingest'"
        )
    return manifest


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160] or type(exc).__name__


def read_manifest(index_dir: Path) -> dict[str, Any] | None:
    """The serving version's manifest; None without an index; `IndexStoreError` when it is damaged."""
    if read_pointer(index_dir) is None:
        return None
    return read_version_manifest(serving_path(index_dir))


def read_chunk_table(index_dir: Path) -> pa.Table | None:
    """The serving version's chunk table with vectors (for re-ingest), or None without an index."""
    version = current_version(index_dir)
    if version is None:
        return None
    file = index_dir / "versions" / version / "chunks.parquet"
    try:
        return pq.read_table(file)
    except (OSError, ValueError) as exc:
        raise IndexStoreError(f"{file} is unreadable ({_short(exc)}): re-run 'kafka-rag ingest'") from exc


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
        switch_pointer(index_dir, version)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if current_version(index_dir) != version:  # never published: nothing may keep it
            shutil.rmtree(final, ignore_errors=True)
        raise
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


def switch_pointer(index_dir: Path, version: str) -> None:
    temporary = index_dir / f".CURRENT.{os.getpid()}.tmp"
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(version + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, index_dir / "CURRENT")


def load_index(index_dir: Path, expected_model: ModelIdentity | None = None) -> LoadedIndex:
    """Load the serving version; refuse it when it was built with another embedding model."""
    return load_version(serving_path(index_dir), expected_model)


def load_version(path: Path, expected_model: ModelIdentity | None = None) -> LoadedIndex:
    """Load one version folder; every damaged or missing part is an `IndexStoreError` naming its file."""
    index_dir = path.parent.parent
    manifest = read_version_manifest(path)
    version = path.name
    if expected_model is not None:
        check_model(manifest, expected_model)
    built_units = manifest.get("chunker", {}).get("units_version")
    if built_units != UNITS_VERSION:  # its unit vectors would not line up with the units quoted from them
        raise IndexMismatchError(
            f"Index version {version} in {index_dir}/ was built with evidence units version {built_units}, "
            f"this code uses {UNITS_VERSION}: re-run 'kafka-rag ingest'"
        )
    for part in ("chunks.parquet", "faiss.index", "bm25"):
        if not (path / part).exists():
            raise IndexStoreError(f"{path / part} is missing: re-run 'kafka-rag ingest'")
    current_file = path / "chunks.parquet"
    try:
        table = pq.read_table(current_file)
        vectors = np.asarray(table.column("vector").to_pylist(), dtype=np.float32).reshape(len(table), -1)
        dimension = vectors.shape[1]
        unit_vectors = [
            np.asarray(u, dtype=np.float32).reshape(-1, dimension) for u in table.column("unit_vectors").to_pylist()
        ]
        current_file = path / "faiss.index"
        index = faiss.read_index(str(current_file))
        current_file = path / "bm25"
        bm25 = load_bm25(current_file)
    except Exception as exc:  # any library's complaint about a damaged file becomes one line naming the file
        raise IndexStoreError(f"{current_file} is unreadable ({_short(exc)}): re-run 'kafka-rag ingest'") from exc
    if hasattr(index, "hnsw"):
        index.hnsw.efSearch = int(manifest["faiss"].get("efSearch", HNSW_EF_SEARCH))
    return LoadedIndex(
        version, path, manifest, table.drop(["vector", "unit_vectors"]), vectors, unit_vectors, index, bm25
    )


def check_model(manifest: Mapping[str, Any], expected: ModelIdentity) -> None:
    built = manifest.get("model", {})
    if built.get("dimension") != expected.dimension or built.get("fingerprint") != expected.fingerprint:
        raise IndexMismatchError(
            f"The index was built with embedding model '{built.get('name')}' (dimension {built.get('dimension')}, "
            f"fingerprint {built.get('fingerprint')}) but the configured model is '{expected.name}' (dimension "
            f"{expected.dimension}, fingerprint {expected.fingerprint}): re-run 'kafka-rag ingest' with this model "
            f"or set KAFKA_RAG_MODEL={built.get('name')}"
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
        "built_at": manifest.get("built_at"),
        "index_type": manifest.get("faiss", {}).get("type"),
    }


def rows_to_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([{name: row[name] for name in CHUNK_SCHEMA.names} for row in rows], schema=CHUNK_SCHEMA)
