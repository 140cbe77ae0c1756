"""The index directory: versioned builds, an atomic `CURRENT` pointer, and a loader that checks the model.

    index/
      CURRENT                      name of the serving version (replaced atomically with os.replace)
      versions/<version>/          one complete build
        manifest.json              what was built, from what, with which model and settings
        chunks.arrow               the chunk table without vectors (Arrow IPC, memory-mapped when served)
        vectors.f32                chunk vectors, float32 (chunks x dim), row i = chunk row i
        units.f16                  evidence-unit vectors, float16 (units x dim), in chunk order
        unit_offsets.i64           chunk row i's units are units[offsets[i]:offsets[i + 1]]
        tokens.i8                  the chunks' token vectors as int8 codes in the index's token basis (`rag.tokens`)
        token_offsets.i64          chunk row i's tokens are tokens[offsets[i]:offsets[i + 1]]
        token_basis.npz            that basis: the centre, principal directions and code spans of the corpus's tokens
        faiss.index, units.faiss   nearest-neighbour indexes over the two vector files (`rag.vector_index`)
        bm25/                      the bm25s lexical index (memory-mapped when served)
      versions/.staging-<version>/ a build in progress; never read, removed on failure

A build streams its rows into a staging folder (`VersionWriter`: no step holds the corpus' vectors),
renames it into place, and only then swaps `CURRENT`: a crash or Ctrl-C at any point leaves the
previous version serving and untouched. A serving process memory-maps the big files, so what it
holds is what its queries touch, and several processes on one machine share the page cache.
"""

from __future__ import annotations

import json
import os
import shutil
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rag.chunking import lexical_text
from rag.embedding import ModelIdentity
from rag.errors import IndexMismatchError, IndexNotFoundError, IndexStoreError
from rag.identifiers import command_flags, defined_identifiers
from rag.lexical import LEXICAL_VERSION, load_bm25, write_bm25
from rag.synthetic import SyntheticQuery, synthetic_queries
from rag.tokens import TokenBasis, token_codes
from rag.units import UNITS_VERSION
from rag.vector_index import VectorFile, VectorSearch, choose_index_type, write_vector_index

SCHEMA_VERSION = 2
WRITE_BATCH_ROWS = 1024
CHUNKS_FILE = "chunks.arrow"
VECTORS_FILE = "vectors.f32"
UNITS_FILE = "units.f16"
UNIT_OFFSETS_FILE = "unit_offsets.i64"
TOKENS_FILE = "tokens.i8"
TOKEN_OFFSETS_FILE = "token_offsets.i64"
TOKEN_BASIS_FILE = "token_basis.npz"
# How token vectors are made and stored (2: int8 codes; 3: a long chunk's tail from its units): an index of
# another version is built again.
TOKENS_VERSION = 3
FAISS_FILE = "faiss.index"
UNITS_FAISS_FILE = "units.faiss"
SYNTHETIC_FILE = "synthetic_queries.parquet"
MAX_COMMAND_FLAGS = 10_000  # option names kept for the manifest: the Kafka docs use 112, the seeds 5

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
        ("continues_code", pa.bool_()),  # begins inside a fenced block cut for size (`rag.units.build_units`)
    ]
)
STORED_SCHEMA = CHUNK_SCHEMA.append(pa.field("defined", pa.list_(pa.string())))  # what the chunk defines
VECTOR_FIELDS = ("vector", "unit_vectors")  # a chunk row's vectors: its own, and one per evidence unit
# A chunk row's token vectors travel as "token_codes", int8 bytes in the index's basis (`rag.tokens.token_codes`),
# from the embedding step on (`rag.ingest.embed_rows`), or carried from the last version, whose basis a re-ingest keeps.


