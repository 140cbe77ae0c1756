"""Lexical side of retrieval: one tokenizer for chunks and questions, and the BM25 index (bm25s).

Kafka text is full of compound identifiers (`transaction.timeout.ms`, `INVALID_RECORD_STATE`,
`kafka-share-groups.sh`), so a token is emitted whole *and* split into its parts: an exact key
matches exactly, and "transaction timeout" still finds it.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from array import array
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from string import ascii_lowercase
from typing import Any

import bm25s
import numpy as np

logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets its own logger to DEBUG on import

# The spelling of the BM25 vocabulary (`tokenize`): an index records the version it was written with and one
# written with another is refused, as its postings would miss the words a question now spells differently.
# 2: a singular ending in "che", "she", "xe" or "sse" folds like its plural ("cache" and "caches" are "cach").
LEXICAL_VERSION = 2
SPILL_ENTRIES = 1 << 18  # (token, document, count) entries held at a time while the index is written (3 MB)
BM25_FILES = {  # the file names bm25s.BM25.load reads
    "data": "data.csc.index.npy",
    "indices": "indices.csc.index.npy",
    "indptr": "indptr.csc.index.npy",
    "vocab": "vocab.index.json",
    "params": "params.index.json",
}

_WORD = re.compile(r"[a-z0-9_]+(?:[.\-][a-z0-9_]+)*")
_COMPOUND_SEPARATOR = re.compile(r"[._\-]")
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
    for word in _WORD.findall(text.lower()):
        tokens.extend(_word_tokens(word))
    return tokens


@functools.lru_cache(maxsize=65_536)
def _word_tokens(word: str) -> tuple[str, ...]:
    """`tokenize` of one word; cached, since answering tokenizes the same passages' words question after question."""
    parts = [p for p in _COMPOUND_SEPARATOR.split(word) if p]
    whole = (word,) if len(parts) > 1 else ()
    return whole + tuple(_fold(p) for p in parts if p not in _STOPWORDS and len(p) > 1)


def parts_only(text: str, compounds: Collection[str]) -> frozenset[str]:
    """The tokens `text` holds only as parts of `compounds` (`east` of `dc-east`), never as words of their own."""
    counts = Counter(tokenize(text))
    contributed = Counter(
        part
        for match in _WORD.finditer(text.lower())
        if match.group(0) in compounds
        for part in tokenize(match.group(0))
        if part != match.group(0)
    )
    return frozenset(token for token, count in contributed.items() if counts[token] <= count)


MIN_CORRECTED_CHARS = 6  # shorter words have too many neighbours one letter away ("flink" and "link")
MIN_SWAPPED_CHARS = 5  # a swap of neighbours is read from five letters: "toipc" is "topic", "fecth" "fetch"
MIN_INFLECTED_STEM = 4  # "-ing" and "-ed" are cut only from words that keep this many letters ("shrink", not "bed")


def correction(word: str, frequency: Callable[[str], int]) -> str | None:
    """The spelling one dropped letter or one swap of neighbours away from `word` whose token the corpus uses
    most (`frequency`: chunks holding a token), for a word it never uses: "partiton" is "partition", "defualt"
    "default". Only letters the user left out or swapped: a letter replaced would read another product's
    "spring" as "string", and one taken away "refused" as "reused" or `kafkajs` as "kafka". A word shorter than
    `MIN_CORRECTED_CHARS` is only read with two letters swapped ("toipc"), as one letter more makes too many
    words of it ("offet"). None when no such token is used."""
    tokens = tokenize(word)
    if len(word) < MIN_SWAPPED_CHARS or not word.isalpha() or len(tokens) != 1 or frequency(tokens[0]):
        return None
    # The slips of the word as typed, each read as `tokenize` reads it: "mechanimss" is "mechanisms", whose
    # token is the corpus's "mechanism", though no slip of the token "mechanimss" is.
    typed = word.lower()
    meant = slips(typed) if len(word) >= MIN_CORRECTED_CHARS else _swaps(typed)
    used = [(frequency(token[0]), slip) for slip in sorted(meant) if (token := tokenize(slip))]
    best = max(used, default=(0, ""))
    return best[1] if best[0] else None


