"""Latency of `Assistant.ask` on a built index: warm, one question at a time, split by stage.

    .venv/bin/python benchmarks/ask.py [--index index] [--golden evals/golden.jsonl] [--rounds 2]

Targets: p50 <= 30 ms (issue 17: the learned ranking and evidence units may not cost more; issue 3 asked 25) and
p95 <= 60 ms on 2 cores, extractive answerer, hybrid retrieval. The targets are judged on the first round, where
every question is new to the process; later rounds ask the same questions again, whose vectors the query encoder
remembers (`rag.embedding.QueryEncoder`), and are reported apart.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from evals.golden import load_golden
from rag import Assistant, Settings

REPO = Path(__file__).resolve().parents[1]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=REPO / "index")
    parser.add_argument("--golden", type=Path, default=REPO / "evals" / "golden.jsonl")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--retrieval", default="hybrid")
    args = parser.parse_args()

    assistant = Assistant.from_settings(Settings.from_env(index_dir=args.index, answerer="extractive"))
    questions = load_golden(args.golden)
    for number in range(5):  # warm-up, with questions of no round: first calls pay for lazy allocations
        assistant.ask(f"warm-up question {number}: why does my consumer lag grow?", retrieval=args.retrieval)
    rounds: list[tuple[list[float], dict[str, list[float]]]] = []
    for _ in range(args.rounds):
        totals: list[float] = []
        stages: dict[str, list[float]] = {}
        for item in questions:
            answer = assistant.ask(item.question, list(item.history), retrieval=args.retrieval)
            totals.append(answer.timings_ms["total"])
            for stage, ms in answer.timings_ms.items():
                stages.setdefault(stage, []).append(ms)
        rounds.append((totals, stages))
    print(
        f"ask latency, {len(questions)} golden questions x {args.rounds} rounds, index {assistant.status.version} "
        f"({assistant.status.chunks} chunks), {args.retrieval}, extractive"
    )
    for number, (_, stages) in enumerate(rounds, start=1):
        label = "first asks" if number == 1 else "asked again"
        print(f"\nround {number} ({label})\n{'stage':<14}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}")
        for stage, values in stages.items():
            print(
                f"{stage:<14}{percentile(values, 0.5):>10.2f}{percentile(values, 0.95):>10.2f}"
                f"{statistics.fmean(values):>10.2f}"
            )
    first_asks = rounds[0][0]
    p50, p95 = percentile(first_asks, 0.5), percentile(first_asks, 0.95)
    print(
        f"\nfirst asks: total p50 {p50:.1f} ms (target <= 30: {'met' if p50 <= 30 else 'NOT met'}), "
        f"p95 {p95:.1f} ms (target <= 60: {'met' if p95 <= 60 else 'NOT met'})"
    )
    if len(rounds) > 1:
        again = [ms for round_totals, _ in rounds[1:] for ms in round_totals]
        print(f"asked again: total p50 {percentile(again, 0.5):.1f} ms, p95 {percentile(again, 0.95):.1f} ms")


if __name__ == "__main__":
    main()
