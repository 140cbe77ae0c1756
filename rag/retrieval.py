"""Hybrid retrieval: dense (FAISS) and lexical (BM25) rankings fused by reciprocal rank fusion,
lifted by exact identifier matches, and made diverse with a per-section cap.

Reads only immutable arrays of a `LoadedIndex`, so one `Retriever` serves concurrent requests.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from rag.chunking import lexical_text
from rag.embedding import Embedder, QueryBatcher
from rag.errors import RetrievalError
from rag.identifiers import extract_identifiers
from rag.index_store import LoadedIndex
from rag.lexical import bm25_scores, tokenize
from rag.passages import Passage
from rag.sentences import split_units
from rag.settings import RETRIEVAL_MODES


@dataclass(frozen=True)
class FusionWeights:
    """Retrieval knobs, from `Settings` (where the tuned defaults live)."""

    candidates: int
    rrf_k: int
    dense: float
    bm25: float
    identifier: float
    sentence: float
    max_per_section: int


@dataclass(frozen=True)
class Hit:
    row: int
    score: float
    dense: float  # cosine similarity of the query and the chunk
    identifiers: tuple[str, ...]  # query identifiers this chunk carries


@dataclass(frozen=True)
class Unit:
    """A quotable sentence of a chunk with what the answerer matches against the question."""

    text: str
    terms: frozenset[str]
    identifiers: frozenset[str]


@dataclass(frozen=True)
class Ranking:
    hits: tuple[Hit, ...]
    query_vector: np.ndarray
    query_identifiers: tuple[str, ...]
    timings_ms: dict[str, float]


class Retriever:
    def __init__(self, index: LoadedIndex, embedder: Embedder) -> None:
        self.index = index
        self._queries = QueryBatcher(embedder)
        columns = index.chunks
        self._identifiers = [frozenset(ids) for ids in columns.column("identifiers").to_pylist()]
        self._rows_by_identifier: dict[str, list[int]] = {}
        for row, ids in enumerate(self._identifiers):
            for identifier in ids:
                self._rows_by_identifier.setdefault(identifier, []).append(row)
        self._units: dict[int, tuple[Unit, ...]] = {}
        self._section_keys = [
            (source, tuple(path))
            for source, path in zip(
                columns.column("source_path").to_pylist(), columns.column("section_path").to_pylist(), strict=True
            )
        ]
        self._rows = columns.to_pylist()
        identifier_counts: Counter[str] = Counter(i for ids in self._identifiers for i in ids)
        self._identifier_idf = {i: math.log(1 + len(self._rows) / n) for i, n in identifier_counts.items()}
        self._row_terms = [frozenset(tokenize(lexical_text(r["section_path"], r["text"]))) for r in self._rows]
        self._token_df: Counter[str] = Counter(t for terms in self._row_terms for t in terms)

    @property
    def size(self) -> int:
        return len(self._rows)

    def rank(self, query: str, k: int, mode: str, weights: FusionWeights) -> Ranking:
        """Top-k chunk rows for `query`, best first, at most `max_per_section` per section."""
        if mode not in RETRIEVAL_MODES:
            raise RetrievalError(f"Unknown retrieval mode {mode!r}: use one of {', '.join(RETRIEVAL_MODES)}")
        timings: dict[str, float] = {}
        started = time.perf_counter()
        query_vector = self._queries.encode(query)
        timings["embed_query"] = elapsed_ms(started)

        started = time.perf_counter()
        depth = min(max(weights.candidates, k * 4), self.size)
        if mode != "bm25":
            _, dense_rows = self.index.faiss_index.search(query_vector.reshape(1, -1), depth)
            dense_order = [int(r) for r in dense_rows[0] if r >= 0]
        else:
            dense_order = []
        timings["dense"] = elapsed_ms(started)

        started = time.perf_counter()
        lexical = bm25_scores(self.index.bm25, query) if mode != "dense" else np.zeros(self.size, dtype=np.float32)
        lexical_order = [int(r) for r in np.argsort(-lexical, kind="stable")[:depth] if lexical[r] > 0]
        timings["bm25"] = elapsed_ms(started)

        started = time.perf_counter()
        query_identifiers = extract_identifiers(query)
        matched = self._identifier_matches(query_identifiers) if mode == "hybrid" else {}
        # Cosine for every candidate (not the whole corpus): the answerer and abstention need it.
        candidates = sorted(set(dense_order) | set(lexical_order) | set(matched))
        dense_scores = (
            dict(zip(candidates, (self.index.vectors[candidates] @ query_vector).tolist(), strict=True))
            if candidates
            else {}
        )
        sentence_order = self._sentence_order(candidates, query_vector) if mode == "hybrid" else []
        scores = self._fuse(mode, dense_order, lexical_order, matched, dense_scores, lexical, weights)
        for rank, row in enumerate(sentence_order, start=1):
            scores[row] = scores.get(row, 0.0) + weights.sentence / (weights.rrf_k + rank)
        order = sorted(scores, key=lambda row: (-scores[row], row))
        hits = tuple(
            Hit(row, scores[row], float(dense_scores[row]), tuple(sorted(matched.get(row, {}))))
            for row in self._diverse(order, k, weights.max_per_section)
        )
        timings["fuse"] = elapsed_ms(started)
        return Ranking(hits, query_vector, query_identifiers, timings)

    def _sentence_order(self, candidates: list[int], query_vector: np.ndarray) -> list[int]:
        """Candidates by their best single sentence: finds the chunk that holds the exact answer line."""
        best = {
            row: float((self.index.unit_vectors[row] @ query_vector).max())
            for row in candidates
            if len(self.index.unit_vectors[row])
        }
        return sorted(best, key=lambda row: (-best[row], row))

    def _identifier_matches(self, query_identifiers: tuple[str, ...]) -> dict[int, frozenset[str]]:
        if not query_identifiers:
            return {}
        wanted = set(query_identifiers)
        rows = {row for identifier in wanted for row in self._rows_by_identifier.get(identifier, ())}
        return {row: self._identifiers[row] & wanted for row in rows}

    def _fuse(self, mode, dense_order, lexical_order, matched, dense_scores, lexical, weights) -> dict[int, float]:
        if mode == "dense":
            return {row: float(dense_scores[row]) for row in dense_order}
        if mode == "bm25":
            return {row: float(lexical[row]) for row in lexical_order}
        fused: dict[int, float] = {}
        for rank, row in enumerate(dense_order, start=1):
            fused[row] = fused.get(row, 0.0) + weights.dense / (weights.rrf_k + rank)
        for rank, row in enumerate(lexical_order, start=1):
            fused[row] = fused.get(row, 0.0) + weights.bm25 / (weights.rrf_k + rank)
        if matched:
            strength = {row: sum(self._identifier_idf.get(i, 1.0) for i in ids) for row, ids in matched.items()}
            identifier_order = sorted(strength, key=lambda row: (-strength[row], -dense_scores[row], row))
            for rank, row in enumerate(identifier_order, start=1):
                fused[row] = fused.get(row, 0.0) + weights.identifier / (weights.rrf_k + rank)
        return fused

    def _diverse(self, order: list[int], k: int, max_per_section: int) -> list[int]:
        """Best rows, at most `max_per_section` from one section; the overflow only fills a short list."""
        chosen: list[int] = []
        overflow: list[int] = []
        per_section: Counter[tuple[str, tuple[str, ...]]] = Counter()
        for row in order:
            key = self._section_keys[row]
            if per_section[key] < max_per_section:
                per_section[key] += 1
                chosen.append(row)
            else:
                overflow.append(row)
            if len(chosen) == k:
                return chosen
        return (chosen + overflow)[:k]

    def passage(self, hit: Hit) -> Passage:
        row = self._rows[hit.row]
        return Passage(
            chunk_id=row["chunk_id"],
            doc_id=row["doc_id"],
            title=row["title"],
            section_path=tuple(row["section_path"]),
            source_path=row["source_path"],
            text=row["text"],
            score=round(hit.score, 6),
            url=row["url"] or "",
            identifiers=tuple(row["identifiers"]),
        )

    def term_coverage(self, query: str, rows: list[int]) -> float:
        """IDF-weighted share of the query's terms that occur in `rows` (terms unknown to the corpus weigh most)."""
        terms = set(tokenize(query))
        if not terms:
            return 0.0
        present = set().union(*(self._row_terms[r] for r in rows))
        total = self.size or 1
        weight = {t: math.log(1 + total / (1 + self._token_df.get(t, 0))) for t in terms}
        return sum(weight[t] for t in terms if t in present) / sum(weight.values())

    def unknown_term(self, word: str) -> bool:
        """True when neither `word` nor any part of it occurs in the corpus (`ShareConsumer` is known by its parts)."""
        whole = tokenize(word)
        if not whole or any(self._token_df.get(t, 0) for t in whole):
            return False
        parts = [t for part in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", word) for t in tokenize(part) if len(t) > 2]
        return not any(self._token_df.get(t, 0) for t in parts)

    def units(self, row: int) -> tuple[Unit, ...]:
        """The chunk's sentence units, split and tokenized once and then cached (a benign race at worst)."""
        units = self._units.get(row)
        if units is None:
            units = tuple(
                Unit(text, frozenset(tokenize(text)), frozenset(extract_identifiers(text)))
                for text in split_units(self._rows[row]["text"])
            )
            self._units[row] = units
        return units

    def row(self, row: int) -> dict:
        return self._rows[row]


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()` reading), for the per-stage timings."""
    return round((time.perf_counter() - started) * 1000, 3)