@dataclass(frozen=True)
class LoadedIndex:
    """One published version, loaded for reading; shared by all requests of a process."""

    version: str
    path: Path
    manifest: dict[str, Any]
    chunks: pa.Table  # STORED_SCHEMA, memory-mapped
    vectors: np.ndarray  # float32 (chunks, dim), memory-mapped
    units: np.ndarray  # float16 (units, dim), memory-mapped
    unit_offsets: np.ndarray  # int64 (chunks + 1,)
    dense: VectorSearch  # over `vectors`
    unit_search: VectorSearch  # over `units`
    bm25: Any
    tokens: np.ndarray  # int8 (tokens, k), memory-mapped: codes in `token_basis`
    token_offsets: np.ndarray  # int64 (chunks + 1,)
    token_basis: TokenBasis

    def unit_vectors(self, row: int) -> np.ndarray:
        """Chunk row `row`'s evidence-unit vectors as float32 (units, dim)."""
        return np.asarray(self.units[self.unit_offsets[row] : self.unit_offsets[row + 1]], dtype=np.float32)

    def token_vectors(self, rows: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The token codes of chunk rows `rows`, one after another, as float32 (tokens, k) to multiply with a
        question's `token_basis.question` tokens, and where each row's tokens begin: row `rows[i]` holds
        `tokens[offsets[i]:offsets[i + 1]]`."""
        starts, ends = self.token_offsets[rows], self.token_offsets[np.asarray(rows, dtype=np.int64) + 1]
        offsets = np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int64)
        parts = [self.tokens[start:end] for start, end in zip(starts.tolist(), ends.tolist(), strict=True)]
        width = self.token_basis.dimensions
        tokens = np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, width), np.float32)
        return tokens, offsets


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
    "units_faiss": dict,
    "vectors": dict,
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


@dataclass(frozen=True)
class StoredVersion:
    """A published version's rows and vectors: what a re-ingest carries over from it.

    Read with plain reads, batch by batch, not mapped: a re-ingest passes over the whole version once,
    and every page of a map it touched would count in its RSS (`VectorFile`), so a re-ingest of a big
    index would hold a copy of it. What it keeps is a batch, whatever the version's size.
    """

    path: Path
    vectors: VectorFile
    units: VectorFile
    unit_offsets: VectorFile  # one column: row i's units are units[offsets[i] : offsets[i + 1]]
    tokens: VectorFile
    token_offsets: VectorFile  # one column, as `unit_offsets`

    @classmethod
    def open(cls, path: Path) -> StoredVersion:
        """A version's chunk table and vector files; an `IndexStoreError` naming the file when one is damaged."""
        manifest = read_version_manifest(path)
        shapes, token_shape = manifest["vectors"], _token_shape(path, manifest)
        dimension, chunks, units = int(shapes["dimension"]), int(shapes["chunks"]), int(shapes["units"])
        for part in (CHUNKS_FILE, VECTORS_FILE, UNITS_FILE, UNIT_OFFSETS_FILE, TOKENS_FILE, TOKEN_OFFSETS_FILE):
            _require(path / part)
        _check_rows(path / CHUNKS_FILE, chunks)
        return cls(
            path,
            _sized(VectorFile(path / VECTORS_FILE, np.dtype(np.float32), (chunks, dimension))),
            _sized(VectorFile(path / UNITS_FILE, np.dtype(np.float16), (units, dimension))),
            _sized(VectorFile(path / UNIT_OFFSETS_FILE, np.dtype(np.int64), (chunks + 1, 1))),
            _sized(VectorFile(path / TOKENS_FILE, np.dtype(np.int8), token_shape)),
            _sized(VectorFile(path / TOKEN_OFFSETS_FILE, np.dtype(np.int64), (chunks + 1, 1))),
        )

    def token_basis(self) -> TokenBasis:
        _require(self.path / TOKEN_BASIS_FILE)
        return TokenBasis.load(self.path / TOKEN_BASIS_FILE)

    def column(self, name: str) -> list[Any]:
        """One column of the chunk table, in stored order."""
        return [value for batch in _chunk_batches(self.path, [name]) for value in batch.column(0).to_pylist()]

    def rows_of_sources(self, source_paths: Iterable[str]) -> dict[str, int]:
        """Chunk id to row number, for the chunks of `source_paths` only: a lookup sized by those files."""
        wanted = pa.array(sorted(set(source_paths)), pa.string())
        found: dict[str, int] = {}
        row = 0
        for batch in _chunk_batches(self.path, ["chunk_id", "source_path"]):
            mask = pc.is_in(batch.column(1), value_set=wanted).to_numpy(zero_copy_only=False)
            for offset in np.flatnonzero(mask).tolist():
                found[batch.column(0)[offset].as_py()] = row + offset
            row += batch.num_rows
        return found

    def row_vectors(self, row: int) -> dict[str, Any]:
        """Chunk row `row`'s `vector` and `unit_vectors` (float32), and its stored `token_codes`."""
        first, last = self.unit_offsets[row : row + 2].ravel().tolist()
        token_first, token_last = self.token_offsets[row : row + 2].ravel().tolist()
        return {
            "vector": self.vectors[row : row + 1][0].astype(np.float32),
            "unit_vectors": self.units[first:last].astype(np.float32),
            "token_codes": self.tokens[token_first:token_last].tobytes(),
        }

    def rows(self) -> Iterator[dict[str, Any]]:
        """The chunk rows in stored order, each with its vectors, a stored batch at a time."""
        row = 0
        for batch in _chunk_batches(self.path, CHUNK_SCHEMA.names):
            end = row + batch.num_rows
            vectors = self.vectors[row:end].astype(np.float32)
            offsets = self.unit_offsets[row : end + 1].ravel()
            units = self.units[int(offsets[0]) : int(offsets[-1])].astype(np.float32)
            offsets -= offsets[0]
            token_offsets = self.token_offsets[row : end + 1].ravel()
            tokens = self.tokens[int(token_offsets[0]) : int(token_offsets[-1])]
            token_offsets -= token_offsets[0]
            for offset, record in enumerate(batch.to_pylist()):
                unit_vectors = units[offsets[offset] : offsets[offset + 1]]
                codes = tokens[token_offsets[offset] : token_offsets[offset + 1]].tobytes()
                yield {**record, "vector": vectors[offset], "unit_vectors": unit_vectors, "token_codes": codes}
            row = end


def _token_shape(path: Path, manifest: Mapping[str, Any]) -> tuple[int, int]:
    """(tokens, k) of a version's token file; an index built before token vectors, or with other ones, is refused."""
    tokens = manifest.get("tokens", {})
    if tokens.get("version") != TOKENS_VERSION:
        raise IndexMismatchError(
            f"Index version {path.name} in {path.parent.parent}/ holds no token vectors of version {TOKENS_VERSION} "
            "(late interaction, `rag.tokens`): re-run 'kafka-rag ingest'"
        )
    return int(tokens["count"]), int(tokens["dimensions"])


def _check_rows(file: Path, expected: int) -> None:
    """The chunk table opens and holds the manifest's number of rows; else an `IndexStoreError` naming it."""
    try:
        with pa.OSFile(str(file)) as handle:
            rows = pa.ipc.open_file(handle).count_rows()
    except (pa.ArrowException, OSError) as exc:
        raise IndexStoreError(f"{file} is unreadable ({_short(exc)}): re-run 'kafka-rag ingest'") from exc
    if rows != expected:
        raise IndexStoreError(
            f"{file} is unreadable (holds {rows} rows, its manifest says {expected}): re-run 'kafka-rag ingest'"
        )


def _sized(file: VectorFile) -> VectorFile:
    """The file, when it holds exactly the rows the manifest says; else an `IndexStoreError` naming it."""
    expected = file.shape[0] * file.shape[1] * file.dtype.itemsize
    if file.path.stat().st_size != expected:
        raise IndexStoreError(
            f"{file.path} is unreadable (holds {file.path.stat().st_size} bytes, its manifest says {expected}): "
            "re-run 'kafka-rag ingest'"
        )
    return file


def read_chunk_table(index_dir: Path) -> pa.Table | None:
    """The serving version's chunk table with its vector columns, or None without an index. Holds the
    whole version in memory: for tests, benchmarks and small corpora, never the serving path."""
    if read_pointer(index_dir) is None:
        return None
    return rows_to_table(
        {**r, "vector": r["vector"].tolist(), "unit_vectors": r["unit_vectors"].tolist()}
        for r in StoredVersion.open(serving_path(index_dir)).rows()
    )


class VersionWriter:
    """Writes one version from chunk rows streamed in their final order (`add`), then publishes it.

    Metadata goes to the Arrow file a batch at a time, vectors straight to their files; the indexes are
    built from those files at `publish`. Use as a context manager: leaving it with an exception removes
    the staging folder, so a failed build leaves nothing behind and the previous version serves.
    """

    def __init__(self, index_dir: Path, *, flat_max: int, token_basis: TokenBasis) -> None:
        """`token_basis`: the basis the rows' "token_codes" are in (`rag.ingest.fit_token_basis`, or the last
        version's when this build carries rows from it), saved beside them."""
        self.index_dir = index_dir
        self.flat_max = flat_max
        self.token_basis = token_basis
        versions = index_dir / "versions"
        versions.mkdir(parents=True, exist_ok=True)
        self.version = new_version_name()
        self.staging = versions / f".staging-{self.version}"
        self.staging.mkdir()
        self._chunks = pa.ipc.new_file(str(self.staging / CHUNKS_FILE), STORED_SCHEMA)
        self._vectors = (self.staging / VECTORS_FILE).open("wb")
        self._units = (self.staging / UNITS_FILE).open("wb")
        self._offsets = array("q", [0])
        self._tokens = (self.staging / TOKENS_FILE).open("wb")
        self._token_offsets = array("q", [0])
        self._pending: list[Mapping[str, Any]] = []
        self._document = ""
        self._seen: set[str] = set()  # the current document's chunk ids
        self._flags: set[str] = set()
        self.dimension = 0
        self.rows = 0

    def __enter__(self) -> VersionWriter:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if error is not None:
            self.abort()

    def add(self, row: Mapping[str, Any]) -> bool:
        """Append one chunk row (with `vector` and `unit_vectors`), rows grouped by document (`row_order` in
        `rag.ingest`); False for a chunk id already written (identical text under the same heading of the
        same document is one chunk, not two)."""
        if row["source_path"] != self._document:  # a chunk id hashes its document: repeats are within one
            self._document, self._seen = row["source_path"], set()
        if row["chunk_id"] in self._seen:
            return False
        self._seen.add(row["chunk_id"])
        self._pending.append(row)
        self.rows += 1
        if len(self._pending) >= WRITE_BATCH_ROWS:
            self._flush()
        return True

    def _flush(self) -> None:
        if not self._pending:
            return
        rows = self._pending
        vectors = np.asarray([r["vector"] for r in rows], dtype=np.float32)
        self.dimension = self.dimension or vectors.shape[1]
        if vectors.shape[1] != self.dimension:
            raise IndexStoreError(f"Vectors of dimension {vectors.shape[1]} and {self.dimension} in one build")
        units = [np.asarray(r["unit_vectors"], dtype=np.float32).reshape(-1, self.dimension) for r in rows]
        batch = {name: [r[name] for r in rows] for name in CHUNK_SCHEMA.names}
        batch["defined"] = [sorted(defined_identifiers(r["section_path"], r["text"])) for r in rows]
        for r in rows:
            if len(self._flags) < MAX_COMMAND_FLAGS:
                self._flags.update(command_flags(r["text"]))
        self._chunks.write_batch(pa.RecordBatch.from_pydict(batch, schema=STORED_SCHEMA))
        self._vectors.write(vectors.tobytes())
        for row_units in units:
            self._units.write(row_units.astype(np.float16).tobytes())
            self._offsets.append(self._offsets[-1] + len(row_units))
        for r in rows:
            codes = token_codes(r.get("token_codes"), self.token_basis.dimensions)  # checked: whole tokens
            self._tokens.write(codes.tobytes())
            self._token_offsets.append(self._token_offsets[-1] + len(codes))
        self._pending = []

    def _store_tokens(self) -> dict[str, int]:
        """The token offsets and the basis, beside the codes written row by row."""
        count = self._token_offsets[-1]
        (self.staging / TOKEN_OFFSETS_FILE).write_bytes(np.asarray(self._token_offsets, dtype=np.int64).tobytes())
        self.token_basis.save(self.staging / TOKEN_BASIS_FILE)
        return {"version": TOKENS_VERSION, "count": count, "dimensions": self.token_basis.dimensions}

    def publish(self, manifest: Mapping[str, Any], before_publish: Any = None) -> str:
        """Build the indexes, write the manifest, move the folder into place and switch `CURRENT` to it.

        `before_publish` is called after the version folder is complete and before the pointer moves
        (tests use it to simulate a crash at the worst moment).
        """
        final = self.staging.parent / self.version
        try:
            self._flush()
            self._chunks.close()
            self._vectors.close()
            self._units.close()
            self._tokens.close()
            tokens = self._store_tokens()
            (self.staging / UNIT_OFFSETS_FILE).write_bytes(np.asarray(self._offsets, dtype=np.int64).tobytes())
            shapes = {"chunks": self.rows, "units": self._offsets[-1], "dimension": self.dimension}
            # Built from files read block by block, not mapped: mapped pages would stay in the build's RSS.
            shape = (self.rows, self.dimension)
            vectors = VectorFile(self.staging / VECTORS_FILE, np.dtype(np.float32), shape)
            units = VectorFile(self.staging / UNITS_FILE, np.dtype(np.float16), (shapes["units"], self.dimension))
            dense = choose_index_type(self.rows, self.flat_max, self.dimension)
            write_vector_index(vectors, dense, self.staging / FAISS_FILE)
            unit_index = choose_index_type(shapes["units"], self.flat_max, self.dimension)
            write_vector_index(units, unit_index, self.staging / UNITS_FAISS_FILE)
            write_bm25(_lexical_texts(self.staging), self.staging / "bm25")
            write_synthetic(self.staging, self.staging / SYNTHETIC_FILE)
            manifest = {
                **manifest,
                "schema_version": SCHEMA_VERSION,
                "version": self.version,
                "vectors": shapes,
                "faiss": dense,
                "units_faiss": unit_index,
                "lexical_version": LEXICAL_VERSION,
                "tokens": tokens,
                # The option names the corpus's commands take (`--group`): a question's word after one of
                # them is the user's own name ("lag on group fraud-scorer"), `rag.retrieval`.
                "command_flags": sorted(self._flags),
            }
            (self.staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True), "utf-8")
            self.staging.rename(final)
            if before_publish is not None:
                before_publish(final)
            switch_pointer(self.index_dir, self.version)
        except BaseException:
            self.abort()
            if current_version(self.index_dir) != self.version:  # never published: nothing may keep it
                shutil.rmtree(final, ignore_errors=True)
            raise
        return self.version

    def abort(self) -> None:
        for handle in (self._chunks, self._vectors, self._units, self._tokens):
            handle.close()
        shutil.rmtree(self.staging, ignore_errors=True)


