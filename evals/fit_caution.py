"""Fit where answers get a low-confidence caution (`rag/abstention.json`'s `caution_threshold`) on the tuning parts.

    python -m evals.fit_caution --set evals/golden.jsonl seeds index \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs /tmp/kafka-docs-index \\
        [--half-indexes SEEDS_H0 SEEDS_H1 DOCS_H0 DOCS_H1]

The abstention model declines under its threshold; just over it, answers stand on passages that match the
question in part, and fail about as often as they pass (on the held-out tuning parts, the answers scoring
under +1 log-odds failed 0.54 of the time, 149 answers; over it, about 0.24). Those get an answer with a caution
(`rag.abstention.answer_confidence`).
Every tuning question is asked as `kafka-rag eval` asks it (with `--half-indexes`, of the index whose embedding
adapter never saw it, `evals/held_out_tuning.py`) and graded pass or fail; its score is the abstention fit's
cross-validated one (`evals.fit_abstention.cross_validated_scores` with the shipped model's C, averaged over
its shuffles of the folds), because the shipped model's own scores of its tuning questions are in-sample,
higher than a new question's. Of the answered questions, those scoring under the threshold are marked; the
threshold is the one under which the marked failures outnumber the marked passes the most, so that a mark is
more often right than wrong. None (no caution) when no threshold does that.
The check: the threshold chosen on each half of the questions (`evals.tune_answers.split_half`) is scored on
the other half. Refit after every abstention refit: the threshold is on that model's scores. Writes only
`caution_threshold` (and its figures under `training`) into the model file, and `evals/reports/fit_caution.md`.
Test-part ids are never read: `select_part(..., "tune")`.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evals.fit_abstention import REPEATS, collect, cross_validated_scores
from evals.fit_embedding import add_half_indexes_argument, half_index_pairs
from evals.golden import add_set_argument, load_golden, select_part
from evals.held_out_tuning import tuning_scores
from evals.tune_answers import split_half
from rag import load_abstention, model_paths

REPORT = Path("evals/reports/fit_caution.md")
GRID_STEP = 0.5  # log-odds between the report's rows


@dataclass(frozen=True)
class Answered:
    """One answered tuning question: its cross-validated score and whether its answer failed."""

    id: str
    golden: str
    score: float
    failed: bool


def choose_threshold(answered: Sequence[Answered]) -> float | None:
    """The score under which marking the answers gains the most: marked failures minus marked passes, at its
    peak over every cut between two scores; ties go to the lower cut. None when no cut gains."""
    ordered = sorted(answered, key=lambda a: a.score)
    gain = np.cumsum([1 if a.failed else -1 for a in ordered])
    if not len(gain) or gain.max() <= 0:
        return None
    best = int(np.argmax(gain))  # the first peak: the lower cut
    above = ordered[best + 1].score if best + 1 < len(ordered) else ordered[best].score + 1.0
    return (ordered[best].score + above) / 2


@dataclass(frozen=True)
class Marked:
    """What a threshold marks among answered questions."""

    marked: int
    failed_marked: int
    failures: int
    passes: int

    @property
    def precision(self) -> float:
        """Share of the marked answers that failed."""
        return self.failed_marked / self.marked if self.marked else 0.0

    @property
    def recall(self) -> float:
        """Share of the failed answers that are marked."""
        return self.failed_marked / self.failures if self.failures else 0.0

    @property
    def passes_marked(self) -> float:
        """Share of the passing answers that are marked."""
        return (self.marked - self.failed_marked) / self.passes if self.passes else 0.0


def marked(answered: Sequence[Answered], threshold: float | None) -> Marked:
    under = [a for a in answered if threshold is not None and a.score < threshold]
    failures = sum(a.failed for a in answered)
    return Marked(len(under), sum(a.failed for a in under), failures, len(answered) - failures)


def answered_tuning_questions(
    sets: Sequence[tuple[Path, Path, Path]], regularisation: float, half_indexes: Sequence[tuple[Path, Path]] = ()
) -> list[Answered]:
    """The answered tuning questions of every set, each with its score cross-validated with the abstention fit's
    `regularisation` (its C), and its outcome."""
    x, y, ids, _, _ = collect(sets, half_indexes)
    scores = np.mean([cross_validated_scores(x, y, regularisation, repeat) for repeat in range(REPEATS)], axis=0)
    score_of = dict(zip(ids, scores.tolist(), strict=True))
    answered = []
    for number, (golden, corpus, index) in enumerate(sets):
        items = select_part(load_golden(golden, corpus), "tune")
        indexes = list(half_indexes[number]) if half_indexes else [index]
        for outcome in tuning_scores(items, indexes):
            if not outcome.abstained:
                answered.append(Answered(outcome.id, golden.name, score_of[outcome.id], not outcome.passed))
    return answered


def report_lines(answered: Sequence[Answered], threshold: float | None) -> list[str]:
    lines = [
        "# Caution fit (tuning parts only)",
        "",
        f"Answered tuning questions: {len(answered)} ({sum(a.failed for a in answered)} failing: an answerable "
        "question missing its evidence in the top five or its key facts, or an unanswerable one answered). Each "
        "score is cross-validated (a model fitted without the question's fold); each answer comes from an index "
        "whose embedding adapter never saw the question when `--half-indexes` is given.",
        "",
        "| marked under | answers marked | of them failing | failures marked | passes marked |",
        "|---|---|---|---|---|",
    ]
    scores = [a.score for a in answered]
    low = np.floor(min(scores) / GRID_STEP) * GRID_STEP if scores else 0.0
    high = (threshold if threshold is not None else low) + 4 * GRID_STEP
    for cut in sorted([*np.arange(low + GRID_STEP, high, GRID_STEP), *([threshold] if threshold is not None else [])]):
        m = marked(answered, float(cut))
        chosen = " (chosen)" if cut == threshold else ""
        lines.append(
            f"| {cut:+.2f}{chosen} | {m.marked} | {m.precision:.2f} | {m.recall:.2f} | {m.passes_marked:.3f} |"
        )
    lines += ["", "At the chosen threshold, per golden file:", "", "| golden file | marked | of them failing |"]
    lines.append("|---|---|---|")
    for golden in sorted({a.golden for a in answered}):
        m = marked([a for a in answered if a.golden == golden], threshold)
        lines.append(f"| {golden} | {m.marked} | {m.precision:.2f} |")
    lines += [
        "",
        "Check: chosen on one half of the questions (`split_half`), scored on the other half.",
        "",
        "| chosen on | threshold | marked on the other half | of them failing | failures marked |",
        "|---|---|---|---|---|",
    ]
    for number in (0, 1):
        own = [a for a in answered if split_half(a.id) == number]
        other = [a for a in answered if split_half(a.id) != number]
        cut = choose_threshold(own)
        m = marked(other, cut)
        shown = "none" if cut is None else f"{cut:+.2f}"
        lines.append(f"| half {number} | {shown} | {m.marked} | {m.precision:.2f} | {m.recall:.2f} |")
    chosen = "none: no threshold marks more failures than passes" if threshold is None else f"{threshold:+.3f}"
    return [*lines, "", f"Chosen caution threshold: {chosen}."]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(parser)
    parser.add_argument("--out", type=Path, default=model_paths()["abstention"], help="abstention model file")
    parser.add_argument("--report", type=Path, default=REPORT)
    add_half_indexes_argument(parser)
    args = parser.parse_args(argv)
    model = load_abstention(args.out)
    regularisation = float(model.training.get("C", 1.0))
    answered = answered_tuning_questions([tuple(s) for s in args.set], regularisation, half_index_pairs(parser, args))
    threshold = choose_threshold(answered)
    chosen = marked(answered, threshold)
    figures = {"answered": len(answered), "marked": chosen.marked, "precision": chosen.precision}
    figures |= {"recall": chosen.recall, "passes_marked": chosen.passes_marked}
    model = dataclasses.replace(model, caution_threshold=threshold, training={**model.training, "caution": figures})
    args.out.write_text(model.to_json(), encoding="utf-8")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(report_lines(answered, threshold)) + "\n", encoding="utf-8")
    print(
        f"caution: threshold {threshold}, marks {chosen.marked} of {len(answered)} answered tuning questions, "
        f"{chosen.precision:.2f} of them failing, {chosen.recall:.2f} of the failures; wrote {args.out}, {args.report}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
