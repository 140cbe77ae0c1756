"""Latency of `Assistant.ask` on a built index: warm, one question at a time, split by stage.

    .venv/bin/python benchmarks/ask.py [--index index] [--golden evals/golden.jsonl] [--rounds 3]

Targets: p50 <= 30 ms (issue 17: the learned ranking and evidence units may not cost more; issue 3 asked 25) and
p95 <= 60 ms on 2 cores, extractive answerer, hybrid retrieval.
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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--retrieval", default="hybrid")
    args = parser.parse_args()

    assistant = Assistant.from_settings(Settings.from_env(index_dir=args.index, answerer="extractive"))
    questions = load_golden(args.golden)
    for item in questions[:5]:  # warm-up: first calls pay for lazy allocations
        assistant.ask(item.question, list(item.history), retrieval=args.retrieval)
    totals: list[float] = []
    stages: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for item in questions:
            answer = assistant.ask(item.question, list(item.history), retrieval=args.retrieval)
            totals.append(answer.timings_ms["total"])
            for stage, ms in answer.timings_ms.items():
                stages.setdefault(stage, []).append(ms)
    print(
        f"ask latency over {len(totals)} calls ({len(questions)} golden questions x {args.rounds}), "
        f"index {assistant.status.version} ({assistant.status.chunks} chunks), {args.retrieval}, extractive"
    )
    print(f"{'stage':<14}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}")
    for stage, values in stages.items():
        print(
            f"{stage:<14}{percentile(values, 0.5):>10.2f}{percentile(values, 0.95):>10.2f}"
            f"{statistics.fmean(values):>10.2f}"
        )
    p50, p95 = percentile(totals, 0.5), percentile(totals, 0.95)
    print(
        f"\ntotal p50 {p50:.1f} ms (target <= 30: {'met' if p50 <= 30 else 'NOT met'}), "
        f"p95 {p95:.1f} ms (target <= 60: {'met' if p95 <= 60 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
