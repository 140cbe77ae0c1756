"""The ingest pipeline: scan sources, reuse what is unchanged, load + chunk + embed the rest, publish.

The per-partition work is two pure generators over plain rows, `chunk_files` (bytes → chunk rows)
and `embed_rows` (rows → rows with vectors and token codes, model loaded once per process). `run_ingest`
first fits the index's token basis on a sample of the corpus (`fit_token_basis`, its tokens encoded where
the engine runs the model), then runs them either in this process (engine "local") or on Spark (engine
"spark", `rag.spark_job`), and both paths give identical chunk ids and vectors. Unchanged files (same
sha256, same model and chunker settings) are not read again: their rows and vectors come from the serving
version's chunk table, and chunks of changed files whose content hash is known reuse their vectors too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import itertools
import math
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from threadpoolctl import threadpool_limits

from rag.chunking import CHUNKER_NAME, CHUNKER_VERSION, chunk_document, dense_text
from rag.documents import SUPPORTED_SUFFIXES, load_document, walk_sources
from rag.embedding import Embedder, ModelIdentity, load_embedder, model_identity
from rag.errors import IndexStoreError, LoaderError, NoDocumentsError, SourceNotFoundError
from rag.includes import include_places, placed
from rag.index_lock import writer_lock
from rag.index_store import (
    SCHEMA_VERSION,
    TOKENS_VERSION,
    VECTOR_FIELDS,
    StoredVersion,
    VersionWriter,
    load_version,
    read_manifest,
    rows_to_table,
    serving_path,
)
from rag.lexical import LEXICAL_VERSION
from rag.progress import Count, Progress, no_progress
from rag.settings import Settings
from rag.tokens import BASIS_SAMPLE, TokenBasis
from rag.units import UNITS_VERSION, chunk_units, unit_texts
from rag.versions import prune_versions, remove_dead_staging

ROWS_PER_ENCODE = 256  # chunk rows per encode round (with their evidence units): enough to sort texts by length
# Texts go to the model in slices of this many batches, longest first, so progress can be counted while the
# batches stay exactly those one call over the whole round would make (same padding, same vectors).
BATCHES_PER_SLICE = 8
# The token basis's sample (`fit_token_basis`): chunks spread over files spread over the corpus, enough tokens
# for 128 directions (the Kafka docs' 384 hold ~62,000) at the cost of encoding those texts twice.
BASIS_FILES = 64
BASIS_CHUNKS = 384


@dataclass(frozen=True)
class IngestConfig:
    """The plain values the workers need (picklable; never the Settings object or a model)."""

    model: str
    chunk_size: int
    chunk_overlap: int
    encode_batch_size: int = Settings.encode_batch_size
    threads_per_task: int = 1
    embed_backend: str = Settings.embed_backend
    model_cache_dir: str = str(Settings.model_cache_dir)  # "~" expands on each executor's machine
    chunk_vectors: str = Settings.chunk_vectors
    # Where each included fragment sits on the page that includes it (`rag.includes.include_places`).
    places: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The basis chunks' token codes are made in (`fit_token_basis`, or the last version's): set by `run_ingest`.
    token_basis: TokenBasis | None = field(compare=False, default=None)

    @classmethod
    def from_settings(cls, settings: Settings) -> IngestConfig:
        return cls(
            settings.model,
            settings.chunk_size,
            settings.chunk_overlap,
            settings.encode_batch_size,
            settings.threads_per_task,
            settings.embed_backend,
            str(settings.model_cache_dir),
            settings.chunk_vectors,
        )

    def chunker(self) -> dict[str, Any]:
        return {
            "name": CHUNKER_NAME,
            "version": CHUNKER_VERSION,
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "units_version": UNITS_VERSION,  # unit vectors are reused only when units are built the same way
            "chunk_vectors": self.chunk_vectors,  # so is a chunk vector made the same way
            "tokens_version": TOKENS_VERSION,  # and token vectors (`rag.tokens`)
        }


@dataclass(frozen=True)
class SourceFile:
    path: str  # absolute path on this machine
    source_path: str  # relative to its corpus root: the id users and golden sets see
    sha256: str
    size: int


@dataclass(frozen=True)
class IngestReport:
    index_dir: str
    version: str
    unchanged: bool
    documents: int
    chunks: int
    embedded: int  # unique chunk texts encoded by this build
    reused: int  # chunks whose vectors came from the previous version
    duplicates: int  # chunks whose text another chunk of this build has: its vectors were copied, not encoded
    skipped: tuple[dict[str, str], ...]
    engine: str
    master: str
    seconds: float
    stage_seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "skipped": list(self.skipped)}


# ------------------------------------------------------------------------------------------- pure stages


def chunk_files(files: Iterable[tuple[str, bytes]], config: IngestConfig) -> Iterator[dict[str, Any]]:
    """(source path, bytes) → one "doc" or "skip" row per file, then a "chunk" row per chunk (no vector)."""
    places = dict(config.places)
    for source_path, data in files:
        try:
            document = load_document(data, source_path)
            if source_path in places:
                document = placed(document, places[source_path])
            chunks = chunk_document(document, config.chunk_size, config.chunk_overlap)
        except LoaderError as exc:
            yield {"kind": "skip", "source_path": source_path, "reason": exc.reason}
            continue
        except Exception as exc:  # a parser bug on one odd file must not sink the whole build
            yield {
                "kind": "skip",
                "source_path": source_path,
                "reason": f"could not be parsed ({type(exc).__name__}: {exc})",
            }
            continue
        yield {
            "kind": "doc",
            "source_path": source_path,
            "title": document.title,
            "format": document.format,
            "chunks": len(chunks),
        }
        for chunk in chunks:
            yield {
                "kind": "chunk",
                "chunk_id": chunk.chunk_id,
                "doc_id": chunk.doc_id,
                "source_path": chunk.source_path,
                "title": chunk.title,
                "section_path": list(chunk.section_path),
                "text": chunk.text,
                "identifiers": list(chunk.identifiers),
                "start": chunk.start,
                "end": chunk.end,
                "url": chunk.url,
                "continues_code": chunk.continues_code,
                "vector": None,
                "unit_vectors": None,
            }


def embed_rows(
    rows: Iterable[dict[str, Any]],
    config: IngestConfig,
    known_ids: frozenset[str] = frozenset(),
    on_encoded: Callable[[int], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """Fill `vector`, `unit_vectors` (one per `rag.units.build_units` unit) and `token_codes` (`rag.tokens`)
    on chunk rows not in `known_ids`; `config.chunk_vectors` says how a chunk's vector is made (`chunk_texts`).
    A chunk's tokens are those of its own text as far as the model reads it, then those of the units it did
    not read whole (`unread_units`), or under "unit-mean" its units' tokens in turn, coded in
    `config.token_basis` (a `ValueError` without one).

    Evidence units are embedded here, once, so answering a question only has to embed the question.
    Rows are embedded a batch at a time; other rows pass through. `on_encoded(n)` hears of every `n` texts
    encoded (for progress; in a Spark worker, an accumulator).

    Ends with one "model" row carrying the model's identity when anything was embedded, so the
    driver records the model that made the vectors (on Spark, the executors' copy of it).
    """
    basis = config.token_basis
    if basis is None:
        raise ValueError("embed_rows needs config.token_basis to code tokens in: fit one with fit_token_basis")
    embedder: Embedder | None = None
    batch: list[dict[str, Any]] = []
    seconds = 0.0

    def flush() -> Iterator[dict[str, Any]]:
        nonlocal seconds
        assert embedder is not None  # loaded before the first row is batched
        texts = [chunk_texts(r, config.chunk_vectors) for r in batch]
        started = time.perf_counter()
        flat = [text for own, units in texts for text in own + units]
        vectors, tokens = _encode_in_slices(embedder, flat, config.encode_batch_size, on_encoded)
        seconds += time.perf_counter() - started
        position = 0
        for row, (own, units) in zip(batch, texts, strict=True):
            count = len(own) + len(units)
            row_vectors, row_tokens = vectors[position : position + count], tokens[position : position + count]
            position += count
            unit_vectors = row_vectors[len(own) :]
            vector = row_vectors[0] if own else chunk_vector(unit_vectors)
            if own:
                tail = unread_units(row, embedder.read_chars(own[0]))
                words = np.concatenate([row_tokens[0], *(row_tokens[len(own) + i] for i in tail)])
            else:
                words = np.concatenate([*row_tokens, np.zeros((0, vectors.shape[1]))])
            yield {
                **row,
                "vector": vector.tolist(),
                "unit_vectors": unit_vectors.tolist(),
                "token_codes": basis.codes(words).tobytes(),
            }
        batch.clear()

    for row in rows:
        if row["kind"] != "chunk" or row["chunk_id"] in known_ids:
            yield row
            continue
        if embedder is None:
            embedder = load_embedder(
                config.model, config.embed_backend, config.threads_per_task, Path(config.model_cache_dir)
            )
        batch.append(row)
        if len(batch) >= ROWS_PER_ENCODE:
            yield from flush()
    if batch:
        yield from flush()
    if embedder is not None:
        identity = model_identity(embedder)
        yield {
            "kind": "model",
            "name": identity.name,
            "dimension": identity.dimension,
            "fingerprint": identity.fingerprint,
            "encode_seconds": seconds,
        }


def chunk_texts(row: Mapping[str, Any], chunk_vectors: str) -> tuple[list[str], list[str]]:
    """(own, units): what ingest encodes for one chunk row. `units` are its evidence units; `own` is its
    text under its heading path, whose vector is the chunk's, or nothing when the chunk's vector is its
    units' mean ("unit-mean", `chunk_vector`) and it has units."""
    text, section_path = row["text"], row["section_path"]
    units = unit_texts(text, section_path, row["continues_code"])
    own = [] if chunk_vectors == "unit-mean" and units else [dense_text(section_path, text)]
    return own, units


def unread_units(row: Mapping[str, Any], read_chars: int) -> list[int]:
    """The positions (`rag.units.build_units` order) of the chunk row's units that the model, reading its own
    text (`dense_text`) only `read_chars` characters far, did not read whole.

    The model reads 256 word pieces; about three in ten chunks of the Kafka docs are longer, and their
    tail would be in none of their token vectors, which late interaction (`rag.tokens`) ranks by. Their
    units are encoded anyway, each in full, so their tokens stand in for the tail's."""
    text, section_path = row["text"], row["section_path"]
    read = text[: max(0, read_chars - (len(dense_text(section_path, text)) - len(text)))]
    if len(read) == len(text):
        return []
    units = chunk_units(text, section_path, row["continues_code"])
    return [i for i, unit in enumerate(units) if not all(part in read for part in unit.parts)]


def planned_texts(rows: Iterable[Mapping[str, Any]], config: IngestConfig) -> int:
    """How many texts `embed_rows` will encode for these chunk rows (for progress)."""
    return sum(len(own) + len(units) for own, units in (chunk_texts(r, config.chunk_vectors) for r in rows))


def chunk_vector(unit_vectors: np.ndarray) -> np.ndarray:
    """A chunk's vector under "unit-mean": the L2-normalised mean of its units' vectors.

    Encoding the units already reads every word of the chunk, so the chunk's own text need not be
    encoded again: a cold ingest of the Kafka docs took 88 s instead of 174 s without Spark, 122 s
    instead of 166 s with it. Measured on the tuning parts against the default ("text"), each with its
    ranker refitted: cross-validated hit@1 0.579 vs 0.583, and hit@1 0.638 / 0.479 vs 0.655 / 0.507
    (seeds / Kafka docs): a little worse, so it is opt-in (README, *Speed*).
    """
    mean = np.asarray(unit_vectors, dtype=np.float32).mean(axis=0)
    return mean / (np.linalg.norm(mean) or 1.0)


def _encode_in_slices(
    embedder: Embedder,
    texts: list[str],
    batch_size: int,
    on_encoded: Callable[[int], None] | None,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """`embedder.encode_with_tokens(texts)` a few batches at a time, longest texts first as the model itself
    orders them. A text met more than once is encoded once and its vector given to every place that holds it:
    overlapping chunks repeat evidence units at their seams (about one unit text in seven of the Kafka docs)."""
    places: dict[str, list[int]] = {}
    for position, text in enumerate(texts):
        places.setdefault(text, []).append(position)
    distinct = sorted(places, key=lambda text: -len(text))
    vectors = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
    tokens: list[np.ndarray] = [vectors[:0]] * len(texts)
    step = batch_size * BATCHES_PER_SLICE
    for start in range(0, len(distinct), step):
        slice_texts = distinct[start : start + step]
        encoded, words = embedder.encode_with_tokens(slice_texts, batch_size=batch_size)
        for text, vector, text_tokens in zip(slice_texts, encoded, words, strict=True):
            for position in places[text]:
                vectors[position] = vector
                tokens[position] = text_tokens
        if on_encoded is not None:
            on_encoded(sum(len(places[text]) for text in slice_texts))
    return vectors, tokens


# ------------------------------------------------------------------------------------------- driver


def scan_sources(sources: Sequence[str | Path]) -> tuple[list[SourceFile], list[dict[str, str]]]:
    """Candidate files with their hashes, and files skipped before parsing (unsupported, unreadable)."""
    files: list[SourceFile] = []
    skipped: list[dict[str, str]] = []
    roots = [Path(s) for s in sources]
    for root in roots:
        if not root.exists():
            raise SourceNotFoundError(f"Source path {root} does not exist: pass a folder or file of documents")
    for root in roots:
        prefix = f"{root.name}/" if len(roots) > 1 and root.is_dir() else ""
        for path, relative, problem in walk_sources(root):
            source_path = prefix + relative
            if problem:
                skipped.append({"source_path": source_path, "reason": problem})
                continue
            if path.suffix.lower() not in SUPPORTED_SUFFIXES:
                skipped.append(
                    {"source_path": source_path, "reason": f"unsupported file type '{path.suffix or 'no extension'}'"}
                )
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                skipped.append({"source_path": source_path, "reason": f"unreadable ({exc.strerror})"})
                continue
            files.append(SourceFile(str(path.resolve()), source_path, hashlib.sha256(data).hexdigest(), len(data)))
    return files, skipped


def read_files(files: Iterable[SourceFile]) -> Iterator[tuple[str, bytes]]:
    for source in files:
        yield source.source_path, Path(source.path).read_bytes()


def basis_texts(files: Sequence[SourceFile], config: IngestConfig) -> list[str]:
    """The texts the token basis is fitted on: up to `BASIS_CHUNKS` chunks, spread evenly over the first
    `BASIS_FILES` files holding any in sha256-of-path order (spread over the corpus, where a listing's
    first files are one folder of it, and the same on every run); each chunk gives the texts whose tokens
    `embed_rows` stores for it."""
    ordered = sorted(files, key=lambda f: hashlib.sha256(f.source_path.encode("utf-8")).hexdigest())
    chunked: list[list[dict[str, Any]]] = []
    for source in ordered:
        if len(chunked) == BASIS_FILES:
            break
        rows = [row for row in chunk_files(read_files([source]), config) if row["kind"] == "chunk"]
        if rows:
            chunked.append(rows)
    takes, left = [0] * len(chunked), BASIS_CHUNKS
    # Smallest files first, each its share of what is left: a file with fewer chunks leaves the rest to others.
    for position, number in enumerate(sorted(range(len(chunked)), key=lambda n: len(chunked[n]))):
        takes[number] = min(len(chunked[number]), left // (len(chunked) - position))
        left -= takes[number]
    texts: list[str] = []
    for rows, take in zip(chunked, takes, strict=True):
        for n in range(take):  # the middles of `take` equal stretches of the file's chunks
            own, units = chunk_texts(rows[(2 * n + 1) * len(rows) // (2 * take)], config.chunk_vectors)
            texts.extend(own or units)
    return texts


BasisFit = Callable[[list[str], IngestConfig], TokenBasis]
"""Fits the token basis on the tokens of the given texts (`fit_basis`) where the engine's model runs: in
this process (`fit_basis_here`) or on a Spark executor (`rag.spark_job`), so a Spark driver never loads it."""


def fit_basis(texts: list[str], config: IngestConfig) -> TokenBasis:
    """The basis of `texts`' tokens, encoded by this process's cached model (the one `embed_rows` then uses)."""
    embedder = load_embedder(config.model, config.embed_backend, config.threads_per_task, Path(config.model_cache_dir))
    _, tokens = embedder.encode_with_tokens(texts, batch_size=config.encode_batch_size)
    sample = np.concatenate([*tokens, np.zeros((0, embedder.dimension), np.float32)])
    return TokenBasis.fit(sample[:: max(1, math.ceil(len(sample) / BASIS_SAMPLE))])


def fit_basis_here(texts: list[str], config: IngestConfig) -> TokenBasis:
    """`fit_basis` in this process with every core, as `local_engine` embeds: one model load serves both."""
    return fit_basis(texts, dataclasses.replace(config, threads_per_task=os.cpu_count() or 1))


def fit_token_basis(
    files: Sequence[SourceFile],
    config: IngestConfig,
    progress: Progress = no_progress,
    fit: BasisFit = fit_basis_here,
) -> TokenBasis:
    """The basis a build's token codes are made in, fitted before anything is embedded on the tokens of
    `basis_texts`, encoded by the model `embed_rows` uses (`fit` runs it): nothing is staged unprojected
    (`rag.tokens`)."""
    texts = basis_texts(files, config)
    progress(f"token basis: fitting on the tokens of {len(texts)} texts spread over the corpus")
    return fit(texts, config)


Engine = Callable[[list[SourceFile], IngestConfig, frozenset[str], Path, Progress], list[dict[str, Any]]]
"""Runs the stages over the files: writes the chunk rows, vectors included, as Parquet shards into the
given folder (each shard sorted by `row_order`) and returns the few other rows (doc, skip, model)."""

SHARD_ROWS = 1024  # chunk rows per shard the local engine writes
SHARD_READ_BUFFER = 1 << 20  # bytes of a shard's column read at a time while merging


def row_order(row: Mapping[str, Any]) -> tuple[str, int, str]:
    """The order of a version's chunk rows (and of FAISS rows): by document, then position."""
    return row["source_path"], row["start"], row["chunk_id"]


def write_shard(rows: list[dict[str, Any]], path: Path) -> None:
    pq.write_table(rows_to_table(sorted(rows, key=row_order)), path)


def shard_rows(path: Path, batch_rows: int = 64) -> Iterator[dict[str, Any]]:
    """A shard's chunk rows in order, a batch at a time (a Spark shard also holds the job's other rows).

    Vectors come out as float32 arrays, not Python lists (8x the memory), and columns are read through a
    small buffer rather than a whole row group up front: the merge holds a batch per shard, whatever the
    corpus.
    """
    shard = pq.ParquetFile(path, pre_buffer=False, buffer_size=SHARD_READ_BUFFER)
    for batch in shard.iter_batches(batch_size=batch_rows):
        vectors = _row_arrays(batch.column("vector"))
        width = next((len(vector) for vector in vectors if vector is not None), 0)
        units = _row_arrays(batch.column("unit_vectors"), width) if width else [None] * len(vectors)
        records = batch.drop_columns(list(VECTOR_FIELDS)).to_pylist()
        for record, vector, row_units in zip(records, vectors, units, strict=True):
            if record.get("kind", "chunk") == "chunk":
                yield {**record, "vector": vector, "unit_vectors": row_units}


def _row_arrays(column: pa.ListArray, width: int = 0) -> list[np.ndarray | None]:
    """Each row of a list<float> column as a float32 vector, or of a list<list<float>> column (lists of
    `width` floats) as a (lists, width) matrix; None for a null row."""
    offsets = column.offsets.to_numpy()  # into `column.values`, whatever the slice
    if width:
        lists = column.values
        inner = lists.offsets.to_numpy()
        if len(inner) > 1 and np.any(np.diff(inner) != width):
            raise IndexStoreError(f"A Spark shard holds unit vectors that are not {width} wide: re-run the ingest")
        flat = lists.values.to_numpy(zero_copy_only=False)[inner[0] :]
        values = flat[: (len(inner) - 1) * width].reshape(-1, width)
    else:
        values = column.values.to_numpy(zero_copy_only=False)
    nulls = column.is_null().to_numpy(zero_copy_only=False)
    return [None if null else values[offsets[i] : offsets[i + 1]].astype(np.float32) for i, null in enumerate(nulls)]


def local_engine(
    files: list[SourceFile],
    config: IngestConfig,
    known_ids: frozenset[str],
    shards: Path,
    progress: Progress = no_progress,
) -> list[dict[str, Any]]:
    """The same stages as the Spark job, in this process, counting files, chunks and embedded texts.

    A chunk text that occurs more than once (a page copied under two names) is encoded once; the
    copies get its vectors, and a "copies" row says how many there were. The embedder gets every core:
    here it is the only work in its process, while a Spark task or a server shares the cores.
    """
    config = dataclasses.replace(config, threads_per_task=os.cpu_count() or 1)
    rows = []
    copies: list[dict[str, Any]] = []
    first: set[tuple[Any, ...]] = set()
    read = chunks = 0
    for row in chunk_files(read_files(files), config):
        if row["kind"] == "chunk":
            chunks += 1
            progress(Count("chunks", chunks, 0, "chunks"))
            if row["chunk_id"] not in known_ids:
                key = text_key(row)
                if key in first:
                    copies.append(row)
                    continue
                first.add(key)
        else:
            read += 1
            progress(Count("files", read, len(files), "files"))
        rows.append(row)
    progress(Count("chunks", chunks, chunks, "chunks"))
    pending = [r for r in rows if r["kind"] == "chunk" and r["chunk_id"] not in known_ids]
    total = planned_texts(pending, config)
    progress(f"embedding: {len(pending)} new chunks, {total} texts with their evidence units")
    encoded = 0
    others: list[dict[str, Any]] = [{"kind": "copies", "chunks": len(copies)}]
    shard: list[dict[str, Any]] = []
    numbers = itertools.count()
    copied = {text_key(c) for c in copies}
    originals: dict[tuple[Any, ...], dict[str, Any]] = {}

    def count(texts: int) -> None:
        nonlocal encoded
        encoded += texts
        progress(Count("embedding", encoded, total, "texts"))

    def flush() -> None:
        write_shard(shard, shards / f"part-{next(numbers):05d}.parquet")
        shard.clear()

    shards.mkdir(parents=True, exist_ok=True)
    # The model's threads take every core, and numpy's BLAS threads, woken by each batch's small products (token
    # codes, unit means), would spin against them: the Kafka docs' local build took 177 s (343 s of CPU) with two
    # BLAS threads, 166 s (319 s) with one, the same index. (A Spark task's are capped by OMP_NUM_THREADS.)
    with threadpool_limits(limits=1, user_api="blas"):
        for row in embed_rows(rows, config, known_ids, on_encoded=count):
            if row["kind"] != "chunk":
                others.append(row)
                continue
            if row["vector"] is not None and text_key(row) in copied:
                originals[text_key(row)] = {name: row[name] for name in (*VECTOR_FIELDS, "token_codes")}
            shard.append(row)
            if len(shard) >= SHARD_ROWS:
                flush()
    shard.extend({**row, **originals[text_key(row)]} for row in copies)
    if shard:
        flush()
    return others


def text_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """What a chunk's vectors depend on: its heading path and text (not its document)."""
    return (tuple(row["section_path"]), row["text"])


@dataclass(frozen=True)
class BuildEngine:
    """Where a build's stages run: `run` (the job, an `Engine`) and `fit_basis` (the token basis's fit) on the
    same model, so the two never pair a Spark job with a fit on the driver; `name` and `master` go into the
    manifest."""

    name: str
    run: Engine
    fit_basis: BasisFit
    master: str = ""


LOCAL_ENGINE = BuildEngine("local", local_engine, fit_basis_here)


def run_ingest(
    sources: Sequence[str | Path],
    index_dir: Path,
    config: IngestConfig,
    *,
    engine: BuildEngine = LOCAL_ENGINE,
    flat_index_max: int = Settings.flat_index_max,
    progress: Progress = no_progress,
    before_publish: Any = None,
    reuse: bool = True,
    wait: bool = False,
    keep_versions: int = Settings.keep_versions,
) -> IngestReport:
    """Build and publish a new index version from `sources`; the previous version serves until the switch.

    The whole build holds the index's writer lock (`IndexLockedError` when another ingest has it, unless
    `wait`). Staging folders of dead builds are removed first; old versions after a successful publish.
    `engine` is `LOCAL_ENGINE` or Spark's (`rag.spark_job.spark_engine`).
    """
    for source in sources:  # before the lock, which creates the index folder
        if not Path(source).exists():
            raise SourceNotFoundError(f"Source path {source} does not exist: pass a folder or file of documents")
    with writer_lock(index_dir, wait=wait):
        for name in remove_dead_staging(index_dir):
            progress(f"removed {name}, left by a build that died")
        report = _build(
            sources,
            index_dir,
            config,
            engine=engine,
            flat_index_max=flat_index_max,
            progress=progress,
            before_publish=before_publish,
            reuse=reuse,
        )
        if not report.unchanged:
            for name in prune_versions(index_dir, keep_versions):
                progress(f"retention: removed version {name} (keeping the newest {keep_versions})")
        return report


def _build(
    sources: Sequence[str | Path],
    index_dir: Path,
    config: IngestConfig,
    *,
    engine: BuildEngine,
    flat_index_max: int,
    progress: Progress,
    before_publish: Any,
    reuse: bool,
) -> IngestReport:
    """Build and publish a new index version from `sources`, the writer lock held."""
    started = time.perf_counter()
    stages: dict[str, float] = {}
    files, skipped = scan_sources(sources)
    progress(f"scan: {len(files)} files ({len(skipped)} skipped before parsing)")
    by_path = {f.source_path: f for f in files}
    places = include_places(by_path, lambda source_path: Path(by_path[source_path].path).read_bytes())
    config = dataclasses.replace(config, places=tuple(sorted(places.items())))

    try:
        previous = read_manifest(index_dir)
    except IndexStoreError as exc:
        progress(f"the serving version is damaged, building from scratch: {exc}")
        previous = None
    reusable = reuse and previous is not None and _same_build_settings(previous, config)
    previous_files = {f["source_path"]: f for f in previous.get("files", [])} if reusable and previous else {}
    unchanged_files = [
        f
        for f in files
        if previous_files.get(f.source_path, {}).get("sha256") == f.sha256
        # a fragment is chunked again when the page that includes it moved it (its headings changed)
        and previous_files[f.source_path].get("place", []) == list(places.get(f.source_path, ()))
    ]
    unchanged_paths = {f.source_path for f in unchanged_files}
    changed_files = [f for f in files if f.source_path not in unchanged_paths]
    if (
        reusable
        and previous
        and not changed_files
        and set(previous_files) == {f.source_path for f in files}
        and previous.get("lexical_version", 1) == LEXICAL_VERSION  # else the BM25 index is written again
        and _sound(index_dir, progress)
    ):
        version = previous["version"]
        progress(f"unchanged: all {len(files)} files match version {version}; nothing to do")
        counts = previous["counts"]
        return IngestReport(
            str(index_dir),
            version,
            True,
            counts["documents"],
            counts["chunks"],
            0,
            counts["chunks"],
            0,
            tuple(previous.get("skipped", [])),
            engine.name,
            engine.master,
            round(time.perf_counter() - started, 3),
            stages,
        )

    try:
        changed_paths = {f.source_path for f in changed_files}
        carried = _Carried(serving_path(index_dir), changed_paths) if reusable and previous else None
        token_basis = carried.version.token_basis() if carried else None  # its carried tokens are in it
    except IndexStoreError as exc:
        progress(f"the serving version is damaged, building from scratch: {exc}")
        carried, unchanged_files, unchanged_paths, changed_files = None, [], set(), files
        token_basis = None
    progress(f"reuse: {len(unchanged_files)} unchanged files; processing {len(changed_files)} new or changed files")
    if token_basis is None:
        stage_started = time.perf_counter()
        token_basis = fit_token_basis(changed_files, config, progress, engine.fit_basis)
        stages["token_basis"] = round(time.perf_counter() - stage_started, 3)
    config = dataclasses.replace(config, token_basis=token_basis)
    with VersionWriter(index_dir, flat_max=flat_index_max, token_basis=token_basis) as writer:
        shards = writer.staging / "shards"
        stage_started = time.perf_counter()
        known_ids = carried.ids if carried else frozenset()
        rows = engine.run(changed_files, config, known_ids, shards, progress) if changed_files else []
        stages["chunk_and_embed"] = round(time.perf_counter() - stage_started, 3)

        models = [r for r in rows if r["kind"] == "model"]
        identity = _model_entry(models, previous, config)
        previous_fingerprint = previous.get("model", {}).get("fingerprint") if previous else None
        if identity and unchanged_files and previous_fingerprint not in (None, identity["fingerprint"]):
            writer.abort()
            progress("model changed under the same name: re-embedding everything")
            return _build(
                sources,
                index_dir,
                config,
                engine=engine,
                flat_index_max=flat_index_max,
                progress=progress,
                before_publish=before_publish,
                reuse=False,
            )

        stage_started = time.perf_counter()
        streams = [_tagged(shard_rows(shard), "new") for shard in sorted(shards.glob("*.parquet"))]
        if carried:
            streams.append(_tagged(carried.rows_of(unchanged_paths), "reused"))
        counts = {"new": 0, "reused": 0, "dropped": 0}
        for origin, row in heapq.merge(*streams, key=lambda tagged: row_order(tagged[1])):
            if row["vector"] is None:  # a known chunk of a changed file: its vectors come from the last version
                assert carried is not None
                row, origin = {**row, **carried.vectors_of(row["chunk_id"])}, "reused"
            counts[origin if writer.add(row) else "dropped"] += 1
        shutil.rmtree(shards, ignore_errors=True)
        pa.default_memory_pool().release_unused()  # Arrow's allocator keeps what the merge freed (~100 MB)
        stages["merge"] = round(time.perf_counter() - stage_started, 3)

        new_docs = [r for r in rows if r["kind"] == "doc"]
        file_hashes = {f.source_path: f for f in files}
        skipped += [{"source_path": r["source_path"], "reason": r["reason"]} for r in rows if r["kind"] == "skip"]
        documents = [_file_entry(previous_files[f.source_path], f) for f in unchanged_files]
        documents += [
            {
                "source_path": d["source_path"],
                "sha256": file_hashes[d["source_path"]].sha256,
                "size": file_hashes[d["source_path"]].size,
                "title": d["title"],
                "format": d["format"],
                "chunks": d["chunks"],
                **({"place": list(places[d["source_path"]])} if d["source_path"] in places else {}),
            }
            for d in new_docs
        ]
        if not writer.rows:
            raise NoDocumentsError(
                f"No ingestible documents in {', '.join(map(str, sources))} ({len(skipped)} files skipped): "
                "the previous index is untouched"
            )
        duplicates = sum(r["chunks"] for r in rows if r["kind"] == "copies")
        embedded, reused = counts["new"] - duplicates, counts["reused"]
        progress(
            f"chunks: {writer.rows} ({embedded} embedded, {reused} reused, {duplicates} copies of another's text"
            + (f"; {counts['dropped']} repeated chunk ids dropped)" if counts["dropped"] else ")")
        )
        skipped.sort(key=lambda s: s["source_path"])
        manifest = {
            "model": identity,
            "chunker": config.chunker(),
            "counts": {
                "documents": len(documents),
                "chunks": writer.rows,
                "embedded": embedded,
                "reused": reused,
                "duplicates": duplicates,
                "skipped": len(skipped),
            },
            "files": sorted(documents, key=lambda d: d["source_path"]),
            "skipped": skipped,
            "sources": [str(Path(s).resolve()) for s in sources],
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "spark_master": engine.master,
            "engine": engine.name,
        }
        stage_started = time.perf_counter()
        version = writer.publish(manifest, before_publish)
        stages["publish"] = round(time.perf_counter() - stage_started, 3)
    stages["encode"] = round(sum(m.get("encode_seconds", 0.0) for m in models), 3)
    progress(f"publish: version {version} is now serving from {index_dir}/")
    return IngestReport(
        str(index_dir),
        version,
        False,
        len(documents),
        writer.rows,
        embedded,
        reused,
        duplicates,
        tuple(skipped),
        engine.name,
        engine.master,
        round(time.perf_counter() - started, 3),
        stages,
    )


def _sound(index_dir: Path, progress: Progress) -> bool:
    """Whether the serving version loads; a damaged one is rebuilt even when no source changed."""
    try:
        load_version(serving_path(index_dir))
    except IndexStoreError as exc:
        progress(f"the serving version is damaged, publishing a repaired one: {exc}")
        return False
    return True


def _tagged(rows: Iterator[dict[str, Any]], origin: str) -> Iterator[tuple[str, dict[str, Any]]]:
    return ((origin, row) for row in rows)


class _Carried:
    """The serving version, for what a re-ingest carries over: unchanged files' rows, and the vectors of
    changed files' chunks it already holds. A chunk id hashes its source path, so only the changed
    files' own chunks can be known: the lookup is sized by the change, not by the corpus."""

    def __init__(self, path: Path, changed_paths: set[str]) -> None:
        self.version = StoredVersion.open(path)
        self._row_of = self.version.rows_of_sources(changed_paths) if changed_paths else {}
        self.ids = frozenset(self._row_of)

    def rows_of(self, source_paths: set[str]) -> Iterator[dict[str, Any]]:
        return (row for row in self.version.rows() if row["source_path"] in source_paths)

    def vectors_of(self, chunk_id: str) -> dict[str, Any]:
        return self.version.row_vectors(self._row_of[chunk_id])


def _same_build_settings(previous: dict[str, Any], config: IngestConfig) -> bool:
    """Vectors are reused only from a build with the same model on the same backend, so the manifest's
    backend is the one that made every vector in the index."""
    model = previous.get("model", {})
    return (
        model.get("name") == config.model
        and model.get("backend") == config.embed_backend
        and previous.get("chunker") == config.chunker()
        and previous.get("schema_version") == SCHEMA_VERSION
    )


def _model_entry(
    models: list[dict[str, Any]], previous: dict[str, Any] | None, config: IngestConfig
) -> dict[str, Any] | None:
    """The model this build used; None when nothing was embedded and there is no previous index to inherit from."""
    if models:
        fingerprints = {m["fingerprint"] for m in models}
        if len(fingerprints) > 1:  # workers loaded different files under one name: refuse to mix them
            raise NoDocumentsError(
                f"Workers loaded different models for '{config.model}': check the model path on every node"
            )
        first = models[0]
        identity = ModelIdentity(config.model, first["dimension"], first["fingerprint"], config.embed_backend)
        return {**asdict(identity), "metric": "inner_product"}
    return dict(previous["model"]) if previous else None


def _file_entry(previous: dict[str, Any], source: SourceFile) -> dict[str, Any]:
    return {**previous, "sha256": source.sha256, "size": source.size}