def write_version(
    index_dir: Path,
    rows: pa.Table | Sequence[Mapping[str, Any]],
    manifest: dict[str, Any],
    *,
    flat_max: int,
    token_basis: TokenBasis,
    before_publish: Any = None,
) -> str:
    """Write and publish a version from rows (or a table with vector columns) already in their final order,
    their "token_codes" in `token_basis`."""
    records = rows.to_pylist() if isinstance(rows, pa.Table) else rows
    with VersionWriter(index_dir, flat_max=flat_max, token_basis=token_basis) as writer:
        for row in records:
            writer.add(row)
        return writer.publish(manifest, before_publish)


def write_synthetic(path: Path, file: Path) -> None:
    """The ranker's synthetic training queries for the chunks of the version at `path` (`rag.synthetic`),
    a batch at a time."""
    schema = pa.schema([("query", pa.string()), ("chunk_id", pa.string()), ("kind", pa.string())])
    with pq.ParquetWriter(file, schema) as writer:
        for batch in _chunk_batches(path, ["chunk_id", "section_path", "text"]):
            rows = [
                {"query": q.query, "chunk_id": q.chunk_id, "kind": q.kind}
                for record in batch.to_pylist()
                for q in synthetic_queries(record["chunk_id"], record["section_path"], record["text"])
            ]
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))