def slips(word: str) -> frozenset[str]:
    """What the user meant, if `word` misses one letter or swaps two neighbours: every spelling one letter
    added or one swap of neighbours away from it."""
    added = {word[:i] + c + word[i:] for i in range(len(word) + 1) for c in ascii_lowercase}
    return _swaps(word) | frozenset(added - {word})


def _swaps(word: str) -> frozenset[str]:
    return frozenset({word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)} - {word})


def _fold(word: str) -> str:
    """A word's plural and singular alike: "entries" "entry", "batches" "batch", and a singular whose plural only
    adds "s" after a hissing sound spelt with an "e" ("cache", "caches") loses the "e" too ("cach")."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 4 and word.endswith(("sse", "she", "che", "xe")):
        return word[:-1]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def inflection_pattern(word: str) -> str:
    """A regular expression for `word`, lower-cased, in any inflection: its stem (a plural's "s", an "-ing" or
    "-ed" dropped) and up to four letters more ("Shrinking" finds "shrinks", `Hubs` "hub"); an acronym keeps its
    letters and takes a plural "s" only (`REST` finds neither "ret" nor "restart")."""
    lowered = word.lower()
    if word.isupper():
        return re.escape(lowered) + "s?"
    stem = _fold(lowered)
    cut = re.sub(r"(?:ing|ed)$", "", stem)
    return re.escape(cut if len(cut) >= MIN_INFLECTED_STEM else stem) + r"\w{0,4}"


def noun_pattern(word: str) -> str:
    """A regular expression for `word`, lower-cased, as a noun: singular or plural ("entry" finds "entries",
    "cache" "caches"), not a word formed from it ("partition" does not find "partitioning"); an acronym takes a
    plural "s" only."""
    lowered = word.lower()
    if word.isupper():
        return re.escape(lowered) + "s?"
    stem = _fold(lowered)
    if len(stem) > 3 and stem.endswith("y"):
        return re.escape(stem[:-1]) + "(?:y|ies)"
    return re.escape(stem) + "(?:e|s|es)?"


def word_roots(word: str) -> tuple[str, ...]:
    """The words `word` may be formed from, as `tokenize` folds them: the stem of an "-ing" or "-ed" form
    ("refreshed" refresh, "rhyming" rhyme, "tripping" trip: a doubled consonant undone), unless it would keep
    fewer than `MIN_INFLECTED_STEM` letters ("bed"); and, for a word ending in "nt", the verb it would be as a
    negative contraction typed without its apostrophe ("dont" don and do, "didnt" didn and did: the model's
    vocabulary splits "didn't" into "didn", "'" and "t")."""
    if word.endswith("nt") and len(word) > len("nt"):
        return (word[:-1], word[:-2])
    cut = re.sub(r"(?:ing|ed)$", "", word)
    if cut == word or len(cut) < MIN_INFLECTED_STEM:
        return ()
    stems = [cut, cut + "e"]
    if cut[-1] == cut[-2] and cut[-1] not in "aeiou":
        stems.append(cut[:-1])
    return tuple(dict.fromkeys(_fold(stem) for stem in stems))


def write_bm25(texts: Iterable[str], directory: Path, spill_entries: int = SPILL_ENTRIES) -> None:
    """Write the BM25 index of `texts` (bm25s' Lucene scoring, k1 1.5, b 0.75) to `directory` in bm25s'
    format, in memory bounded by the vocabulary, not by the corpus.

    bm25s' own `index` holds every document's token list as Python strings, and even compact arrays of
    every (token, document, count) entry grow to gigabytes at a million chunks. Here each document's
    distinct token ids and counts are gathered `spill_entries` at a time, sorted by token and spilled to a
    scratch file as one run. The score matrix (CSC by token, each token's rows in order) is then written
    token range by token range, merging the runs in one pass: each run is read forward from where the
    last range stopped, so no step holds much more than `spill_entries` entries, whatever the corpus.
    """
    directory.mkdir(parents=True, exist_ok=True)
    scratch = directory / ".postings"
    bm25 = bm25s.BM25()  # for its defaults: Lucene scoring, k1 1.5, b 0.75
    vocabulary: dict[str, int] = {}
    lengths = array("i")
    frequency = np.zeros(0, dtype=np.int64)
    runs: list[int] = []  # entries per spilled run, in file order
    with scratch.open("wb") as spill:
        pending = {field: array("i") for field in ("token", "document", "count")}

        def flush() -> None:
            nonlocal frequency
            block = np.column_stack([np.frombuffer(values, dtype=np.int32) for values in pending.values()])
            pending.update({field: array("i") for field in pending})
            block[np.argsort(block[:, 0], kind="stable")].tofile(spill)  # by token; documents stay in order
            runs.append(len(block))
            counted = np.bincount(block[:, 0], minlength=len(vocabulary))
            counted[: len(frequency)] += frequency
            frequency = counted

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
    total, entries = len(doc_length), sum(runs)
    idf = np.log(1 + (total - frequency + 0.5) / (frequency + 0.5)).astype(np.float32)
    norm = bm25.k1 * (1 - bm25.b + bm25.b * doc_length / (float(doc_length.mean()) if total else 1.0))
    indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(frequency, out=indptr[1:])
    with (
        (directory / BM25_FILES["data"]).open("wb") as data,
        (directory / BM25_FILES["indices"]).open("wb") as rows,
        _RunReader(scratch, runs, read_entries=max(1, spill_entries // max(1, len(runs)))) as postings,
    ):
        np.lib.format.write_array_header_1_0(data, _npy_header(np.float32, entries))
        np.lib.format.write_array_header_1_0(rows, _npy_header(np.int32, entries))
        first = 0
        while first < len(vocabulary):  # tokens [first, last) hold at most `spill_entries` entries (or one token)
            last = max(first + 1, int(np.searchsorted(indptr, indptr[first] + spill_entries, side="right")) - 1)
            part = postings.below(last)
            part = part[np.argsort(part[:, 0], kind="stable")]  # by token; the runs, and so documents, stay in order
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


class _RunReader:
    """Reads the scratch file's runs of (token, document, count) entries, each sorted by token, forward
    in step: `below(last)` returns every entry not yet returned whose token is below `last`, run after
    run. Each run is read (not mapped) `read_entries` at a time from where it stopped."""

    def __init__(self, path: Path, runs: list[int], read_entries: int) -> None:
        self._file = path.open("rb")
        starts = np.concatenate(([0], np.cumsum(runs)[:-1])).astype(np.int64) if runs else np.zeros(0, np.int64)
        self._next = [int(s) for s in starts]  # the next unread entry of each run
        self._end = [int(s) + n for s, n in zip(starts, runs, strict=True)]
        self._held = [np.zeros((0, 3), np.int32) for _ in runs]
        self._read_entries = read_entries

    def __enter__(self) -> _RunReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def below(self, last: int) -> np.ndarray:
        parts = []
        for run, held in enumerate(self._held):
            while self._next[run] < self._end[run] and (not len(held) or held[-1, 0] < last):
                count = min(self._read_entries, self._end[run] - self._next[run])
                self._file.seek(self._next[run] * 12)  # three int32 per entry
                held = np.concatenate((held, np.fromfile(self._file, dtype=np.int32, count=count * 3).reshape(-1, 3)))
                self._next[run] += count
            cut = int(np.searchsorted(held[:, 0], last))
            parts.append(held[:cut])
            self._held[run] = held[cut:]
        return np.concatenate(parts) if parts else np.zeros((0, 3), np.int32)


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


def rows_with(retriever: bm25s.BM25, token: str) -> np.ndarray:
    """The chunk rows that hold `token`, sorted."""
    column = retriever.vocab_dict.get(token)
    if column is None:
        return np.zeros(0, dtype=np.int64)
    indptr, indices = retriever.scores["indptr"], retriever.scores["indices"]
    return np.asarray(indices[indptr[column] : indptr[column + 1]], dtype=np.int64)


def bm25_scores(retriever: bm25s.BM25, query: str, left_out: Collection[str] = frozenset()) -> np.ndarray:
    """BM25 score of every chunk for `query`, without the tokens `left_out` (zeros when no query token is
    in the vocabulary)."""
    vocabulary = retriever.vocab_dict
    tokens = [t for t in tokenize(query) if t in vocabulary and t not in left_out]
    if not tokens:
        return np.zeros(retriever.scores["num_docs"], dtype=np.float32)
    return np.asarray(retriever.get_scores(tokens), dtype=np.float32)
