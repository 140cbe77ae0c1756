"""Fit the abstention decision (`rag/abstention.json`) on the tuning parts of the golden files.

    python -m evals.fit_abstention --set evals/golden.jsonl seeds index \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs /tmp/kafka-docs-index \\
        [--half-indexes SEEDS_H0 SEEDS_H1 DOCS_H0 DOCS_H1]

Every tuning-part question, answerable or not, gives one row of retrieval features (the assistant's
`inspect`, with the shipped ranker: fit the ranker first). A logistic regression predicts
"answerable"; its regularisation is chosen by stratified cross-validation (the lowest held-out log-loss,
averaged over `REPEATS` shuffles), and the final model's threshold declines at most a budget of answerable
questions on its own scores.
The budget is chosen on the whole procedure (fit, then threshold on own scores), cross-validated over
`REPEATS` shuffles: the best held-out balanced accuracy among the budgets whose held-out over-abstention
stays within `MAX_OVER_ABSTENTION` in every golden file, not only pooled (in-sample scores flatter a model,
so the held-out figures are the ones reported).
Test-part ids are never read. Writes the model file and `evals/reports/fit_abstention.md`; the new model has no
caution threshold (its scores are not the old model's): re-run `evals/fit_caution.py` after it.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.model_selection import StratifiedKFold

from evals.fit_embedding import add_half_indexes_argument, half, half_index_pairs
from evals.golden import add_set_argument, load_golden, select_part
from rag import Assistant, LinearModel, Settings, data_hash, model_paths, unfitted_abstention

# Below issue 17's 0.03 target: held-out over-abstention on the tuning parts under-estimated the docs test
# part in two refits (0.015 against 0.045, then 0.029 against 0.075; twenty-fifth and twenty-sixth sessions).
MAX_OVER_ABSTENTION = 0.02
REGULARISATION = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
# Share of answerable tuning questions the final threshold may decline. Steps of 0.0025 below 0.015: on the
# 886-question tuning parts a step of 0.005 is 3-4 answerable questions, and the cap fell between two steps
# (sixtieth session: 0.005 held out 0.012 in the worst golden file, 0.01 held out 0.020).
BUDGETS = (0.0, 0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03, 0.04)
FOLDS = 5
REPEATS = 5  # shuffles of the folds: one shuffle's held-out over-abstention was 0.005 off the mean of ten
REPORT = Path("evals/reports/fit_abstention.md")
SINGLE_MODES = ("dense", "bm25")


def collect(
    sets: Sequence[tuple[Path, Path, Path]], half_indexes: Sequence[tuple[Path, Path]] = (), mode: str = "hybrid"
) -> tuple[np.ndarray, np.ndarray, list[str], tuple[str, ...], np.ndarray]:
    """One feature row per tuning question, and the number of the set it came from. With `half_indexes` (two
    per set, built with the adapters that `evals/fit_embedding.py --check` fits without each half of the
    questions), a question's row comes from the index whose embedding adapter never saw it
    (`add_half_indexes_argument`): in-sample cosines teach the fit to over-trust the dense score, which shows
    as over-abstention on new questions. `mode` is the retrieval the rows come from."""
    rows, labels, ids, sets_of_rows = [], [], [], []
    names: tuple[str, ...] = ()
    for number, (golden, corpus, index) in enumerate(sets):
        halves = half_indexes[number] if half_indexes else (index, index)
        # The shipped model is not read: its features may be the ones this fit is to replace.
        assistants = [Assistant.built_with(Settings.from_env(index_dir=path), unfitted_abstention()) for path in halves]
        for item in select_part(load_golden(golden, corpus), "tune"):
            assistant = assistants[half(item.id)]
            inspection = assistant.inspect(item.question, item.history, k=assistant.settings.top_k, mode=mode)
            names = inspection.abstention_features
            rows.append(inspection.abstention)
            labels.append(1 if item.answerable else 0)
            ids.append(item.id)
            sets_of_rows.append(number)
    return np.asarray(rows, dtype=np.float64), np.asarray(labels), ids, names, np.asarray(sets_of_rows)


def threshold_for(scores: np.ndarray, labels: np.ndarray, max_over: float) -> tuple[float, float, float]:
    """(threshold, abstention recall, over-abstention): the highest threshold within the over-abstention budget."""
    answerable = np.sort(scores[labels == 1])
    allowed = int(np.floor(max_over * len(answerable)))  # answerable questions we may decline
    threshold = float(answerable[allowed]) - 1e-9 if len(answerable) else 0.0
    over = float(np.mean(scores[labels == 1] < threshold)) if len(answerable) else 0.0
    recall = float(np.mean(scores[labels == 0] < threshold)) if (labels == 0).any() else 0.0
    return threshold, recall, over


@dataclass(frozen=True)
class HeldOut:
    """What the whole procedure (fit, then threshold on own scores) does to questions it never saw."""

    recall: float  # share of unanswerable questions declined
    over: float  # share of answerable questions declined, all golden files pooled
    worst_over: float  # the same in the golden file where it is highest


def cross_validated_procedure(
    x: np.ndarray, y: np.ndarray, regularisation: float, budget: float, sets: np.ndarray | None = None
) -> HeldOut:
    """Held-out figures of the whole procedure with `budget`, averaged over `REPEATS` shuffles of the folds.
    In-sample scores flatter the model, so held-out over-abstention comes out above the budget; `sets`
    (each row's golden file) gives the worst file's figure: a pooled figure hid a corpus above the target."""
    sets = np.zeros(len(y), dtype=int) if sets is None else sets
    recall, over, per_set = [], [], []
    for repeat in range(REPEATS):
        declined = np.zeros(len(y), dtype=bool)
        for train, test in StratifiedKFold(n_splits=FOLDS, shuffle=True, random_state=7 + repeat).split(x, y):
            model = _fit(x[train], y[train], regularisation)
            threshold, _, _ = threshold_for(model.scores(x[train]), y[train], budget)
            declined[test] = model.scores(x[test]) < threshold
        recall.append(declined[y == 0].mean())
        over.append(declined[y == 1].mean())
        per_set.append([declined[(y == 1) & (sets == s)].mean() for s in np.unique(sets[y == 1])])
    return HeldOut(float(np.mean(recall)), float(np.mean(over)), float(np.max(np.mean(per_set, axis=0))))


def cross_validated_scores(x: np.ndarray, y: np.ndarray, regularisation: float, repeat: int = 0) -> np.ndarray:
    """Each question's log-odds from a model fitted without its fold; `repeat` picks the shuffle of the folds."""
    scores = np.zeros(len(y))
    for train, test in StratifiedKFold(n_splits=FOLDS, shuffle=True, random_state=7 + repeat).split(x, y):
        model = _fit(x[train], y[train], regularisation)
        scores[test] = model.scores(x[test])
    return scores


def cross_validated_log_loss(x: np.ndarray, y: np.ndarray, regularisation: float) -> float:
    """Held-out log-loss of the fit, each class weighted as the fit weighs it (`class_weight="balanced"`),
    averaged over `REPEATS` shuffles of the folds. A proper score of every question's probability: the
    unanswerable questions declined at a fixed over-abstention move by whole questions (one is 0.007 of
    149), and that count chose C 0.01 over 0.3 by two questions with features that share a decisive
    signal, shrinking its weight until "Does Redpanda honour …?" was answered (forty-third session)."""
    weights = np.where(y == 1, len(y) / (2 * max(int(y.sum()), 1)), len(y) / (2 * max(int((y == 0).sum()), 1)))
    losses = []
    for repeat in range(REPEATS):
        probabilities = 1.0 / (1.0 + np.exp(-cross_validated_scores(x, y, regularisation, repeat)))
        losses.append(log_loss(y, probabilities, sample_weight=weights, labels=[0, 1]))
    return float(np.mean(losses))


def _fit(x: np.ndarray, y: np.ndarray, regularisation: float, names: Sequence[str] = ()) -> LinearModel:
    mean = x.mean(axis=0)
    scale = np.where(x.std(axis=0) > 1e-9, x.std(axis=0), 1.0)
    model = LogisticRegression(C=regularisation, class_weight="balanced", max_iter=2000)
    model.fit((x - mean) / scale, y)
    return LinearModel(
        name="abstention",
        features=tuple(names) or tuple(f"f{i}" for i in range(x.shape[1])),
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        weights=tuple(float(v) for v in model.coef_[0]),
        bias=float(model.intercept_[0]),
    )


def choose_budget(procedure: dict[float, HeldOut]) -> float:
    """The budget whose held-out (abstention recall - over-abstention) is best among those that keep every
    golden file's held-out over-abstention within `MAX_OVER_ABSTENTION`: balanced accuracy alone chose
    budgets whose held-out over-abstention, 0.038-0.043, missed the target. None within: the smallest.
    Ties go to the smaller."""
    within = [b for b in procedure if procedure[b].worst_over <= MAX_OVER_ABSTENTION] or [min(procedure)]
    return max(within, key=lambda b: (procedure[b].recall - procedure[b].over, -b))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(parser)
    parser.add_argument("--out", type=Path, default=model_paths()["abstention"], help="model file to write")
    parser.add_argument("--report", type=Path, default=REPORT)
    add_half_indexes_argument(parser)
    args = parser.parse_args(argv)
    golden_sets, halves = [tuple(s) for s in args.set], half_index_pairs(parser, args)
    x, y, ids, names, sets = collect(golden_sets, halves)
    table = {}
    for c in REGULARISATION:
        scores = cross_validated_scores(x, y, c)
        table[c] = (
            roc_auc_score(y, scores),
            *threshold_for(scores, y, MAX_OVER_ABSTENTION),
            cross_validated_log_loss(x, y, c),
        )
    best = min(REGULARISATION, key=lambda c: table[c][4])
    _, _, recall, over, _ = table[best]
    model = _fit(x, y, best, names)
    # The threshold is set on the final model's own scores: with strong regularisation its log-odds are on
    # another scale than the cross-validation models' (more data, larger weights), so their threshold
    # would not transfer. Its budget is chosen on the whole procedure, cross-validated.
    procedure = {b: cross_validated_procedure(x, y, best, b, sets) for b in BUDGETS}
    budget = choose_budget(procedure)
    threshold, _, _ = threshold_for(model.scores(x), y, budget)
    # A single retriever's five passages score lower than the hybrid's: the same model, its own threshold at the
    # same budget, on that mode's features of the same questions.
    by_mode = {}
    for mode in SINGLE_MODES:
        x_mode, y_mode, *_ = collect(golden_sets, halves, mode)
        by_mode[mode] = threshold_for(model.scores(x_mode), y_mode, budget)
    training = {
        "data": data_hash([ids, y.tolist()]),
        "questions": len(y),
        "unanswerable": int((y == 0).sum()),
        "C": best,
        "max_over_abstention": MAX_OVER_ABSTENTION,
        "cv": {"abstention_recall": recall, "over_abstention": over, "log_loss": table[best][4]},
        "threshold_budget": budget,
        "procedure_cv": dataclasses.asdict(procedure[budget]),
        "sets": [str(s[0]) for s in args.set],
        "features_from_held_out_adapters": bool(args.half_indexes),
    }
    mode_thresholds = {mode: found[0] for mode, found in by_mode.items()}
    model = dataclasses.replace(model, threshold=threshold, mode_thresholds=mode_thresholds, training=training)
    args.out.write_text(model.to_json(), encoding="utf-8")
    lines = [
        "# Abstention fit (tuning parts only)",
        "",
        f"Tuning questions: {len(y)} ({int((y == 0).sum())} unanswerable). C chosen on cross-validated "
        f"scores: the lowest log-loss ({REPEATS} shuffles of {FOLDS} folds). Recall and over-abstention at "
        f"the threshold that keeps the cross-validated over-abstention at or under {MAX_OVER_ABSTENTION} are "
        f"shown for comparison; the threshold shipped is chosen below."
        + (
            " Each question's features come from an index whose embedding adapter was fitted without it "
            "(`--half-indexes`)."
            if args.half_indexes
            else ""
        ),
        "",
        "| C | cross-validated log-loss | AUC | abstention recall | over-abstention |",
        "|---|---|---|---|---|",
        *(f"| {c} | {v[4]:.4f} | {v[0]:.3f} | {v[2]:.3f} | {v[3]:.3f} |" for c, v in table.items()),
        "",
        f"Chosen C = {best}. The threshold is set on the final model's own scores, declining at most a share "
        f"(budget) of the answerable tuning questions; the whole procedure cross-validated ({FOLDS} folds, "
        f"{REPEATS} shuffles), per budget; chosen: the best balanced accuracy with every golden file's "
        f"over-abstention at or under {MAX_OVER_ABSTENTION}:",
        "",
        "| budget | held-out abstention recall | held-out over-abstention | in the worst golden file |",
        "|---|---|---|---|",
        *(f"| {b} | {h.recall:.3f} | {h.over:.3f} | {h.worst_over:.4f} |" for b, h in procedure.items()),
        "",
        f"Chosen budget {budget}: threshold {threshold:.3f} on the final model's log-odds of answerable.",
        "",
        "A single retriever (`--retrieval dense|bm25`) gets its own threshold at the same budget, on the same "
        "model's scores of its own passages for the same questions (in sample):",
        "",
        "| retrieval | threshold | abstention recall | over-abstention |",
        "|---|---|---|---|",
        *(f"| {mode} | {t:.3f} | {r:.3f} | {o:.3f} |" for mode, (t, r, o) in by_mode.items()),
        "",
        "| feature | weight (standardised) |",
        "|---|---|",
        *(f"| {n} | {w:+.3f} |" for n, w in zip(names, model.weights, strict=True)),
        "",
    ]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines), encoding="utf-8")
    held_out = procedure[budget]
    print(f"abstention: C={best}, budget {budget}, threshold {threshold:.3f}, held-out recall {held_out.recall:.3f}, "
          f"over-abstention {held_out.over:.3f} (worst golden file {held_out.worst_over:.3f}); wrote {args.out}, "
          f"{args.report}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
