"""Scoring one golden question and summarising many: pure functions over plain values, no I/O.

A retrieved passage is graded 2 when it contains an evidence string (normalised as the golden loader
does), 1 when it comes from one of the item's source documents, 0 otherwise. Hit, MRR and the
follow-up figures count grade 2 only; nDCG uses the grades; `doc_*` metrics count grade >= 1.
`summarise_parts` gives the same metrics for each part of the tune/test split.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evals.golden import PARTS, normalise, part_of

HIT_KS = (1, 3, 5, 10)
RANK_DEPTH = 10  # passages fetched per query for the ranking metrics
SUPPORT_THRESHOLD = 0.8  # share of a quoted sentence's content words that its passage must contain
FACTS_OK = 0.5  # key-fact recall an answer needs to count as correct

# metric -> +1 when higher is better, -1 when lower is better; gated against a baseline
GATED = {"hit@5": 1, "mrr@10": 1, "key_fact_recall": 1, "abstention_recall": 1, "over_abstention": -1}
GATE_TOLERANCE = 0.02

_STOP_WORDS = frozenset(
    re.findall(
        r"\w+",
        "the and for are but not you all any can had her was one our out has have his how its may new now "
        "who did get let put say she too use with this that from they will would there their what when "
        "which while where into than then them these those been being does such only also more most other "
        "some each very just your over under after before about",
    )
)


def contains_evidence(text: str, evidence: Sequence[str]) -> bool:
    """Whether `text` holds one of the evidence strings (whitespace and case normalised)."""
    body = normalise(text)
    return any(normalise(e) in body for e in evidence if e.strip())


def grade(text: str, source_path: str, evidence: Sequence[str], sources: Sequence[str]) -> int:
    """2 if the passage contains an evidence string, 1 if it is from a source document, else 0."""
    if contains_evidence(text, evidence):
        return 2
    return 1 if source_path in sources else 0


def first_rank(grades: Sequence[int], at_least: int = 2) -> int | None:
    """1-based rank of the first passage graded `at_least` or more; None when there is none."""
    return next((i for i, g in enumerate(grades, start=1) if g >= at_least), None)


def hit(rank: int | None, k: int) -> float:
    return 1.0 if rank is not None and rank <= k else 0.0


def reciprocal_rank(rank: int | None, k: int = RANK_DEPTH) -> float:
    return 1.0 / rank if rank is not None and rank <= k else 0.0


def ndcg(grades: Sequence[int], k: int = RANK_DEPTH) -> float:
    """Graded nDCG@k; the ideal list assumes one grade-2 passage exists even if none was retrieved."""
    ideal = sorted([*grades, *([2] if 2 not in grades else [])], reverse=True)
    best = _dcg(ideal[:k])
    return _dcg(grades[:k]) / best if best else 0.0


def _dcg(grades: Sequence[int]) -> float:
    return sum(g / math.log2(i + 1) for i, g in enumerate(grades, start=1))


def facts_found(answer: str, facts: Sequence[Sequence[str]]) -> tuple[bool, ...]:
    """For each fact group, whether any of its aliases occurs in the answer."""
    body = normalise(answer)
    return tuple(any(normalise(alias) in body for alias in group if alias.strip()) for group in facts)


def key_fact_recall(found: Sequence[bool]) -> float | None:
    """Share of fact groups found; None when the item has no facts to find."""
    return sum(found) / len(found) if found else None


def source_precision(cited_sources: Sequence[str], sources: Sequence[str]) -> float | None:
    """Share of cited passages from the documents that answer the item: an answer padded with lines from
    unrelated pages scores low here even when its key facts are all present."""
    if not cited_sources:
        return None
    return sum(1 for path in cited_sources if path in sources) / len(cited_sources)


def supports(passage: str, sentence: str, threshold: float = SUPPORT_THRESHOLD) -> bool:
    """Lexical support: the passage holds at least `threshold` of the sentence's content words."""
    wanted = _content_words(sentence)
    if not wanted:
        return normalise(sentence) in normalise(passage)
    return len(wanted & _content_words(passage)) / len(wanted) >= threshold


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", normalise(text)) if len(w) > 2 and w not in _STOP_WORDS}


