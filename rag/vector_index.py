"""Nearest-neighbour search over a vector file: exact while cheap, IVF with 4-bit codes and an exact re-rank above.

The vectors live in a file of the version folder (`rag.index_store`). The FAISS index is built from it
read block by block (an approximate one is trained on a sample first, then filled block by block, the
autofaiss approach); serving memory-maps it, and an approximate search re-scores its candidates from
it, so the compact codes only have to find the neighbourhood. Neither building nor serving holds all
vectors in memory.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

BLOCK_ROWS = 16_384  # vectors read, converted and added at a time
PLACE_ROWS = 131_072  # codes placed at a time (~200 bytes each): fewer, longer writes per list
TRAIN_PER_LIST = 40  # k-means needs ~39 points per centroid (FAISS warns below); more only slows training
TRAIN_MIN = 10_240  # and the 4-bit codes' per-dimension ranges want a broad sample
IVF_NPROBE = 32  # benchmarks/scale.py: recall@10 against exact search at 10^5 and 10^6 chunks
REFINE = 4  # approximate candidates per wanted result, re-scored exactly from the vector file


def choose_index_type(count: int, flat_max: int, dimension: int) -> dict[str, Any]:
    """Exact search up to `flat_max` vectors; above, IVF (about sqrt(n) lists) with 4-bit scalar codes and an
    exact re-rank of `REFINE` x k candidates.

    Measured on clustered 384-d vectors (50k, nprobe 32): 4-bit codes alone find 0.70 of the true top 10,
    re-ranked 4x 0.99; 8-bit codes 0.98 and 1.0 at twice the size; PQ (96 bytes) trained ~900x slower
    (87 s for 10k points on 2 cores) and fast-scan PQ re-ranked 8x still found only 0.81.
    benchmarks/scale.py measures the Kafka docs' vectors.
    """
    if count <= flat_max:
        return {"type": "Flat", "metric": "inner_product"}
    lists = max(16, int(math.sqrt(count)))
    return {
        "type": f"IVF{lists},SQ4",
        "metric": "inner_product",
        "nlist": lists,
        "nprobe": min(IVF_NPROBE, lists),
        "refine": REFINE,
    }


@dataclass(frozen=True)
class VectorFile:
    """A row-major file of vectors (no header) that a build reads with plain reads, block by block.

    Pages of a memory map that a process has touched count in its RSS until it unmaps them; a build
    passes over its vector files once or twice, so reading them keeps its memory at a block's worth
    however big the files are. Serving maps them instead (`rag.index_store`): it touches few rows.
    """

    path: Path
    dtype: np.dtype
    shape: tuple[int, int]

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: slice | np.ndarray) -> np.ndarray:
        """The rows of a slice, or of an ascending array of row numbers (read block by block)."""
        if isinstance(rows, slice):
            start, stop, _ = rows.indices(len(self))
            return self._read(start, max(0, stop - start))
        rows = np.asarray(rows, dtype=np.int64)
        blocks = rows // BLOCK_ROWS
        picked = [
            self._read(int(block) * BLOCK_ROWS, BLOCK_ROWS)[rows[blocks == block] - int(block) * BLOCK_ROWS]
            for block in np.unique(blocks)
        ]
        return np.concatenate(picked) if picked else np.zeros((0, self.shape[1]), self.dtype)

    def blocks(self) -> Iterator[np.ndarray]:
        """All rows in order, `BLOCK_ROWS` at a time."""
        for start in range(0, len(self), BLOCK_ROWS):
            yield self._read(start, BLOCK_ROWS)

    def _read(self, start: int, count: int) -> np.ndarray:
        dimension = self.shape[1]
        count = max(0, min(count, len(self) - start))
        with self.path.open("rb") as file:
            file.seek(start * dimension * np.dtype(self.dtype).itemsize)
            return np.fromfile(file, dtype=self.dtype, count=count * dimension).reshape(count, dimension)


def write_vector_index(vectors: np.ndarray | VectorFile, spec: Mapping[str, Any], path: Path, seed: int = 0) -> None:
    """Write a FAISS index over `vectors` (any float dtype, usually a `VectorFile`) to `path`.

    An exact index is at most `flat_max` vectors and is built in memory. An IVF index is trained on a
    sample and then written list by list without ever holding its codes in memory (they are ~200 bytes
    a vector: 1 GB at a million chunks' units), into the same file FAISS's own writer makes, so loading
    and memory-mapping it are unchanged.
    """
    count, dimension = vectors.shape
    index = faiss.index_factory(dimension, spec["type"], faiss.METRIC_INNER_PRODUCT)
    if index.is_trained:
        for start in range(0, count, BLOCK_ROWS):
            index.add(_block(vectors, slice(start, start + BLOCK_ROWS)))
        faiss.write_index(index, str(path))
        return
    size = min(count, max(TRAIN_MIN, int(spec["nlist"]) * TRAIN_PER_LIST))
    sample = np.sort(np.random.default_rng(seed).choice(count, size=size, replace=False))
    index.train(_block(vectors, sample))
    _write_ivf(faiss.extract_index_ivf(index), vectors, path)


def _block(vectors: np.ndarray | VectorFile, rows: Any) -> np.ndarray:
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


def _write_ivf(index: faiss.IndexIVF, vectors: np.ndarray | VectorFile, path: Path) -> None:
    """The file `faiss.write_index` writes for `index` after `index.add(vectors)`, written in two passes.

    Pass one encodes the vectors block by block into a scratch file (each code starts with its list
    number, as `sa_encode` gives it). Pass two reads the codes back a block at a time and writes each
    list's run of codes, and of row ids, where that list lives in the file: FAISS stores each list's
    codes, then its ids, list after list, in the order they were added. Files are read and written, not
    mapped, so memory stays at a block's worth (plus the training sample) whatever the count.
    """
    count = len(vectors)
    nlist, code_size = int(index.nlist), int(index.code_size)
    prefix = ((nlist - 1).bit_length() + 7) // 8  # bytes of the list number before each code (FAISS's coarse code)
    width = prefix + code_size
    scratch = path.with_name(path.name + ".codes")
    try:
        sizes = np.zeros(nlist, np.int64)
        with scratch.open("wb") as codes:
            for start in range(0, count, BLOCK_ROWS):
                block = index.sa_encode(_block(vectors, slice(start, start + BLOCK_ROWS)))
                block.tofile(codes)
                sizes += np.bincount(_list_numbers(block, prefix), minlength=nlist)
        index.ntotal = count  # the header's count; the (empty) lists are replaced below
        header = faiss.serialize_index(index).tobytes()
        empty_lists = b"ilar" + struct.pack("<QQ", nlist, code_size) + b"sprs" + struct.pack("<Q", 0)
        if not header.endswith(empty_lists):
            raise RuntimeError(f"FAISS {faiss.__version__} writes IVF lists in a layout this writer does not know")
        lists_header = b"ilar" + struct.pack("<QQ", nlist, code_size) + _list_sizes(sizes)
        body_start = len(header) - len(empty_lists) + len(lists_header)
        list_bytes = sizes * (code_size + 8)
        list_start = body_start + np.concatenate(([0], np.cumsum(list_bytes)[:-1]))
        filled = np.zeros(nlist, np.int64)
        with path.open("wb") as out, scratch.open("rb") as codes:
            out.write(header[: -len(empty_lists)] + lists_header)
            out.truncate(body_start + int(list_bytes.sum()))
            start = 0
            while len(block := np.fromfile(codes, dtype=np.uint8, count=PLACE_ROWS * width)):
                block = block.reshape(-1, width)
                lists = _list_numbers(block, prefix)
                order = np.argsort(lists, kind="stable")
                ordered = lists[order]
                codes_of = block[order, prefix:]
                ids_of = (start + order).astype("<i8")
                runs = np.flatnonzero(np.diff(ordered, prepend=-1))  # where each list's run begins
                for first, end in zip(runs, [*runs[1:], len(order)], strict=True):
                    number = int(ordered[first])
                    slot = int(filled[number])
                    os.pwrite(out.fileno(), codes_of[first:end].tobytes(), int(list_start[number]) + slot * code_size)
                    ids_at = int(list_start[number] + sizes[number] * code_size) + slot * 8
                    os.pwrite(out.fileno(), ids_of[first:end].tobytes(), ids_at)
                    filled[number] += end - first
                start += len(block)
    finally:
        scratch.unlink(missing_ok=True)


def _list_numbers(codes: np.ndarray, prefix: int) -> np.ndarray:
    """The inverted list of each `sa_encode` code: its first `prefix` bytes, little-endian."""
    return (codes[:, :prefix].astype(np.int64) << (8 * np.arange(prefix))).sum(axis=1)


def _list_sizes(sizes: np.ndarray) -> bytes:
    """FAISS's two layouts for list sizes: all of them when most lists hold codes, else (list, size) pairs."""
    filled = np.flatnonzero(sizes)
    if len(filled) > len(sizes) // 2:
        return b"full" + struct.pack("<Q", len(sizes)) + sizes.astype("<u8").tobytes()
    pairs = np.column_stack((filled, sizes[filled])).astype("<u8")
    return b"sprs" + struct.pack("<Q", pairs.size) + pairs.tobytes()


@dataclass(frozen=True)
class VectorSearch:
    """A loaded index with the vector file it was built from (for re-ranking and for reading vectors)."""

    index: faiss.Index
    vectors: np.ndarray
    spec: Mapping[str, Any]

    @classmethod
    def load(cls, path: Path, vectors: np.ndarray, spec: Mapping[str, Any]) -> VectorSearch:
        # Codes are memory-mapped: processes share the page cache, and a query touches only the lists it probes.
        mapped = faiss.IO_FLAG_MMAP_IFC if spec["type"] == "Flat" else faiss.IO_FLAG_MMAP
        flags = mapped | faiss.IO_FLAG_READ_ONLY
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
