"""Second-stage ranking: a learned linear model over the features retrieval hands down.

The first stage (dense + BM25 + identifiers, fused by RRF) finds candidates; this stage orders them
so that the first passage is the one that answers. Every feature is named in `RANK_FEATURES` and
computed in `rag.retrieval`; the weights are data (`ranker.json` beside this module), fitted by
`evals/fit_ranker.py` on the tuning parts of the golden files plus synthetic queries made at ingest.
A ranking change is therefore a reviewable diff of that file, and a changed corpus needs no refit:
the features are corpus-relative (shares, normalised scores), never words.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag.errors import ConfigurationError
from rag.units import row_cells, says_what_it_is

if TYPE_CHECKING:  # retrieval computes RANK_FEATURES, so it imports this module
    from rag.query import Query
    from rag.retrieval import Candidate, CandidatePool

# Order matters: model files list their features and are refused when the list differs.
RANK_FEATURES = (
    "rrf",  # first-stage fused score (reciprocal ranks of dense, BM25, identifier and best-sentence orders)
    "dense",  # cosine of the question and the chunk
    "sentence",  # cosine of the question and the chunk's best evidence unit
    "bm25",  # BM25 over heading path + text, as a share of the best candidate's
    "heading_bm25",  # BM25 over title + section path only (fielded), as a share of the best candidate's
    "heading_overlap",  # IDF-weighted share of the question's terms in the heading path
    "term_coverage",  # IDF-weighted share of the question's terms in the chunk
    "focus_identifier",  # IDF-weighted share of the identifiers the question is about that the chunk carries
    "context_identifier",  # the same for identifiers that only sit in a pasted command line or stack frame
    "defines_identifier",  # the chunk defines a focus identifier, not the user's setup (heading or row's first cell)
    "position",  # where the chunk starts in its document, 0 (top) to 1 (end)
    "late_interaction",  # mean over the question's tokens of each one's best cosine with a chunk token (`rag.tokens`)
)

RANKER_PATH = Path(__file__).with_name("ranker.json")
MIN_TABLE_ROWS = 3  # a chunk with this many rows of
TABLE_COLUMNS = 3  # this many cells or more,
TABLE_SHARE = 0.6  # making up this share of its lines, is a table of entries


@dataclass(frozen=True)
class LinearModel:
    """Standardised features times weights, plus a bias; the file format of every learned part here."""

    name: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float = 0.0
    threshold: float = 0.0  # decision threshold on the score, for models that decide (abstention)
    # The threshold for another retrieval mode than the hybrid default, where one was fitted: a single
    # retriever's passages score lower, so the hybrid's threshold would decline more answerable questions.
    mode_thresholds: dict[str, float] = field(default_factory=dict)
    # For the abstention model: an answer scoring below this (and over `threshold`) is given with a caution, since
    # answers scoring there are about as often wrong as right (`evals/fit_caution.py`). None: never.
    caution_threshold: float | None = None
    version: int = 1
    training: dict[str, Any] = field(default_factory=dict)  # data hash, counts, the fit's metrics

    def __post_init__(self) -> None:
        sizes = {len(self.features), len(self.mean), len(self.scale), len(self.weights)}
        if len(sizes) != 1:
            raise ConfigurationError(f"Model '{self.name}' is malformed: feature, mean, scale and weight counts differ")

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        """One score per row of `matrix` (rows are feature vectors in `self.features` order)."""
        if matrix.size == 0:
            return np.zeros(len(matrix), dtype=np.float64)
        standardised = (matrix - np.asarray(self.mean)) / np.asarray(self.scale)
        return standardised @ np.asarray(self.weights) + self.bias

    def to_json(self) -> str:
        payload = {
            "name": self.name,
            "version": self.version,
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
            "threshold": self.threshold,
            "mode_thresholds": self.mode_thresholds,
            "caution_threshold": self.caution_threshold,
            "training": self.training,
        }
        return json.dumps(payload, indent=2) + "\n"

    @classmethod
    def load(cls, path: Path, expected_features: Sequence[str]) -> LinearModel:
        """Read a model file and refuse it when its features are not the ones the code computes."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            model = cls(
                name=str(raw["name"]),
                features=tuple(raw["features"]),
                mean=tuple(float(v) for v in raw["mean"]),
                scale=tuple(float(v) or 1.0 for v in raw["scale"]),
                weights=tuple(float(v) for v in raw["weights"]),
                bias=float(raw.get("bias", 0.0)),
                threshold=float(raw.get("threshold", 0.0)),
                mode_thresholds={str(k): float(v) for k, v in raw.get("mode_thresholds", {}).items()},
                caution_threshold=None if raw.get("caution_threshold") is None else float(raw["caution_threshold"]),
                version=int(raw.get("version", 1)),
                training=dict(raw.get("training", {})),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(f"Cannot read the model file {path} ({exc}): restore it from git") from exc
        if model.features != tuple(expected_features):
            raise ConfigurationError(
                f"Model file {path} was fitted on features {list(model.features)} but the code computes "
                f"{list(expected_features)}: re-run its fit script (evals/fit_*.py)"
            )
        return model


