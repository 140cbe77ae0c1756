"""Choose `rag.query.CAPITALISED_THROUGHOUT` on the tuning parts' questions, and write its report.

    python -m evals.tune_casing [evals/golden.jsonl evals/golden_kafka_docs.jsonl]

A question typed in capitals, or with every word capitalised as in a title, is read with its prose in lower case
(`rag.query.decased`): its capitals mark no name. Users' own sentences capitalise names, acronyms and a
sentence's first word, so some share of their words begins with a capital; the bound must sit above every share
the users' questions reach and below a whole question in capitals (1.0). It is chosen as the midpoint between
the tuning parts' highest share (questions and the users' turns before them) and 1, to two decimals, so that
neither side is near it. Needs no index. Test-part ids are never read. Prints the choice and writes
`evals/reports/tune_casing.md`.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path

from evals.golden import load_golden, select_part
from rag import CAPITALISED_THROUGHOUT, prose_capitalisation

GOLDEN_FILES = (Path("evals/golden.jsonl"), Path("evals/golden_kafka_docs.jsonl"))
REPORT = Path("evals/reports/tune_casing.md")
SHOWN = 5  # the questions with the highest shares, listed in the report


def shares(files: Sequence[Path]) -> list[tuple[float, str, str]]:
    """(share, id, text) for each tuning-part question and user turn with prose words, highest share first."""
    found = []
    for path in files:
        for item in select_part(load_golden(path), "tune"):
            turns = [t["content"] for t in item.history if t["role"] == "user"] + [item.question]
            for text in turns:
                share = prose_capitalisation(text)
                if share is not None:
                    found.append((share, item.id, text))
    return sorted(found, key=lambda row: -row[0])


def choose(highest: float) -> float:
    return round((highest + 1.0) / 2, 2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", nargs="*", type=Path, default=list(GOLDEN_FILES))
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    found = shares(args.golden)
    values = [share for share, _, _ in found]
    chosen = choose(values[0])
    lines = [
        "# Casing bound (tuning parts only)",
        "",
        f"Questions and users' turns with prose words: {len(found)}, from {', '.join(str(p) for p in args.golden)}. "
        "Share of their plain prose words that begin with a capital (`rag.query.prose_capitalisation`): median "
        f"{statistics.median(values):.3f}, 99th percentile {statistics.quantiles(values, n=100)[98]:.3f}, "
        f"highest {values[0]:.3f}.",
        "",
        "| share | id | text |",
        "|---|---|---|",
        *(f"| {share:.3f} | {item_id} | {' '.join(text.split())[:100]} |" for share, item_id, text in found[:SHOWN]),
        "",
        f"Chosen: {chosen:.2f}, the midpoint between the highest share and 1. The code's "
        f"`CAPITALISED_THROUGHOUT`: {CAPITALISED_THROUGHOUT:.2f}"
        + (" (the same)." if chosen == CAPITALISED_THROUGHOUT else ": update it to the chosen value."),
        "",
    ]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines), encoding="utf-8")
    print(
        f"casing: highest tuning share {values[0]:.3f}, chosen {chosen:.2f} (code {CAPITALISED_THROUGHOUT:.2f}); "
        f"wrote {args.report}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
