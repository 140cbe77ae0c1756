"""Choose the extractive answer's shape settings on the tuning parts of the golden files.

    python -m evals.tune_answers --set evals/golden.jsonl seeds index \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs /tmp/kafka-docs-index \\
        [--half-indexes SEEDS_H0 SEEDS_H1 DOCS_H0 DOCS_H1]

Coordinate search over the `AnswerShape` settings (units per answer, the relative cutoff, novelty, the
unit score's weights, the score the best unit of one of several asks needs to be held, and the rendered
answer's character budget `answer_max_chars`): each setting in turn takes the value that maximises key-fact
recall on the answerable tuning questions while every golden file's median answer stays under
`MAX_MEDIAN_CHARS`; two rounds. Recall within `RECALL_TIE` is a tie, which source precision (the share of
cited passages from the item's source documents) breaks: a setting that pads answers with lines from
unrelated pages loses it. `--only NAME ...` searches those settings alone, the others kept as they are.
With `--half-indexes` each question is asked of the index whose embedding adapter did not see it
(`evals/held_out_tuning.py`): a bound on a unit's cosine needs that, since on the served index a tuning
question's cosines are in-sample, higher than a new question's. Test-part ids are never read.
Prints the chosen values and writes `evals/reports/tune_answers.md`.

`--check` asks first whether the search's choices hold for questions it did not search on: the answerable
tuning questions are split in two by a second hash of the id (`split_half`, independent of the adapter
halves); the search runs on each half from the current settings, and its choice is scored on the other half
beside the current settings (`evals/reports/tune_answers_check.md`). Copy chosen values into
`rag/settings.py` only when the check's choices beat the current settings on the unsearched half both ways:
with sixteen settings and ~380 questions a coordinate search also fits noise (2026-11-28: +0.019 and +0.009
key-fact recall on the halves it searched, -0.031 and -0.010 on the other ones).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evals.fit_embedding import add_half_indexes_argument, half, half_index_pairs
from evals.golden import GoldenItem, add_set_argument, load_golden, select_part
from evals.metrics import facts_found, source_precision
from rag import Assistant, Settings

# Facts count only in concise answers: the median answer must stay under 900 characters on new questions,
# and on the Kafka docs the test part's median ran 31-37 characters above the tuning part's (two sessions).
MAX_MEDIAN_CHARS = 860
GRID: dict[str, tuple[float, ...]] = {
    "max_units_fact": (2, 3, 4, 5, 6, 8),
    "max_units_troubleshoot": (3, 4, 5, 6, 8),
    "unit_relative_cutoff": (0.1, 0.25, 0.4, 0.6, 0.8),
    "unit_min_novelty": (0.2, 0.35, 0.5, 0.7),
    "unit_overlap_weight": (0.0, 0.15, 0.3, 0.6),
    "unit_identifier_weight": (0.0, 0.05, 0.1, 0.2),
    "unit_rank_weight": (0.0, 0.15, 0.3, 0.5, 0.8),
    "unit_neighbour_weight": (0.0, 0.05, 0.1, 0.2),
    "unit_new_passage_weight": (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4),
    "unit_echo_weight": (0.0, 0.1, 0.3, 0.5),
    "unit_echo_share": (0.6, 0.8, 0.9, 1.01),  # 1.01: never
    "unit_action_weight": (0.0, 0.05, 0.1, 0.2, 0.3),
    "unit_ask_min": (0.6, 0.7, 0.8, 0.9, 1.0, 9.0),  # 9.0: never
    "unit_floor": (0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45),
    "answer_max_chars": (850, 900, 925, 950, 1000, 1050),  # the rendered answer's bound, markers and headings included
    "related_settings_max": (0, 1, 2, 3, 4),
    "related_settings_depth": (2, 3, 5, 8),
    "related_settings_max_chars": (600, 700, 800, 860, 950),
}
ROUNDS = 2
# Key-fact recall differences this small are about one fact of one answer among the ~380 answerable tuning
# questions: a tie, broken by source precision (`better`).
RECALL_TIE = 0.002
REPORT = Path("evals/reports/tune_answers.md")
CHECK_REPORT = Path("evals/reports/tune_answers_check.md")


@dataclass(frozen=True)
class Result:
    recall: float  # mean key-fact recall of the answerable tuning questions
    precision: float  # mean source precision of their answers (reported, not optimised)
    median_chars: float  # the longest of the golden files' median answer lengths


# One golden file's answerable tuning questions, each with the assistant it is asked of: the served index's for
# all of them, or with `--half-indexes` the one whose embedding adapter did not see it.
TuningSet = Sequence[tuple[Assistant, list[GoldenItem]]]


def score(sets: Sequence[TuningSet], values: dict[str, float]) -> Result:
    """Key-fact recall, source precision and median answer length of answerable tuning questions under `values`."""
    recalls: list[float] = []
    precisions: list[float] = []
    medians: list[float] = []
    for tuning_set in sets:
        lengths: list[int] = []
        for assistant, items in tuning_set:
            tuned = assistant.with_settings(**values)
            for item in items:
                answer = tuned.ask(item.question, item.history)
                found = facts_found(answer.text, item.facts)
                recalls.append(sum(found) / len(found) if found else 1.0)
                precision = source_precision([c.passage.source_path for c in answer.citations], item.sources)
                if not answer.abstained and precision is not None:
                    precisions.append(precision)
                    lengths.append(len(answer.text))
        medians.append(statistics.median(lengths) if lengths else 0.0)
    return Result(
        statistics.fmean(recalls),
        statistics.fmean(precisions) if precisions else 0.0,
        max(medians, default=0.0),
    )


def tune(
    sets: Sequence[TuningSet], only: Sequence[str] = (), rounds: int | None = None
) -> tuple[dict[str, float], Result, list[str]]:
    """Coordinate search from the current settings: (chosen values, their result, report table lines).
    A value is taken only when every golden file's median answer stays within `MAX_MEDIAN_CHARS` (`better`)."""
    defaults = sets[0][0][0].settings
    grid = {name: values for name, values in GRID.items() if not only or name in only}
    values: dict[str, float] = {name: getattr(defaults, name) for name in grid}
    best = start = score(sets, values)
    top_recall = best.recall if best.median_chars <= MAX_MEDIAN_CHARS else 0.0
    lines = [f"Start {values}: {_summary(start)}", "",
             "| round | setting | value | key-fact recall | source precision | longest median chars |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for round_number in range(1, (rounds or ROUNDS) + 1):
        for name, choices in grid.items():
            for value in choices:
                trial = {**values, name: value}
                result = score(sets, trial)
                lines.append(
                    f"| {round_number} | {name} | {value} | {result.recall:.3f} | {result.precision:.3f} "
                    f"| {result.median_chars:.0f} |"
                )
                if result.median_chars <= MAX_MEDIAN_CHARS:
                    top_recall = max(top_recall, result.recall)
                if better(result, best, top_recall):
                    values, best = trial, result
    return values, best, lines


def better(result: Result, best: Result, top_recall: float) -> bool:
    """Whether `result` replaces `best`: within the median limit, with more key-fact recall than `RECALL_TIE`
    buys; or with as much (within `RECALL_TIE` of `best`, and of the best recall the search has seen, so that
    ties never walk recall down) and more source precision: a line from an unrelated page costs the user
    reading time, and a difference of one fact in one answer is no evidence either way."""
    if result.median_chars > MAX_MEDIAN_CHARS:
        return False
    if best.median_chars > MAX_MEDIAN_CHARS:
        return True  # from a start over the limit, any shorter setting is a step towards it
    if result.recall > best.recall + RECALL_TIE:
        return True
    tied = abs(result.recall - best.recall) <= RECALL_TIE and result.recall >= top_recall - RECALL_TIE
    return tied and result.precision > best.precision + 1e-9


def tuning_sets(
    sets: Sequence[tuple[Path, Path, Path]], halves: Sequence[tuple[Path, Path]] = (), answerable_only: bool = True
) -> list[TuningSet]:
    """A `TuningSet` per `--set GOLDEN CORPUS INDEX`: its answerable tuning items (all, without
    `answerable_only`) asked of INDEX, or with `halves` (two indexes per set) each asked of
    `halves[set][half(id)]`."""
    tuning = []
    for number, (golden, corpus, index) in enumerate(sets):
        items = [i for i in select_part(load_golden(golden, corpus), "tune") if i.answerable or not answerable_only]
        indexes = list(halves[number]) if halves else [index]
        tuning.append(
            [
                (
                    Assistant.built_with(Settings.from_env(index_dir=path)),
                    [item for item in items if len(indexes) == 1 or half(item.id) == position],
                )
                for position, path in enumerate(indexes)
            ]
        )
    return tuning


def split_half(item_id: str) -> int:
    """0 or 1 by a hash of the id that is independent of `half` (the adapter's split)."""
    return hashlib.sha256(f"split:{item_id}".encode()).digest()[0] & 1


def check(sets: Sequence[TuningSet], only: Sequence[str] = (), rounds: int | None = None) -> list[str]:
    """Report lines: for each `split_half`, the search run on it, and its choice against the current settings
    on the other half, which it did not see."""
    current = {name: getattr(sets[0][0][0].settings, name) for name in GRID if not only or name in only}
    lines = [
        f"Settings searched, at their current values: {current}.",
        "",
        "| searched on | its questions | chosen | searched half: current → chosen | other half: current → chosen |",
        "|---|---|---|---|---|",
    ]
    for searched in (0, 1):
        on, other = split_part(sets, searched), split_part(sets, 1 - searched)
        chosen, _, _ = tune(on, only, rounds)
        changed = {name: value for name, value in chosen.items() if value != current[name]}
        figures = [f"{score(part, current).recall:.3f} → {score(part, chosen).recall:.3f}" for part in (on, other)]
        lines.append(
            f"| half {searched} | {sum(len(items) for s in on for _, items in s)} | {changed or 'no change'} "
            f"| {figures[0]} | {figures[1]} |"
        )
    return lines


def split_part(sets: Sequence[TuningSet], part: int) -> list[TuningSet]:
    """`sets` with only the questions of `split_half` `part`."""
    return [[(assistant, [i for i in items if split_half(i.id) == part]) for assistant, items in s] for s in sets]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(parser)
    add_half_indexes_argument(parser)
    parser.add_argument("--report", type=Path, default=None, help=f"default {REPORT} ({CHECK_REPORT} with --check)")
    parser.add_argument("--only", nargs="+", choices=sorted(GRID), default=(), help="search these settings alone")
    parser.add_argument("--check", action="store_true", help="measure whether the search's choices generalise")
    parser.add_argument("--rounds", type=int, default=None, help=f"rounds of the coordinate search (default {ROUNDS})")
    args = parser.parse_args(argv)
    halves = half_index_pairs(parser, args)
    view = "held out from the embedding adapter (`--half-indexes`)" if halves else "served indexes"
    if args.check:
        report = args.report or CHECK_REPORT
        lines = [
            "# Does the answer-shape search generalise? (tuning parts only)",
            "",
            f"Questions asked of: {view}. Key-fact recall of the answerable tuning questions of each half "
            f"(`split_half`), {args.rounds or ROUNDS} round(s) of the search on one half.",
            "",
            *check(tuning_sets(args.set, halves), args.only, args.rounds),
            "",
        ]
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text("\n".join(lines), encoding="utf-8")
        print("\n".join(lines[4:]) + f"\nwrote {report}")
        return 0
    values, best, table = tune(tuning_sets(args.set, halves), args.only, args.rounds)
    lines = [
        "# Answer shape tuning (tuning parts only)",
        "",
        f"Questions asked of: {view}.",
        "",
        *table,
        "",
        f"Chosen: {values}",
        f"{_summary(best)}.",
        "",
    ]
    report = args.report or REPORT
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("\n".join(lines), encoding="utf-8")
    print(f"chosen {values}: {_summary(best)}; wrote {report}")
    return 0


def _summary(result: Result) -> str:
    return (
        f"key-fact recall {result.recall:.3f}, source precision {result.precision:.3f}, "
        f"longest median answer of a golden file {result.median_chars:.0f} characters"
    )


if __name__ == "__main__":
    raise SystemExit(main())
