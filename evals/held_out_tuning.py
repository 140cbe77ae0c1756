"""Score the tuning parts as new questions: each asked of an index whose embedding adapter never saw it.

    python -m evals.held_out_tuning --set evals/golden.jsonl seeds <seeds index> \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs <docs index> \\
        --half-indexes SEEDS_H0 SEEDS_H1 DOCS_H0 DOCS_H1

The shipped embedding adapter (`evals/fit_embedding.py`) was fitted on the answerable tuning questions of its
day (`evals/reports/fit_embedding.md` counts them; the tuning parts have grown since), so on the served index
their cosines are in-sample: a change that trusts the dense score more looks better there than it is for a new
question. The half indexes are built with the two adapters that `fit_embedding --check`
fits without each half of the tuning questions. Here each tuning question is asked of the one that did not
see it, with the shipped ranker, abstention and answer settings, and scored as `kafka-rag eval` scores it.
The report (`evals/reports/held_out_tuning.md`) gives these figures beside the served index's, per golden
file: the held-out ones are the figures to compare a change to ranking, abstention or answers by. Only the
adapter is held out: the ranker and the abstention were fitted on every tuning question too, so a refit of
either is in-sample here and looks better than it is for a new question (judge it by its script's
cross-validation, `evals/fit_ranker.py`, `evals/fit_abstention.py`). Test-part ids are never read.

To judge a change question by question: run with `--held-out-only --outcomes before.json` on the old code,
then `--held-out-only --outcomes after.json --against before.json` on the new; the second run prints the
tuning questions that newly pass or fail (`kafka-rag eval`'s pass: evidence in the top five, answered, key
facts found; declined when uncovered) and those whose key facts changed.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evals.fit_embedding import add_half_indexes_argument, half, half_index_pairs
from evals.golden import GoldenItem, add_set_argument, load_golden, select_part
from evals.metrics import QuestionScore, flips, summarise
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
    parser.add_argument("--held-out-only", action="store_true", help="skip the served index's in-sample figures")
    parser.add_argument("--outcomes", type=Path, help="write each held-out question's outcome to this JSON file")
    parser.add_argument("--against", type=Path, help="an earlier --outcomes file: print the questions that changed")
    args = parser.parse_args(argv)
    if not args.half_indexes:
        parser.error("--half-indexes is required: two indexes per --set")
    earlier = _read_outcomes(parser, args.against) if args.against else None
    rows = []
    outcomes: dict[str, dict[str, Any]] = {}
    for (golden, corpus, index), halves in zip(args.set, half_index_pairs(parser, args), strict=True):
        items = select_part(load_golden(golden, corpus), "tune")  # read once: the evidence check parses sources
        runs = [("held out", list(halves))]
        if not args.held_out_only:
            runs.insert(0, ("served index (in-sample)", [index]))
        for label, indexes in runs:
            scores = tuning_scores(items, indexes, own_history=args.own_history)
            metrics = summarise(scores)
            rows.append((golden.name, label, metrics))
            figures = ", ".join(f"{name} {fmt(metrics[name], name)}" for name in COLUMNS)
            print(f"{golden.name}, {label}: {metrics['questions']} questions; {figures}")
        # the held-out run is the last
        outcomes |= {s.id: {**s.outcome(), "key_fact_recall": s.key_fact_recall} for s in scores}
    _report(args.report, rows)
    print(f"wrote {args.report}")
    if args.outcomes:
        args.outcomes.write_text(json.dumps(outcomes, indent=0, sort_keys=True), encoding="utf-8")
        print(f"wrote {args.outcomes}")
    if earlier is not None:
        _print_changes(earlier, outcomes)
    return 0


def _read_outcomes(parser: argparse.ArgumentParser, path: Path) -> dict[str, dict[str, Any]]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        parser.error(f"--against {path}: cannot read it as an --outcomes file ({exc})")


def _print_changes(earlier: Mapping[str, Mapping[str, Any]], now: Mapping[str, Mapping[str, Any]]) -> None:
    """The questions of both runs that newly fail or pass, then those whose key facts alone changed."""
    broke, fixed = flips(earlier, now)
    facts = [
        f"{qid} {earlier[qid]['key_fact_recall']:.2f} -> {now[qid]['key_fact_recall']:.2f}"
        for qid in now
        if qid in earlier
        and qid not in broke + fixed
        and now[qid]["key_fact_recall"] is not None
        and earlier[qid]["key_fact_recall"] is not None
        and now[qid]["key_fact_recall"] != earlier[qid]["key_fact_recall"]
    ]
    print(f"now failing ({len(broke)}): {', '.join(broke) or '-'}")
    print(f"now passing ({len(fixed)}): {', '.join(fixed) or '-'}")
    print(f"key facts changed ({len(facts)}): {', '.join(facts) or '-'}")


def _report(path: Path, rows: Sequence[tuple[str, str, dict]]) -> None:
    lines = [
        "# Tuning parts, held out from the embedding adapter",
        "",
        "Each tuning question asked of the index built with the `fit_embedding --check` adapter that was fitted "
        "without it (*held out*), and of the served index, whose adapter was fitted on the tuning questions of its "
        "day (*in-sample* for those; `evals/reports/fit_embedding.md`). "
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
