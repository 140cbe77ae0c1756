"""First-stage retrieval: dense (FAISS), lexical (BM25) and exact identifier matches find candidates,
and every feature that ranking and abstention need is computed here, once, and handed down.

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
from rag.embedding import Embedder, QueryEncoder
from rag.errors import RetrievalError
from rag.identifiers import extract_identifiers
from rag.index_store import LoadedIndex
from rag.lexical import bm25_scores, tokenize
from rag.passages import Passage
from rag.query import Query
from rag.ranking import RANK_FEATURES
from rag.settings import RETRIEVAL_MODES, Settings

BM25_K1 = 1.2  # the usual Okapi constants, for the heading field scored here
BM25_B = 0.75
_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


@dataclass(frozen=True)
class FirstStage:
    """How candidates are found and fused, from `Settings`."""

    candidates: int
    rrf_k: int
    dense: float
    bm25: float
    identifier: float
    sentence: float

    @classmethod
    def from_settings(cls, settings: Settings) -> FirstStage:
        return cls(
            candidates=settings.candidates,
            rrf_k=settings.rrf_k,
            dense=settings.dense_weight,
            bm25=settings.bm25_weight,
            identifier=settings.identifier_weight,
            sentence=settings.sentence_weight,
        )


@dataclass(frozen=True)
class Candidate:
    """One chunk with everything the later stages read: its passage, features and unit similarities."""

    passage: Passage
    features: tuple[float, ...]  # in `RANK_FEATURES` order
    first_stage: float  # RRF for hybrid, cosine for dense, BM25 for bm25
    dense: float
    unit_scores: np.ndarray  # cosine of the question with each evidence unit (`rag.units.build_units` order)
    unit_vectors: np.ndarray
    matched_terms: frozenset[str]  # the question's terms that occur in the chunk
    identifiers: tuple[str, ...]  # the question's identifiers the chunk carries

    def feature(self, name: str) -> float:
        return self.features[RANK_FEATURES.index(name)]


@dataclass(frozen=True)
class QueryEvidence:
    """What the corpus as a whole says about the question's words: inputs to abstention."""

    term_weights: dict[str, float]  # IDF of each question term (unknown terms weigh most)
    unknown_term_share: float  # IDF-weighted share of the question's terms the corpus never uses
    names: int  # name-like words in the question (products, APIs, features)
    unknown_names: tuple[str, ...]  # of those, the ones neither whole nor in parts in the corpus
    focus_identifiers: int
    unknown_focus_identifiers: int  # identifiers the question is about that no chunk carries


@dataclass(frozen=True)
class CandidatePool:
    query: Query
    mode: str
    candidates: tuple[Candidate, ...]  # first-stage order
    evidence: QueryEvidence
    timings_ms: dict[str, float]