def read_synthetic(path: Path) -> list[SyntheticQuery]:
    """A version's synthetic queries; none for a version built before they existed."""
    file = path / SYNTHETIC_FILE
    if not file.is_file():
        return []
    return [SyntheticQuery(**row) for row in pq.read_table(file).to_pylist()]


def _lexical_texts(path: Path) -> Iterator[str]:
    for batch in _chunk_batches(path, ["section_path", "text"]):
        for section_path, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            yield lexical_text(section_path, text)


def _chunk_batches(path: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The chunk table's batches as written (`WRITE_BATCH_ROWS` rows), read one at a time, not mapped."""
    with pa.OSFile(str(path / CHUNKS_FILE)) as file:
        reader = pa.ipc.open_file(file)
        for number in range(reader.num_record_batches):
            yield reader.get_batch(number).select(columns)


def _open_chunks(path: Path) -> pa.Table:
    """The chunk table, memory-mapped: reading a row touches only that row's pages."""
    return pa.ipc.open_file(pa.memory_map(str(path / CHUNKS_FILE))).read_all()


def _vector_files(path: Path, manifest: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    shapes = manifest["vectors"]
    dimension, chunks, units = int(shapes["dimension"]), int(shapes["chunks"]), int(shapes["units"])

    return (
        _mapped(path / VECTORS_FILE, np.float32, (chunks, dimension)),
        _mapped(path / UNITS_FILE, np.float16, (units, dimension)),
        _mapped(path / UNIT_OFFSETS_FILE, np.int64, (chunks + 1,)),
    )


def _mapped(file: Path, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    if 0 in shape:  # numpy cannot map an empty file
        return np.zeros(shape, dtype)
    return np.memmap(file, dtype=dtype, mode="r", shape=shape)


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


VERSION_PARTS = (
    CHUNKS_FILE,
    VECTORS_FILE,
    UNITS_FILE,
    UNIT_OFFSETS_FILE,
    TOKENS_FILE,
    TOKEN_OFFSETS_FILE,
    TOKEN_BASIS_FILE,
    FAISS_FILE,
    UNITS_FAISS_FILE,
    "bm25",
)


def load_version(path: Path, expected_model: ModelIdentity | None = None) -> LoadedIndex:
    """Load one version folder, memory-mapped; every damaged or missing part is an `IndexStoreError` naming
    its file, and an index built with another embedding model or evidence units is refused."""
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
    built_lexical = manifest.get("lexical_version", 1)
    if built_lexical != LEXICAL_VERSION:  # its BM25 postings spell words as this code no longer does
        raise IndexMismatchError(
            f"Index version {version} in {index_dir}/ was built with lexical version {built_lexical}, "
            f"this code uses {LEXICAL_VERSION}: re-run 'kafka-rag ingest' (vectors are reused)"
        )
    token_shape = _token_shape(path, manifest)
    chunks, vectors, units, offsets = _open_tables(path, manifest)
    for part in (FAISS_FILE, UNITS_FAISS_FILE, "bm25", TOKENS_FILE, TOKEN_OFFSETS_FILE, TOKEN_BASIS_FILE):
        _require(path / part)
    current_file = path / FAISS_FILE
    try:
        dense = VectorSearch.load(current_file, vectors, manifest["faiss"])
        current_file = path / UNITS_FAISS_FILE
        unit_search = VectorSearch.load(current_file, units, manifest["units_faiss"])
        current_file = path / "bm25"
        bm25 = load_bm25(current_file)
        current_file = path / TOKENS_FILE
        tokens = _mapped(current_file, np.int8, token_shape)
        current_file = path / TOKEN_OFFSETS_FILE
        token_offsets = _mapped(current_file, np.int64, (len(chunks) + 1,))
        current_file = path / TOKEN_BASIS_FILE
        token_basis = TokenBasis.load(current_file)
    except IndexStoreError:
        raise
    except Exception as exc:  # any library's complaint about a damaged file becomes one line naming the file
        raise IndexStoreError(f"{current_file} is unreadable ({_short(exc)}): re-run 'kafka-rag ingest'") from exc
    if (
        not (len(chunks) == len(vectors) == len(offsets) - 1 == dense.size)
        or unit_search.size != len(units)
        or token_offsets[-1] != len(tokens)
        or token_basis.dimensions != tokens.shape[1]
    ):
        raise IndexStoreError(f"Index version {version} in {index_dir}/ is incomplete: re-run 'kafka-rag ingest'")
    return LoadedIndex(
        version,
        path,
        manifest,
        chunks,
        vectors,
        units,
        offsets,
        dense,
        unit_search,
        bm25,
        tokens,
        token_offsets,
        token_basis,
    )


def _open_tables(path: Path, manifest: Mapping[str, Any]) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
    """The memory-mapped chunk table, vectors, unit vectors and unit offsets of a version folder."""
    for part in (CHUNKS_FILE, VECTORS_FILE, UNITS_FILE, UNIT_OFFSETS_FILE):
        _require(path / part)
    current_file = path / CHUNKS_FILE
    try:
        chunks = _open_chunks(path)
        current_file = path / VECTORS_FILE
        return (chunks, *_vector_files(path, manifest))
    except Exception as exc:  # any library's complaint about a damaged file becomes one line naming the file
        raise IndexStoreError(f"{current_file} is unreadable ({_short(exc)}): re-run 'kafka-rag ingest'") from exc


def _require(file: Path) -> None:
    if not file.exists():
        raise IndexStoreError(f"{file} is missing: re-run 'kafka-rag ingest'")


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


def rows_to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Chunk rows with their vector columns as one table (tests, benchmarks and re-ingest of small corpora)."""
    schema = (
        CHUNK_SCHEMA.append(pa.field("vector", pa.list_(pa.float32())))
        .append(pa.field("unit_vectors", pa.list_(pa.list_(pa.float32()))))
        .append(pa.field("token_codes", pa.binary()))
    )
    return pa.Table.from_pylist([{name: row.get(name) for name in schema.names} for row in rows], schema=schema)
