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
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evals.tune_followups import conversation_sets, write_report
from evals.tune_leaning import Result, score_settings

WORDS = (4, 8, 12, 16, 20, 30, 40)
REPORT = Path("evals/reports/tune_followup_context.md")


def choose(results: dict[int, Result]) -> int:
    """The count with the highest key-fact recall; of those, the one declining the most, then the fewest words."""
    return max(results, key=lambda words: (round(results[words].recall, 6), results[words].declined, -words))


def main(argv: Sequence[str] | None = None) -> int:
    args, sets = conversation_sets(argv, __doc__.splitlines()[0], REPORT, answerable_only=False)
    current = sets[0][0][0].settings.followup_context_words
    results = {words: score_settings(sets, followup_context_words=words) for words in sorted({*WORDS, current})}
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
