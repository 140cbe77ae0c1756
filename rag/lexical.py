"""Lexical side of retrieval: one tokenizer for chunks and questions, and the BM25 index (bm25s).

Kafka text is full of compound identifiers (`transaction.timeout.ms`, `INVALID_RECORD_STATE`,
`kafka-share-groups.sh`), so a token is emitted whole *and* split into its parts: an exact key
matches exactly, and "transaction timeout" still finds it.
"""

from __future__ import annotations

import logging
import re
from array import array
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import bm25s
import numpy as np

logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets its own logger to DEBUG on import

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


def build_bm25(texts: Iterable[str]) -> bm25s.BM25:
    """The BM25 index of `texts` (bm25s' Lucene scoring, k1 1.5, b 0.75), built in one streaming pass.

    bm25s' own `index` holds every document's token list as Python strings, gigabytes at a million
    chunks; here each document becomes its distinct token ids and counts in compact arrays, and the
    score matrix is assembled at the end in bm25s' layout (CSC by token, rows sorted).
    """
    retriever = bm25s.BM25()
    vocabulary: dict[str, int] = {}
    token_ids, documents, counts = array("i"), array("i"), array("f")
    lengths = array("i")
    for document, text in enumerate(texts):
        tokens = tokenize(text) or [""]
        lengths.append(len(tokens))
        for token, count in Counter(tokens).items():
            token_ids.append(vocabulary.setdefault(token, len(vocabulary)))
            documents.append(document)
            counts.append(count)
    ids = np.frombuffer(token_ids, dtype=np.int32)
    rows = np.frombuffer(documents, dtype=np.int32)
    tf = np.frombuffer(counts, dtype=np.float32)
    doc_length = np.frombuffer(lengths, dtype=np.int32).astype(np.float32)
    total = len(doc_length)
    frequency = np.bincount(ids, minlength=len(vocabulary)).astype(np.float64)
    idf = np.log(1 + (total - frequency + 0.5) / (frequency + 0.5)).astype(np.float32)
    average = float(doc_length.mean()) if total else 1.0
    norm = retriever.k1 * (1 - retriever.b + retriever.b * doc_length[rows] / average)
    scores = idf[ids] * tf / (tf + norm)
    order = np.lexsort((rows, ids))
    indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(frequency.astype(np.int64), out=indptr[1:])
    retriever.scores = {
        "data": scores[order].astype(np.float32),
        "indices": rows[order].astype(np.int32),
        "indptr": indptr,
        "num_docs": total,
    }
    retriever.vocab_dict = vocabulary
    retriever.unique_token_ids_set = set(vocabulary.values())
    retriever.nonoccurrence_array = None  # only BM25L and BM25+ use it
    return retriever


def save_bm25(retriever: bm25s.BM25, directory: Path) -> None:
    retriever.save(str(directory), show_progress=False)


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
