"""Choose the extractive answer's shape settings on the tuning parts of the golden files.

    python -m evals.tune_answers --set evals/golden.jsonl seeds index \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs /tmp/kafka-docs-index

Coordinate search over the `AnswerShape` settings (units per answer, the relative cutoff, novelty, the
unit score's weights, the score the best unit of one of several asks needs to be held, and the rendered
answer's character budget `answer_max_chars`): each setting in turn takes the value that maximises key-fact
recall on the answerable tuning questions while every golden file's median answer stays under
`MAX_MEDIAN_CHARS`; two rounds. `--only NAME ...` searches those settings alone, the others kept as they are.
The report also shows source precision (the share of cited passages from the item's source documents), so
a setting that pads answers with lines from unrelated pages is visible. Test-part ids are never read.
Prints the chosen values (copy them into `rag/settings.py`) and writes `evals/reports/tune_answers.md`.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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
    "unit_echo_weight": (0.0, 0.1, 0.3, 0.5),
    "unit_echo_share": (0.6, 0.8, 0.9, 1.01),  # 1.01: never
    "unit_ask_min": (0.6, 0.7, 0.8, 0.9, 1.0, 9.0),  # 9.0: never
    "answer_max_chars": (850, 900, 950, 1000, 1050),  # the rendered answer's bound, markers and headings included
    "related_settings_max": (0, 1, 2, 3, 4),
    "related_settings_depth": (2, 3, 5, 8),
    "related_settings_max_chars": (600, 700, 800, 860, 950),
}
ROUNDS = 2
REPORT = Path("evals/reports/tune_answers.md")


@dataclass(frozen=True)
class Result:
    recall: float  # mean key-fact recall of the answerable tuning questions
    precision: float  # mean source precision of their answers (reported, not optimised)
    median_chars: float  # the longest of the golden files' median answer lengths


def score(assistants: Sequence[tuple[Assistant, list[GoldenItem]]], values: dict[str, float]) -> Result:
    """Key-fact recall, source precision and median answer length of answerable tuning questions under `values`."""
    recalls: list[float] = []
    precisions: list[float] = []
    medians: list[float] = []
    for assistant, items in assistants:
        tuned = assistant.with_settings(**values)
        lengths: list[int] = []
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
    assistants: Sequence[tuple[Assistant, list[GoldenItem]]], only: Sequence[str] = ()
) -> tuple[dict[str, float], Result, list[str]]:
    """Coordinate search from the current settings: (chosen values, their result, report table lines).
    A value is taken only when every golden file's median answer stays within `MAX_MEDIAN_CHARS`."""
    defaults = assistants[0][0].settings
    grid = {name: values for name, values in GRID.items() if not only or name in only}
    values: dict[str, float] = {name: getattr(defaults, name) for name in grid}
    best = start = score(assistants, values)
    lines = [f"Start {values}: {_summary(start)}", "",
             "| round | setting | value | key-fact recall | source precision | longest median chars |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for round_number in range(1, ROUNDS + 1):
        for name, choices in grid.items():
            for value in choices:
                trial = {**values, name: value}
                result = score(assistants, trial)
                lines.append(
                    f"| {round_number} | {name} | {value} | {result.recall:.3f} | {result.precision:.3f} "
                    f"| {result.median_chars:.0f} |"
                )
                within = result.median_chars <= MAX_MEDIAN_CHARS
                # From a start over the limit, any shorter setting is a step towards it.
                if within and (result.recall > best.recall + 1e-9 or best.median_chars > MAX_MEDIAN_CHARS):
                    values, best = trial, result
    return values, best, lines


def tuning_sets(sets: Sequence[tuple[Path, Path, Path]]) -> list[tuple[Assistant, list[GoldenItem]]]:
    """(assistant on the index, answerable tuning items) per `--set GOLDEN CORPUS INDEX`."""
    assistants = []
    for golden, corpus, index in sets:
        items = [i for i in select_part(load_golden(golden, corpus), "tune") if i.answerable]
        assistants.append((Assistant.from_settings(Settings.from_env(index_dir=index)), items))
    return assistants


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(parser)
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--only", nargs="+", choices=sorted(GRID), default=(), help="search these settings alone")
    args = parser.parse_args(argv)
    values, best, table = tune(tuning_sets(args.set), args.only)
    lines = ["# Answer shape tuning (tuning parts only)", "", *table, "", f"Chosen: {values}", f"{_summary(best)}.", ""]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines), encoding="utf-8")
    print(f"chosen {values}: {_summary(best)}; wrote {args.report}")
    return 0


def _summary(result: Result) -> str:
    return (
        f"key-fact recall {result.recall:.3f}, source precision {result.precision:.3f}, "
        f"longest median answer of a golden file {result.median_chars:.0f} characters"
    )


if __name__ == "__main__":
    raise SystemExit(main())