def data_hash(rows: Sequence[Any]) -> str:
    """A short hash of the training data, recorded in the model file."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()[:16]


def model_paths() -> dict[str, Path]:
    """Where the learned parts ship: the fit scripts write these files, the service reads them."""
    return {"ranker": RANKER_PATH, "abstention": RANKER_PATH.with_name("abstention.json")}


def load_ranker(path: Path = RANKER_PATH) -> LinearModel:
    return LinearModel.load(path, RANK_FEATURES)


def first_stage_ranker() -> LinearModel:
    """A model over the features the code computes that keeps the first stage's order (its `rrf` alone): what
    `evals/fit_ranker.py` collects candidates with when the shipped file was fitted on other features."""
    size = len(RANK_FEATURES)
    weights = tuple(1.0 if name == "rrf" else 0.0 for name in RANK_FEATURES)
    return LinearModel("ranker", RANK_FEATURES, (0.0,) * size, (1.0,) * size, weights)


def _pasted_error_first(order: np.ndarray, candidates: Sequence[Candidate]) -> np.ndarray:
    """`order` with its first candidate that defines a pasted error moved to the front: of those defining an
    error the paste names, if any (`Candidate.defines_pasted_error`)."""
    grades = [candidates[index].defines_pasted_error for index in order.tolist()]
    best = max(grades, default=0)
    return _to_front(order, grades.index(best) if best else None)


def _to_front(order: np.ndarray, position: int | None) -> np.ndarray:
    """`order` with its entry at `position` (if any) moved to the front, the others in their order."""
    if not position:
        return order
    return np.concatenate([order[position : position + 1], order[:position], order[position + 1 :]])


def _unnamed_tables_last(order: np.ndarray, candidates: Sequence[Candidate], query: Query) -> np.ndarray:
    """`order` with the chunks of reference tables (error codes, metrics, ACL operations) that name nothing the
    question names moved behind every other, when the question pastes an error that no chunk defines: each row
    there is another entry ("SerializationException: Size of data received by LongDeserializer is not 8" is
    no protocol error, and the error table's rows only read like it)."""
    if not any(i.place == "error" for i in query.identifiers) or any(c.defines_pasted_error for c in candidates):
        return order
    unnamed = {
        index
        for index in order.tolist()
        if _is_table(candidates[index].passage.text)
        and not candidates[index].feature("focus_identifier")
        and not candidates[index].feature("defines_identifier")
    }
    if not unnamed:
        return order
    kept = [index for index in order.tolist() if index not in unnamed]
    return np.asarray(kept + [index for index in order.tolist() if index in unnamed], dtype=order.dtype)


def _is_table(text: str) -> bool:
    """Most of the chunk's lines are rows of `TABLE_COLUMNS` or more cells (`a | b | c`), at least
    `MIN_TABLE_ROWS` of them: a table of entries, not a setting's `Label: | value` lines."""
    lines = [line for line in text.split("\n") if line.strip()]
    rows = sum(len(row_cells(line)) >= TABLE_COLUMNS for line in lines)
    return rows >= MIN_TABLE_ROWS and rows >= TABLE_SHARE * len(lines)


def _defining_first(order: np.ndarray, candidates: Sequence[Candidate], query: Query) -> np.ndarray:
    """`order` with its first chunk that says what the question asks to have defined moved to the front
    (`Query.defined`: "what is a tombstone?" and "Such a record is sometimes referred to as a tombstone"),
    past chunks that only mention it; for a comparison (`Query.compared`), the first chunk that says what each
    thing is, in the question's order ("KStream vs KTable?": KStream's, then KTable's)."""
    for thing in reversed(query.compared or (query.defined,)):
        texts = (candidates[index].passage.text for index in order.tolist())
        order = _to_front(order, next((n for n, text in enumerate(texts) if says_what_it_is(text, thing)), None))
    return order


@dataclass(frozen=True)
class Ranked:
    """The top candidates, best first, with the learned score of each (also set as the passage's score)."""

    pool: CandidatePool
    candidates: tuple[Candidate, ...]
    scores: tuple[float, ...]
    # The reference entries of the names the candidates use that none of them is the entry of
    # (`Retriever.named_entries`): what the answer may name with its default, unranked.
    references: tuple[Candidate, ...] = ()


def rank(pool: CandidatePool, k: int, max_per_section: int, model: LinearModel) -> Ranked:
    """Order the pool: by the learned model in hybrid mode, by the single retriever's score otherwise;
    then keep the best `k`, at most `max_per_section` from one section (the overflow fills a short list),
    and a passage whose text repeats a better one's (the same setting on the source, sink and MirrorMaker
    pages) only after every other.
    In hybrid mode the best-scored chunk that defines the error the user pasted comes first, whatever
    the scores: a long paste's other words outweigh its one error name in every learned feature. When no chunk
    defines the paste's error, tables of other entries go last; and the chunk that says what a "what is …?"
    question asks about comes first."""
    candidates = pool.candidates
    learned = model.scores(
        np.asarray([c.features for c in candidates], dtype=np.float64).reshape(-1, len(model.features))
    )
    primary = learned if pool.mode == "hybrid" else np.asarray([c.first_stage for c in candidates])
    order = np.lexsort((np.arange(len(candidates)), -primary)) if len(candidates) else np.zeros(0, int)
    if pool.mode == "hybrid":
        order = _pasted_error_first(_unnamed_tables_last(order, candidates, pool.query), candidates)
        order = _defining_first(order, candidates, pool.query)
    chosen: list[int] = []
    overflow: list[int] = []
    repeats: list[int] = []
    per_section: Counter[tuple[str, tuple[str, ...]]] = Counter()
    seen_texts: set[str] = set()
    for index in order.tolist():
        passage = candidates[index].passage
        key = (passage.source_path, passage.section_path)
        text = " ".join(passage.text.split())
        if text in seen_texts:
            repeats.append(index)
        elif per_section[key] < max_per_section:
            per_section[key] += 1
            chosen.append(index)
        else:
            overflow.append(index)
        seen_texts.add(text)
        if len(chosen) == k:
            break
    chosen = (chosen + overflow + repeats)[:k]
    ranked = tuple(
        dataclasses.replace(c, passage=dataclasses.replace(c.passage, score=round(float(primary[i]), 6)))
        for i, c in ((i, candidates[i]) for i in chosen)
    )
    return Ranked(pool, ranked, tuple(float(learned[i]) for i in chosen))
