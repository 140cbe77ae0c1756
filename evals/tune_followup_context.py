"""Choose `followup_context_words` on the tuning parts' questions with a history.

    python -m evals.tune_followup_context --set evals/golden.jsonl seeds <seeds index> \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs <docs index> \\
        [--half-indexes SEEDS_H0 SEEDS_H1 DOCS_H0 DOCS_H1]

A question that leans on the conversation is searched with the earlier user turns' identifiers and the first
`followup_context_words` content words of the last one (`rag.query.rewrite_followup`): too few lose the
subject ("and for keys that live on the other pods?" after a question about a Streams store), too many bring the
last question's story back over what the new one asks. For each count, over the tuning questions that have a
history, each asked after the assistant's own answers to the turns before it (`evals.runner.answered_history`),
with the leaning rule as set (`evals/tune_leaning.py`): how many answers differ from the current count's, key-fact
recall of the answerable ones, and how many unanswerable ones are declined. The highest recall is chosen; ties go
to more declined, then to fewer words. With `--half-indexes` each question is asked of the index whose embedding
adapter did not see it (`evals/held_out_tuning.py`). Test-part ids are never read. Prints the choice and writes
`evals/reports/tune_followup_context.md`.

The report also says whether the choice holds for questions it was not made on: the questions are split in two by
a second hash of the id (`evals.tune_answers.split_half`), each half's choice is scored on the other half beside the
current count. With ~120 answerable follow-ups a count is worth changing only when both halves choose it and it beats
the current count on the half that did not choose it (the ninety-second session chose 8 over 12 on the whole, and the
test part's follow-ups came out two passes worse).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evals.tune_answers import TuningSet, split_part
from evals.tune_followups import conversation_sets, write_report
from evals.tune_leaning import Result, score_settings

WORDS = (4, 8, 12, 16, 20, 30, 40)
REPORT = Path("evals/reports/tune_followup_context.md")


def choose(results: dict[int, Result]) -> int:
    """The count with the highest key-fact recall; of those, the one declining the most, then the fewest words."""
    return max(results, key=lambda words: (round(results[words].recall, 6), results[words].declined, -words))


def combined(parts: Sequence[Result], answerable: Sequence[int]) -> Result:
    """The result over all questions from the results of disjoint parts with `answerable` questions each."""
    return Result(
        answers={i: text for part in parts for i, text in part.answers.items()},
        recall=sum(p.recall * n for p, n in zip(parts, answerable, strict=True)) / (sum(answerable) or 1),
        declined=sum(p.declined for p in parts),
        unanswerable=sum(p.unanswerable for p in parts),
    )


def _answerable(sets: Sequence[TuningSet]) -> int:
    return sum(item.answerable for tuning_set in sets for _, items in tuning_set for item in items)


def main(argv: Sequence[str] | None = None) -> int:
    args, sets = conversation_sets(argv, __doc__.splitlines()[0], REPORT, answerable_only=False)
    current = sets[0][0][0].settings.followup_context_words
    counts = sorted({*WORDS, current})
    halves = [split_part(sets, part) for part in (0, 1)]
    by_half = [{words: score_settings(half, followup_context_words=words) for words in counts} for half in halves]
    sizes = [_answerable(half) for half in halves]
    results = {words: combined([by_half[0][words], by_half[1][words]], sizes) for words in counts}
    chosen = choose(results)
    before = results[current].answers
    write_report(
        args.report,
        "Words a follow-up takes from the last user turn: `followup_context_words` (tuning parts only)",
        f"{len(before)} tuning questions with a history, each asked after the assistant's own answers to the turns "
        + ("before it, of the index whose adapter did not see it." if args.half_indexes else "before it."),
        ("followup_context_words", "answers changed", "key-fact recall (answerable)", "unanswerable declined"),
        [
            (
                words,
                sum(r.answers[i] != before[i] for i in before),
                f"{r.recall:.3f}",
                f"{r.declined} / {r.unanswerable}",
            )
            for words, r in results.items()
        ],
        (chosen,),
        (current,),
    )
    lines = [
        "",
        "Does the choice hold for questions it was not made on? Each half (`split_half`) chooses on its own questions;",
        "key-fact recall of the answerable ones, current count → that half's choice:",
        "",
        "| chosen on | its answerable questions | chosen | that half | the other half |",
        "|---|---|---|---|---|",
    ]
    for part in (0, 1):
        own, other = by_half[part], by_half[1 - part]
        pick = choose(own)
        lines.append(
            f"| half {part} | {sizes[part]} | {pick} | {own[current].recall:.3f} → {own[pick].recall:.3f} | "
            f"{other[current].recall:.3f} → {other[pick].recall:.3f} |"
        )
    with args.report.open("a", encoding="utf-8") as report:
        report.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
