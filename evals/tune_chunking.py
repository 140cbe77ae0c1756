"""Choose the chunk size on the tuning parts of the golden files.

    python -m evals.tune_chunking --set evals/golden.jsonl seeds /tmp/chunking/seeds \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs /tmp/chunking/docs

For every candidate size, each corpus is ingested in this process (the chunks are the same as with
Spark) into `INDEX-<size>` (an existing index of the same settings is reused); the answer shape is tuned
for that size (`evals.tune_answers.tune`: passages of another size hold other units), and the answerable
tuning questions are asked with it: hit@1, mrr@10, key-fact recall, answerable accuracy and the median
answer length per golden file. The size with the best mean of key-fact recall and answerable accuracy
over the golden files wins, among sizes whose every median answer stays under `MAX_MEDIAN_CHARS`. The
shipped ranking and abstention models score every size (their features are shares and cosines, not
sizes); refit them after changing the size. Test-part ids are never read. Writes
`evals/reports/tune_chunking.md`.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path

from evals.golden import add_set_argument, load_golden, select_part
from evals.metrics import summarise
from evals.runner import evaluate, score
from evals.tune_answers import MAX_MEDIAN_CHARS, tune, tuning_sets
from rag import Assistant, IngestConfig, Settings, run_ingest

SIZES = (900, 1100, 1300)  # 650 was tried too: worse than 900 on both tuning parts
OVERLAP_SHARE = 1 / 6  # the overlap scales with the size (217 of 1300)
K = 5
REPORT = Path("evals/reports/tune_chunking.md")
SHOWN = ("hit@1", "mrr@10", "key_fact_recall", "answerable_accuracy", "answer_chars_p50")


def index_for(corpus: Path, prefix: Path, size: int) -> Path:
    """Ingest `corpus` at `size` into `prefix-size` (incremental: an unchanged index is kept as it is)."""
    settings = Settings.from_env(chunk_size=size, chunk_overlap=round(size * OVERLAP_SHARE))
    index = Path(f"{prefix}-{size}")
    run_ingest([corpus], index, IngestConfig.from_settings(settings), flat_index_max=settings.flat_index_max)
    return index


def measure(golden: Path, corpus: Path, index: Path, shape: dict[str, float]) -> dict[str, float]:
    """The tuning part's metrics on `index`, with the shipped models and the answer `shape`."""
    items = [i for i in select_part(load_golden(golden, corpus), "tune") if i.answerable]
    assistant = Assistant.from_settings(Settings.from_env(index_dir=index, **shape))
    metrics = summarise([score(trial, K) for trial in evaluate(assistant, items, "hybrid", K)])
    return {name: float(metrics[name] or 0.0) for name in SHOWN}


def choose(table: dict[int, list[dict[str, float]]]) -> int:
    """The size with the best mean of key-fact recall and accuracy, among those with concise answers."""

    def quality(size: int) -> float:
        return statistics.fmean((m["key_fact_recall"] + m["answerable_accuracy"]) / 2 for m in table[size])

    concise = [s for s in table if all(m["answer_chars_p50"] < MAX_MEDIAN_CHARS for m in table[s])]
    return max(concise or list(table), key=lambda s: (quality(s), -abs(s - 900)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(parser)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="chunk sizes to try (characters)")
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    table: dict[int, list[dict[str, float]]] = {}
    shapes: dict[int, dict[str, float]] = {}
    for size in args.sizes:
        sets = [(golden, corpus, index_for(corpus, prefix, size)) for golden, corpus, prefix in args.set]
        shapes[size], _, _ = tune(tuning_sets(sets))
        table[size] = [measure(*each, shapes[size]) for each in sets]
        print(f"size {size}, answer shape {shapes[size]}: " + "; ".join(_row(m) for m in table[size]))
    best = choose(table)
    names = [str(golden) for golden, _, _ in args.set]
    lines = [
        "# Chunk size (tuning parts only)",
        "",
        f"Answerable tuning questions, shipped ranking and abstention models, top {K} passages per answer, "
        "the answer shape tuned for each size (below the table). "
        f"Overlap = size / {round(1 / OVERLAP_SHARE)}. Chosen: the best mean of key-fact recall and accuracy "
        f"among sizes whose median answer is under {MAX_MEDIAN_CHARS} characters.",
        "",
        "| size | golden file | " + " | ".join(SHOWN) + " |",
        "|---|---|" + "---|" * len(SHOWN),
        *(
            f"| {size} | {name} | {_cells(m)} |"
            for size, rows in table.items()
            for name, m in zip(names, rows, strict=True)
        ),
        "",
        *(f"- answer shape at {size}: {shape}" for size, shape in shapes.items()),
        "",
        f"Chosen chunk size: {best} (overlap {round(best * OVERLAP_SHARE)}), answer shape {shapes[best]}.",
        "",
    ]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines), encoding="utf-8")
    print(f"chunk size {best}, answer shape {shapes[best]}; wrote {args.report}")
    return 0


def _cells(metrics: dict[str, float]) -> str:
    return " | ".join(f"{metrics[k]:.0f}" if k == "answer_chars_p50" else f"{metrics[k]:.3f}" for k in SHOWN)


def _row(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in metrics.items())


if __name__ == "__main__":
    raise SystemExit(main())
