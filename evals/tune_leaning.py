"""Choose how a question asked in a conversation leans on it, on the tuning parts' questions with a history.

    python -m evals.tune_leaning --set evals/golden.jsonl seeds <seeds index> \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs <docs index> \\
        [--half-indexes SEEDS_H0 SEEDS_H1 DOCS_H0 DOCS_H1]

In a conversation, a question that does not point back is searched with the conversation's subject too
(`rag.service.Assistant._prepare`) when it is a fragment: at most `followup_max_terms` search terms, no
identifier, and no "what is X?" (`rag.query.names_its_subject`), whose passages searched alone have a best cosine
under `followup_weak_dense`; or, whatever its words, when its best passage searched with the conversation's
subject scores more than `followup_lean_margin` above its best passage searched alone ("which setting should I
raise?" after a consumer group's rebalancing). Too wide a rule reads a short question on a new subject ("why are
quotas needed?") as one about the last answer's; too narrow a one answers "which jmx bean?" from whatever passage
says JMX. The terms and cosine are chosen first (no margin), then the margin at that choice. For each rule, over
the tuning questions that have a history, each asked after the assistant's own answers to the turns before it
(`evals.runner.answered_history`): how many answers differ from those with the rule off, key-fact recall of the
answerable ones, and how many unanswerable ones are declined. The rule with the highest recall is chosen; ties
go to more declined, then to fewer terms, a lower cosine and a larger margin (the rule acting least). With
`--half-indexes` each question is asked of the index whose embedding adapter did not see it
(`evals/held_out_tuning.py`). Test-part ids are never read. Prints the choice and writes
`evals/reports/tune_leaning.md`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evals.metrics import facts_found
from evals.runner import answered_history
from evals.tune_answers import TuningSet
from evals.tune_followups import conversation_sets, write_report

MAX_TERMS = (2, 3, 4)
WEAK_DENSE = (0.4, 0.45, 0.5, 0.55, 0.6)
# Tried at the best terms and cosine of the grid above: the margin by which the passage found with the
# conversation's subject must outscore the one found alone (inf: no comparison).
LEAN_MARGIN = (0.0, 0.5, 1.0, 1.5, 2.0)
OFF = (0, 0.0, math.inf)
REPORT = Path("evals/reports/tune_leaning.md")


@dataclass(frozen=True)
class Result:
    answers: dict[str, str]  # by golden id
    recall: float  # mean key-fact recall of the answerable questions
    declined: int  # unanswerable questions declined
    unanswerable: int


Rule = tuple[int, float, float]  # followup_max_terms, followup_weak_dense, followup_lean_margin


def score(sets: Sequence[TuningSet], rule: Rule) -> Result:
    return score_settings(sets, followup_max_terms=rule[0], followup_weak_dense=rule[1], followup_lean_margin=rule[2])


def score_settings(sets: Sequence[TuningSet], **overrides: object) -> Result:
    """Each set's questions with a history asked with the settings `overrides`, after the assistant's own answers to
    the turns before them: their answers, the answerable ones' key-fact recall, and the unanswerable declined."""
    answers: dict[str, str] = {}
    recalls: list[float] = []
    declined = unanswerable = 0
    for tuning_set in sets:
        for assistant, items in tuning_set:
            tuned = assistant.with_settings(**overrides)
            k = tuned.settings.top_k
            for item in items:
                history = answered_history(tuned, item.history, tuned.settings.retrieval_mode, k)
                answer = tuned.ask(item.question, history)
                answers[item.id] = answer.text
                if item.answerable:
                    found = facts_found(answer.text, item.facts)
                    recalls.append(sum(found) / len(found) if found else 1.0)
                else:
                    unanswerable += 1
                    declined += answer.abstained
    return Result(answers, statistics.fmean(recalls) if recalls else 0.0, declined, unanswerable)


def choose(results: dict[Rule, Result]) -> Rule:
    """The rule with the highest key-fact recall; of those, the one declining the most, then the narrowest."""
    return max(
        results,
        key=lambda rule: (
            round(results[rule].recall, 6),
            results[rule].declined,
            -rule[0],
            -rule[1],
            rule[2],
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args, sets = conversation_sets(argv, __doc__.splitlines()[0], REPORT, answerable_only=False)
    rules = [OFF, *((terms, dense, math.inf) for terms in MAX_TERMS for dense in WEAK_DENSE)]
    results = {rule: score(sets, rule) for rule in rules}
    terms, dense, _ = choose(results)
    results.update({(terms, dense, margin): score(sets, (terms, dense, margin)) for margin in LEAN_MARGIN})
    chosen = choose(results)
    off = results[OFF].answers
    settings = sets[0][0][0].settings
    current = (
        settings.followup_max_terms,
        settings.followup_weak_dense,
        settings.followup_lean_margin,
    )
    questions = len(off)
    write_report(
        args.report,
        "Questions in a conversation: `followup_max_terms`, `followup_weak_dense`, `followup_lean_margin` "
        "(tuning parts only)",
        f"{questions} tuning questions with a history, each asked after the assistant's own answers to the turns "
        + ("before it, of the index whose adapter did not see it." if args.half_indexes else "before it."),
        (
            "followup_max_terms",
            "followup_weak_dense",
            "followup_lean_margin",
            "answers changed",
            "key-fact recall (answerable)",
            "unanswerable declined",
        ),
        [
            (
                f"{terms}{' (off)' if (terms, dense, margin) == OFF else ''}",
                dense,
                margin,
                sum(r.answers[i] != off[i] for i in off),
                f"{r.recall:.3f}",
                f"{r.declined} / {r.unanswerable}",
            )
            for (terms, dense, margin), r in results.items()
        ],
        chosen,
        current,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
