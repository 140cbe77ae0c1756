"""Lexical side of retrieval: one tokenizer for chunks and questions, and the BM25 index (bm25s).

Kafka text is full of compound identifiers (`transaction.timeout.ms`, `INVALID_RECORD_STATE`,
`kafka-share-groups.sh`), so a token is emitted whole *and* split into its parts: an exact key
matches exactly, and "transaction timeout" still finds it.
"""

from __future__ import annotations

import json
import logging
import re
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets its own logger to DEBUG on import

SPILL_ENTRIES = 1 << 22  # (token, document, count) entries held at a time while the index is written (48 MB)
BM25_FILES = {  # the file names bm25s.BM25.load reads
    "data": "data.csc.index.npy",
    "indices": "indices.csc.index.npy",
    "indptr": "indptr.csc.index.npy",
    "vocab": "vocab.index.json",
    "params": "params.index.json",
}

_WORD = re.compile(r"[a-z0-9_]+(?:[.\-][a-z0-9_]+)*")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "too",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "am",
        "any",
        "all",
        "also",
        "just",
        "not",
        "no",
        "yes",
        "get",
        "got",
    ]
)


def tokenize(text: str) -> list[str]:
    """Lower-cased tokens: compound identifiers whole plus their parts, stopwords out, plurals folded."""
    tokens: list[str] = []
    for match in _WORD.finditer(text.lower()):
        word = match.group(0)
        parts = [p for p in re.split(r"[._\-]", word) if p]
        if len(parts) > 1:
            tokens.append(word)
        tokens.extend(_fold(p) for p in parts if p not in _STOPWORDS and len(p) > 1)
    return tokens