def citation_ok(passage: str, quotes: Sequence[str], evidence: Sequence[str]) -> bool:
    """A citation is precise when its passage contains the evidence or supports every quoted sentence."""
    if contains_evidence(passage, evidence):
        return True
    return bool(quotes) and all(supports(passage, q) for q in quotes)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class QuestionScore:
    """Everything the summaries need about one golden question under one retrieval mode."""

    id: str
    tags: tuple[str, ...]
    sources: tuple[str, ...]
    answerable: bool
    followup: bool
    grades: tuple[int, ...]  # top-10 grades for the system's query (rewritten for follow-ups)
    raw_grades: tuple[int, ...]  # follow-ups only: top-10 grades for the raw question alone
    facts_found: tuple[bool, ...]
    citations_ok: tuple[bool, ...]
    abstained: bool
    latency_ms: float
    context_chars: int  # characters of the top-k passages the answerer is given
    answer_chars: int  # characters of the answer text
    cited_sources: tuple[str, ...] = ()  # source path of each cited passage, in marker order
    cautioned: bool = False  # answered with the low-confidence note (`rag.abstention.answer_confidence`)

    @property
    def part(self) -> str:
        return part_of(self.id)

    @property
    def rank(self) -> int | None:
        return first_rank(self.grades)

    @property
    def doc_rank(self) -> int | None:
        return first_rank(self.grades, at_least=1)

    @property
    def raw_rank(self) -> int | None:
        return first_rank(self.raw_grades) if self.followup else None

    @property
    def key_fact_recall(self) -> float | None:
        return key_fact_recall(self.facts_found)

    @property
    def facts_ok(self) -> bool:
        recall = self.key_fact_recall
        return recall is None or recall >= FACTS_OK

    @property
    def citation_precision(self) -> float | None:
        return sum(self.citations_ok) / len(self.citations_ok) if self.citations_ok else None

    @property
    def source_precision(self) -> float | None:
        """Share of the answer's cited passages that come from one of the item's source documents."""
        return source_precision(self.cited_sources, self.sources) if self.answerable and not self.abstained else None

    @property
    def passed(self) -> bool:
        """Answerable: evidence in the top 5, answered, key facts present. Unanswerable: abstained."""
        if not self.answerable:
            return self.abstained
        return hit(self.rank, 5) == 1.0 and not self.abstained and self.facts_ok

    def outcome(self) -> dict[str, Any]:
        """The per-question record a later run's baseline comparison reads."""
        return {
            "part": self.part,
            "pass": self.passed,
            "hit@5": bool(hit(self.rank, 5)) if self.answerable else None,
            "facts_ok": self.facts_ok if self.answerable else None,
            "abstained": self.abstained,
        }


def summarise(scores: Sequence[QuestionScore]) -> dict[str, float | int | None]:
    """Flat metrics over a set of questions; a metric with nothing to average over is None."""
    answerable = [s for s in scores if s.answerable]
    unanswerable = [s for s in scores if not s.answerable]
    followups = [s for s in answerable if s.followup]
    metrics: dict[str, float | int | None] = {}
    for k in HIT_KS:
        metrics[f"hit@{k}"] = _mean(hit(s.rank, k) for s in answerable)
    metrics["mrr@10"] = _mean(reciprocal_rank(s.rank) for s in answerable)
    metrics["ndcg@10"] = _mean(ndcg(s.grades) for s in answerable)
    metrics["key_fact_recall"] = _mean(r for s in answerable if (r := s.key_fact_recall) is not None)
    metrics["citation_precision"] = _mean(p for s in scores if (p := s.citation_precision) is not None)
    metrics["source_precision"] = _mean(p for s in answerable if (p := s.source_precision) is not None)
    metrics["abstention_recall"] = _mean(float(s.abstained) for s in unanswerable)
    metrics["over_abstention"] = _mean(float(s.abstained) for s in answerable)
    metrics["answerable_accuracy"] = _mean(float(not s.abstained and s.facts_ok) for s in answerable)
    # The caution's worth: of the answers it marks, the share that fail (an unanswerable question answered, or an
    # answerable one that misses), and of the answers that fail, the share it marks.
    answered = [s for s in scores if not s.abstained]
    metrics["caution_precision"] = _mean(float(not s.passed) for s in answered if s.cautioned)
    metrics["caution_recall"] = _mean(float(s.cautioned) for s in answered if not s.passed)
    latencies = [s.latency_ms for s in scores]
    metrics["p50_ms"] = percentile(latencies, 50)
    metrics["p95_ms"] = percentile(latencies, 95)
    metrics["avg_context_chars"] = _mean(float(s.context_chars) for s in scores)
    metrics["answer_chars_p50"] = percentile([float(s.answer_chars) for s in answerable if not s.abstained], 50)
    for k in HIT_KS:
        metrics[f"doc_hit@{k}"] = _mean(hit(s.doc_rank, k) for s in answerable)
    metrics["doc_mrr@10"] = _mean(reciprocal_rank(s.doc_rank) for s in answerable)
    metrics["followup_hit@5"] = _mean(hit(s.rank, 5) for s in followups)
    metrics["followup_raw_hit@5"] = _mean(hit(s.raw_rank, 5) for s in followups)
    metrics["followup_mrr@10"] = _mean(reciprocal_rank(s.rank) for s in followups)
    metrics["followup_raw_mrr@10"] = _mean(reciprocal_rank(s.raw_rank) for s in followups)
    metrics["questions"] = len(scores)
    metrics["answerable"] = len(answerable)
    metrics["unanswerable"] = len(unanswerable)
    metrics["followups"] = len(followups)
    return metrics


def summarise_parts(scores: Sequence[QuestionScore]) -> dict[str, dict[str, float | int | None]]:
    """`summarise` over each part of the tune/test split: {"tune": {...}, "test": {...}}."""
    return {part: summarise([s for s in scores if s.part == part]) for part in PARTS}


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def regressions(
    old: Mapping[str, Any], new: Mapping[str, Any], tolerance: float = GATE_TOLERANCE
) -> list[tuple[str, float, float]]:
    """Gated metrics that moved the wrong way by more than `tolerance`: (name, old, new)."""
    worse = []
    for name, direction in GATED.items():
        before, after = old.get(name), new.get(name)
        if before is None or after is None:
            continue
        if (before - after) * direction > tolerance + 1e-9:
            worse.append((name, before, after))
    return worse


def flips(old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """Question ids that went pass -> fail and fail -> pass, among those present in both runs."""
    common = [qid for qid in new if qid in old]
    broke = [qid for qid in common if old[qid]["pass"] and not new[qid]["pass"]]
    fixed = [qid for qid in common if not old[qid]["pass"] and new[qid]["pass"]]
    return broke, fixed