class Retriever:
    def __init__(self, index: LoadedIndex, embedder: Embedder) -> None:
        self.index = index
        self._queries = QueryEncoder(embedder)
        columns = index.chunks
        self._rows = columns.to_pylist()
        self._identifiers = [frozenset(ids) for ids in columns.column("identifiers").to_pylist()]
        self._rows_by_identifier: dict[str, list[int]] = {}
        for row, ids in enumerate(self._identifiers):
            for identifier in ids:
                self._rows_by_identifier.setdefault(identifier, []).append(row)
        identifier_counts: Counter[str] = Counter(i for ids in self._identifiers for i in ids)
        self._identifier_idf = {i: math.log(1 + len(self._rows) / n) for i, n in identifier_counts.items()}
        self._row_terms = [frozenset(tokenize(lexical_text(r["section_path"], r["text"]))) for r in self._rows]
        self._token_df: Counter[str] = Counter(t for terms in self._row_terms for t in terms)
        # The heading field (title + section path): term counts per row, document frequencies, mean length.
        self._heading_counts = [Counter(tokenize(" ".join(r["section_path"]))) for r in self._rows]
        self._heading_df: Counter[str] = Counter(t for counts in self._heading_counts for t in counts)
        self._heading_avg = sum(c.total() for c in self._heading_counts) / max(len(self._rows), 1)
        self._defined = [_defined_identifiers(r["section_path"], r["text"]) for r in self._rows]
        # Every evidence unit's vector in one matrix, with the chunk row it belongs to.
        sizes = [len(u) for u in index.unit_vectors]
        self._unit_rows = np.repeat(np.arange(len(sizes)), sizes)
        self._unit_offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        dimension = index.vectors.shape[1] if index.vectors.ndim == 2 else 0
        self._unit_matrix = np.vstack(
            [np.zeros((0, dimension), np.float32), *(u for u in index.unit_vectors if len(u))]
        )
        doc_length: dict[str, int] = {}
        for r in self._rows:
            doc_length[r["doc_id"]] = max(doc_length.get(r["doc_id"], 0), int(r["end"]))
        self._position = [int(r["start"]) / max(doc_length[r["doc_id"]], 1) for r in self._rows]

    @property
    def size(self) -> int:
        return len(self._rows)

    @property
    def version(self) -> str:
        return self.index.version

    def retrieve(self, query: Query, depth: int, mode: str, stage: FirstStage) -> CandidatePool:
        """Candidates for `query` with their features, in first-stage order."""
        if mode not in RETRIEVAL_MODES:
            raise RetrievalError(f"Unknown retrieval mode {mode!r}: use one of {', '.join(RETRIEVAL_MODES)}")
        timings: dict[str, float] = {}
        started = time.perf_counter()
        query_vector = self._queries.encode(query.text)
        timings["embed_query"] = elapsed_ms(started)

        started = time.perf_counter()
        depth = min(max(stage.candidates, depth), self.size)
        dense_order: list[int] = []
        if mode != "bm25":
            _, dense_rows = self.index.faiss_index.search(query_vector.reshape(1, -1), depth)
            dense_order = [int(r) for r in dense_rows[0] if r >= 0]
        timings["dense"] = elapsed_ms(started)

        started = time.perf_counter()
        lexical = bm25_scores(self.index.bm25, query.text) if mode != "dense" else np.zeros(self.size, np.float32)
        lexical_order = [int(r) for r in np.argsort(-lexical, kind="stable")[:depth] if lexical[r] > 0]
        timings["bm25"] = elapsed_ms(started)

        started = time.perf_counter()
        wanted = {i.name for i in query.identifiers}
        matched = self._identifier_matches(wanted) if mode == "hybrid" else {}
        all_units = self._unit_matrix @ query_vector  # every evidence unit's cosine, once
        unit_order = self._unit_order(all_units, depth) if mode == "hybrid" else []
        rows = list(dict.fromkeys([*dense_order, *lexical_order, *matched, *unit_order]))
        dense_scores = self.index.vectors[rows] @ query_vector if rows else np.zeros(0, np.float32)
        dense_of = dict(zip(rows, dense_scores.tolist(), strict=True))
        offsets = self._unit_offsets
        unit_scores = {row: all_units[offsets[row] : offsets[row + 1]] for row in rows}
        best_unit = {row: float(s.max()) if len(s) else dense_of[row] for row, s in unit_scores.items()}
        first = self._first_stage(mode, dense_order, lexical_order, matched, dense_of, unit_order, lexical, stage)
        order = sorted(first, key=lambda row: (-first[row], row))
        evidence = self._query_evidence(query)
        matched_terms = {row: self._row_terms[row] & evidence.term_weights.keys() for row in order}
        features = self._features(
            query, mode, order, lexical, dense_of, best_unit, first, evidence, stage, matched_terms
        )
        candidates = tuple(
            Candidate(
                passage=self.passage(row, first[row]),
                features=vector,
                first_stage=first[row],
                dense=dense_of[row],
                unit_scores=unit_scores[row],
                unit_vectors=self.index.unit_vectors[row],
                matched_terms=matched_terms[row],
                identifiers=tuple(sorted(self._identifiers[row] & wanted)),
            )
            for row, vector in zip(order, features, strict=True)
        )
        timings["features"] = elapsed_ms(started)
        return CandidatePool(query, mode, candidates, evidence, timings)

    def _unit_order(self, scores: np.ndarray, depth: int) -> list[int]:
        """Chunks by their best evidence unit over the whole corpus: finds the one sentence or row that
        answers a question whose words the chunk as a whole does not share ("shrink" vs "reducing")."""
        if not len(scores):
            return []
        top = np.argpartition(-scores, min(depth * 3, len(scores) - 1))[: depth * 3]
        ordered = top[np.argsort(-scores[top], kind="stable")]
        return list(dict.fromkeys(int(self._unit_rows[i]) for i in ordered))[:depth]

    def _first_stage(self, mode, dense_order, lexical_order, matched, dense_of, unit_order, lexical, stage):
        if mode == "dense":
            return {row: float(dense_of[row]) for row in dense_order}
        if mode == "bm25":
            return {row: float(lexical[row]) for row in lexical_order}
        fused: dict[int, float] = {}

        def add(order: list[int], weight: float) -> None:
            for rank, row in enumerate(order, start=1):
                fused[row] = fused.get(row, 0.0) + weight / (stage.rrf_k + rank)

        add(dense_order, stage.dense)
        add(lexical_order, stage.bm25)
        strength = {row: sum(self._identifier_idf.get(i, 1.0) for i in ids) for row, ids in matched.items()}
        add(sorted(strength, key=lambda row: (-strength[row], -dense_of[row], row)), stage.identifier)
        add(unit_order, stage.sentence)
        return fused

    def _features(
        self, query, mode, order, lexical, dense_of, best_unit, first, evidence, stage, matched_terms
    ) -> list[tuple[float, ...]]:
        weights = evidence.term_weights
        total_weight = sum(weights.values()) or 1.0
        focus = {i: self._identifier_idf.get(i, 1.0) for i in query.focus_identifiers}
        context = {i: self._identifier_idf.get(i, 1.0) for i in query.context_identifiers}
        best_bm25 = max((float(lexical[row]) for row in order), default=0.0) or 1.0
        heading = {row: self._heading_bm25(row, weights) for row in order}
        best_heading = max(heading.values(), default=0.0) or 1.0
        rrf_scale = stage.rrf_k + 1  # a first place in one order scores ~1
        vectors: list[tuple[float, ...]] = []
        for row in order:
            carried = self._identifiers[row]
            heading_terms = self._heading_counts[row]
            vectors.append(
                (
                    first[row] * rrf_scale if mode == "hybrid" else 0.0,
                    float(dense_of[row]),
                    float(best_unit[row]),
                    float(lexical[row]) / best_bm25,
                    heading[row] / best_heading,
                    sum(w for t, w in weights.items() if t in heading_terms) / total_weight,
                    sum(weights[t] for t in matched_terms[row]) / total_weight,
                    _share(focus, carried),
                    _share(context, carried),
                    1.0 if focus.keys() & self._defined[row] else 0.0,
                    self._position[row],
                )
            )
        return vectors

    def _heading_bm25(self, row: int, weights: dict[str, float]) -> float:
        counts = self._heading_counts[row]
        if not counts:
            return 0.0
        norm = BM25_K1 * (1 - BM25_B + BM25_B * counts.total() / (self._heading_avg or 1))
        score = 0.0
        for term in weights:
            tf = counts.get(term, 0)
            if tf:
                df = self._heading_df[term]
                idf = math.log(1 + (self.size - df + 0.5) / (df + 0.5))
                score += idf * tf * (BM25_K1 + 1) / (tf + norm)
        return score

    def _query_evidence(self, query: Query) -> QueryEvidence:
        total = self.size or 1
        weights = {t: math.log(1 + total / (1 + self._token_df.get(t, 0))) for t in dict.fromkeys(query.tokens)}
        unknown = sum(w for t, w in weights.items() if not self._token_df.get(t)) / (sum(weights.values()) or 1.0)
        names = [name for name in query.names if self._unknown_name(name)]
        focus = query.focus_identifiers
        return QueryEvidence(
            term_weights=weights,
            unknown_term_share=unknown,
            names=len(query.names),
            unknown_names=tuple(names),
            focus_identifiers=len(focus),
            unknown_focus_identifiers=sum(1 for i in focus if i not in self._rows_by_identifier),
        )

    def _unknown_name(self, word: str) -> bool:
        """True when neither `word` nor any part of it occurs in the corpus (`ShareConsumer` is known by its parts)."""
        whole = tokenize(word)
        if not whole or any(self._token_df.get(t, 0) for t in whole):
            return False
        parts = [t for part in _NAME_PARTS.findall(word) for t in tokenize(part) if len(t) > 2]
        return not any(self._token_df.get(t, 0) for t in parts)

    def _identifier_matches(self, wanted: set[str]) -> dict[int, frozenset[str]]:
        rows = {row for identifier in wanted for row in self._rows_by_identifier.get(identifier, ())}
        return {row: self._identifiers[row] & wanted for row in rows}

    def passage(self, row: int, score: float) -> Passage:
        data = self._rows[row]
        return Passage(
            chunk_id=data["chunk_id"],
            doc_id=data["doc_id"],
            title=data["title"],
            section_path=tuple(data["section_path"]),
            source_path=data["source_path"],
            text=data["text"],
            score=round(score, 6),
            url=data["url"] or "",
            identifiers=tuple(data["identifiers"]),
        )


def _share(weights: dict[str, float], carried: frozenset[str]) -> float:
    total = sum(weights.values())
    return sum(w for i, w in weights.items() if i in carried) / total if total else 0.0


_ROW_HEAD = re.compile(r"^[^|\n]{1,80} \| (?:[^|\n]{1,16} \|)?", re.M)


def _defined_identifiers(section_path, text: str) -> frozenset[str]:
    """Identifiers a chunk defines rather than mentions: in its heading path, or leading a table row
    (`INVALID_RECORD_STATE | 121 |` defines the error and its code)."""
    defined = set(extract_identifiers(" ".join(section_path)))
    for match in _ROW_HEAD.finditer(text):
        defined.update(extract_identifiers(match.group(0)))
    return frozenset(defined)


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()` reading), for the per-stage timings."""
    return round((time.perf_counter() - started) * 1000, 3)