def _fold(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def write_bm25(texts: Iterable[str], directory: Path, spill_entries: int = SPILL_ENTRIES) -> None:
    """Write the BM25 index of `texts` (bm25s' Lucene scoring, k1 1.5, b 0.75) to `directory` in bm25s'
    format, in memory bounded by the vocabulary, not by the corpus.

    bm25s' own `index` holds every document's token list as Python strings, and even compact arrays of
    every (token, document, count) entry grow to gigabytes at a million chunks. Here each document's
    distinct token ids and counts go to a scratch file `spill_entries` at a time; the score matrix (CSC
    by token, each token's rows sorted) is then written token range by token range, each range read back
    from the scratch file in blocks, so no pass holds more than about `spill_entries` entries.
    """
    directory.mkdir(parents=True, exist_ok=True)
    scratch = directory / ".postings"
    bm25 = bm25s.BM25()  # for its defaults: Lucene scoring, k1 1.5, b 0.75
    vocabulary: dict[str, int] = {}
    lengths = array("i")
    frequency = np.zeros(0, dtype=np.int64)
    entries = 0
    with scratch.open("wb") as spill:
        pending = {field: array("i") for field in ("token", "document", "count")}

        def flush() -> None:
            nonlocal frequency, entries
            block = np.column_stack([np.frombuffer(values, dtype=np.int32) for values in pending.values()])
            block.tofile(spill)
            counted = np.bincount(block[:, 0], minlength=len(vocabulary))
            counted[: len(frequency)] += frequency
            frequency, entries = counted, entries + len(block)
            pending.update({field: array("i") for field in pending})

        for document, text in enumerate(texts):
            tokens = tokenize(text) or [""]
            lengths.append(len(tokens))
            for token, count in Counter(tokens).items():
                pending["token"].append(vocabulary.setdefault(token, len(vocabulary)))
                pending["document"].append(document)
                pending["count"].append(count)
            if len(pending["token"]) >= spill_entries:
                flush()
        flush()
    frequency = np.pad(frequency, (0, len(vocabulary) - len(frequency)))
    doc_length = np.frombuffer(lengths, dtype=np.int32).astype(np.float32)
    total = len(doc_length)
    idf = np.log(1 + (total - frequency + 0.5) / (frequency + 0.5)).astype(np.float32)
    norm = bm25.k1 * (1 - bm25.b + bm25.b * doc_length / (float(doc_length.mean()) if total else 1.0))
    indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(frequency, out=indptr[1:])
    with (directory / BM25_FILES["data"]).open("wb") as data, (directory / BM25_FILES["indices"]).open("wb") as rows:
        np.lib.format.write_array_header_1_0(data, _npy_header(np.float32, entries))
        np.lib.format.write_array_header_1_0(rows, _npy_header(np.int32, entries))
        first = 0
        while first < len(vocabulary):  # tokens [first, last) hold at most `spill_entries` entries (or one token)
            last = max(first + 1, int(np.searchsorted(indptr, indptr[first] + spill_entries, side="right")) - 1)
            kept = [block[(block[:, 0] >= first) & (block[:, 0] < last)] for block in _blocks(scratch, spill_entries)]
            part = np.concatenate(kept) if kept else np.zeros((0, 3), dtype=np.int32)
            part = part[np.argsort(part[:, 0], kind="stable")]  # by token; documents stay in order
            token_ids, documents, counts = part[:, 0], part[:, 1], part[:, 2].astype(np.float32)
            data.write((idf[token_ids] * counts / (counts + norm[documents])).astype(np.float32).tobytes())
            rows.write(documents.astype(np.int32).tobytes())
            first = last
    scratch.unlink()
    np.save(directory / BM25_FILES["indptr"], indptr)
    (directory / BM25_FILES["vocab"]).write_text(json.dumps(vocabulary, ensure_ascii=False), "utf-8")
    params = {name: getattr(bm25, name) for name in ("k1", "b", "delta", "method", "idf_method", "dtype", "int_dtype")}
    params |= {"num_docs": total, "version": bm25s.__version__, "backend": bm25.backend}
    (directory / BM25_FILES["params"]).write_text(json.dumps(params, indent=4), "utf-8")


def _blocks(path: Path, rows: int) -> Iterator[np.ndarray]:
    """The scratch file's (token, document, count) entries, `rows` at a time, read (not mapped)."""
    with path.open("rb") as file:
        while len(block := np.fromfile(file, dtype=np.int32, count=rows * 3)):
            yield block.reshape(-1, 3)


def _npy_header(dtype: Any, length: int) -> dict[str, Any]:
    return {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (length,)}


def load_bm25(directory: Path) -> bm25s.BM25:
    """Memory-mapped: the score matrix stays in the page cache, shared by the processes serving it."""
    return bm25s.BM25.load(str(directory), mmap=True, show_progress=False, verbosity=0)


def document_frequency(retriever: bm25s.BM25, token: str) -> int:
    """How many chunks hold `token` (a `tokenize` token): its column's length in the score matrix."""
    column = retriever.vocab_dict.get(token)
    if column is None:
        return 0
    indptr = retriever.scores["indptr"]
    return int(indptr[column + 1] - indptr[column])


def rows_holding(retriever: bm25s.BM25, token: str, rows: np.ndarray) -> np.ndarray:
    """Which of `rows` (sorted chunk rows) hold `token`, as a boolean mask. The score matrix keeps each
    token's chunk rows sorted, so this is a binary search, not a scan of the corpus."""
    column = retriever.vocab_dict.get(token)
    if column is None or not len(rows):
        return np.zeros(len(rows), dtype=bool)
    indptr, indices = retriever.scores["indptr"], retriever.scores["indices"]
    holding = indices[indptr[column] : indptr[column + 1]]
    if not len(holding):
        return np.zeros(len(rows), dtype=bool)
    found = np.searchsorted(holding, rows)
    return (found < len(holding)) & (holding[np.minimum(found, len(holding) - 1)] == rows)


def bm25_scores(retriever: bm25s.BM25, query: str) -> np.ndarray:
    """BM25 score of every chunk for `query` (zeros when no query token is in the vocabulary)."""
    vocabulary = retriever.vocab_dict
    tokens = [t for t in tokenize(query) if t in vocabulary]
    if not tokens:
        return np.zeros(retriever.scores["num_docs"], dtype=np.float32)
    return np.asarray(retriever.get_scores(tokens), dtype=np.float32)
