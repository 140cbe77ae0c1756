"""Score the tuning parts as new questions: each asked of an index whose embedding adapter never saw it.

    python -m evals.held_out_tuning --set evals/golden.jsonl seeds <seeds index> \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs <docs index> \\
        --half-indexes SEEDS_H0 SEEDS_H1 DOCS_H0 DOCS_H1

The shipped embedding adapter (`evals/fit_embedding.py`) was fitted on every answerable tuning question, so on
the served index their cosines are in-sample: a change that trusts the dense score more looks better there
than it is for a new question. The half indexes are built with the two adapters that `fit_embedding --check`
fits without each half of the tuning questions. Here each tuning question is asked of the one that did not
see it, with the shipped ranker, abstention and answer settings, and scored as `kafka-rag eval` scores it.
The report (`evals/reports/held_out_tuning.md`) gives these figures beside the served index's, per golden
file: the held-out ones are the figures to compare a change to ranking, abstention or answers by. Test-part
ids are never read.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from evals.fit_embedding import add_half_indexes_argument, half, half_index_pairs
from evals.golden import GoldenItem, add_set_argument, load_golden, select_part
from evals.metrics import QuestionScore, summarise
from evals.report import GROUP_METRICS, fmt
from evals.runner import evaluate, score
from rag import Assistant, Settings

REPORT = Path("evals/reports/held_out_tuning.md")
COLUMNS = ("hit@1", *GROUP_METRICS, "answer_chars_p50")


def tuning_scores(
    items: Sequence[GoldenItem], indexes: Sequence[Path], *, own_history: bool = False
) -> list[QuestionScore]:
    """The tuning `items`, scored: with one index, all asked of it; with two, each asked of `indexes[half(id)]`,
    the index built with the adapter fitted without that half. `own_history` as in `evals.runner.evaluate`."""
    scores = []
    for number, index in enumerate(indexes):
        assistant = Assistant.built_with(Settings.from_env(index_dir=index))
        asked = [item for item in items if len(indexes) == 1 or half(item.id) == number]
        k = assistant.settings.top_k
        trials = evaluate(assistant, asked, assistant.settings.retrieval_mode, k, own_history=own_history)
        scores += [score(trial, k) for trial in trials]
    return scores


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(parser)
    add_half_indexes_argument(parser)
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument(
        "--own-history", action="store_true", help="follow-ups after the assistant's own answers (`kafka-rag eval`)"
    )
    args = parser.parse_args(argv)
    if not args.half_indexes:
        parser.error("--half-indexes is required: two indexes per --set")
    rows = []
    for (golden, corpus, index), halves in zip(args.set, half_index_pairs(parser, args), strict=True):
        items = select_part(load_golden(golden, corpus), "tune")  # read once: the evidence check parses sources
        for label, indexes in (("served index (in-sample)", [index]), ("held out", list(halves))):
            metrics = summarise(tuning_scores(items, indexes, own_history=args.own_history))
            rows.append((golden.name, label, metrics))
            figures = ", ".join(f"{name} {fmt(metrics[name], name)}" for name in COLUMNS)
            print(f"{golden.name}, {label}: {metrics['questions']} questions; {figures}")
    _report(args.report, rows)
    print(f"wrote {args.report}")
    return 0


def _report(path: Path, rows: Sequence[tuple[str, str, dict]]) -> None:
    lines = [
        "# Tuning parts, held out from the embedding adapter",
        "",
        "Each tuning question asked of the index built with the `fit_embedding --check` adapter that was fitted "
        "without it (*held out*), and of the served index, whose adapter was fitted on it (*in-sample*). "
        "Shipped ranker, abstention and answer settings.",
        "",
        f"| golden file | index | questions | {' | '.join(COLUMNS)} |",
        f"|---|---|---|{'---|' * len(COLUMNS)}",
        *(
            f"| {name} | {label} | {metrics['questions']} | {' | '.join(fmt(metrics[c], c) for c in COLUMNS)} |"
            for name, label, metrics in rows
        ),
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
