"""Choose `unit_told_min_words` and `unit_told_max_gap` on the tuning parts' follow-ups, asked after the
assistant's own answers.

    python -m evals.tune_followups --set evals/golden.jsonl seeds <seeds index> \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs <docs index> \\
        [--half-indexes SEEDS_H0 SEEDS_H1 DOCS_H0 DOCS_H1]

A follow-up asks for something new, so its answer is not led by a sentence that the conversation's last answer
showed (`rag.answering._told`) when a unit it did not show scores within `unit_told_max_gap` of it; a sentence
shorter than `unit_told_min_words` may lead again, as it is often the very fact asked for ("By default, clients
receive an unlimited quota."). The golden files' assistant turns are ideal answers written by hand, which never
quote a passage word for word; here each follow-up comes after the assistant's own answers to the turns before
it (`evals.runner.answered_history`), as in the web UI and Slack. For each pair of values, over the answerable
tuning follow-ups: how many answers lead with a block that holds a key fact, how many lead with a block the last
answer showed, and key-fact recall. The pair with the most leads that hold a key fact is chosen; ties go to
fewer repeated leads, then to the smaller gap (the rule acting least). With `--half-indexes` each question is
asked of the index whose embedding adapter did not see it (`evals/held_out_tuning.py`). Test-part ids are never
read. Prints the choice and writes `evals/reports/tune_followups.md`.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evals.fit_embedding import add_half_indexes_argument, half_index_pairs
from evals.golden import add_set_argument
from evals.metrics import facts_found
from evals.runner import answered_history
from evals.tune_answers import TuningSet, tuning_sets

MIN_WORDS = (0, 5, 8, 12, 16)  # 0: off
MAX_GAPS = (0.05, 0.1, 0.15, 0.2, 0.3, 9.0)  # 9.0: any
REPORT = Path("evals/reports/tune_followups.md")
_MARKERS = re.compile(r"\s*\[\d+\]")
_PART_HEADING = re.compile(r"^\*\*[^*]+\*\*$")


@dataclass(frozen=True)
class Result:
    followups: int
    lead_holds_fact: int  # answers whose first block holds one of the key facts
    lead_repeats: int  # answers whose first block the conversation's last answer showed
    recall: float  # mean key-fact recall of the whole answers


def lead_block(answer: str) -> str:
    """The answer's first block of quoted words, without its citation markers: not a part heading."""
    blocks = (_MARKERS.sub("", block).strip() for block in re.split(r"\n\s*\n", answer))
    return next((block for block in blocks if block and not _PART_HEADING.match(block)), "")


def score(sets: Sequence[TuningSet], min_words: int, max_gap: float) -> Result:
    holds = repeats = 0
    recalls: list[float] = []
    for tuning_set in sets:
        for assistant, items in tuning_set:
            tuned = assistant.with_settings(unit_told_min_words=min_words, unit_told_max_gap=max_gap)
            k = tuned.settings.top_k
            for item in (i for i in items if i.history):
                history = answered_history(tuned, item.history, tuned.settings.retrieval_mode, k)
                answer = tuned.ask(item.question, history).text
                last = next((t["content"] for t in reversed(history) if t.get("role") == "assistant"), "")
                lead = lead_block(answer)
                holds += any(facts_found(lead, item.facts))
                repeats += bool(lead) and lead in _MARKERS.sub("", last)
                found = facts_found(answer, item.facts)
                recalls.append(sum(found) / len(found) if found else 1.0)
    return Result(len(recalls), holds, repeats, statistics.fmean(recalls) if recalls else 0.0)


def choose(results: dict[tuple[int, float], Result]) -> tuple[int, float]:
    """The pair whose answers most often lead with a key fact; of those, the one that repeats the least, then the
    one with the smaller gap."""
    return max(results, key=lambda pair: (results[pair].lead_holds_fact, -results[pair].lead_repeats, -pair[1]))


def conversation_sets(
    argv: Sequence[str] | None, description: str, report: Path, answerable_only: bool = True
) -> tuple[argparse.Namespace, list[TuningSet]]:
    """The command line a script tuning how conversations are answered takes (`--set`, `--half-indexes`,
    `--report`), and the tuning questions of its golden files that have a history (the answerable ones only,
    with `answerable_only`), each with the assistant that asks it."""
    parser = argparse.ArgumentParser(description=description)
    add_set_argument(parser)
    add_half_indexes_argument(parser)
    parser.add_argument("--report", type=Path, default=report)
    args = parser.parse_args(argv)
    sets = [
        [(assistant, [i for i in items if i.history]) for assistant, items in tuning_set]
        for tuning_set in tuning_sets(args.set, half_index_pairs(parser, args), answerable_only)
    ]
    return args, sets


def write_report(
    path: Path,
    title: str,
    intro: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    chosen: tuple[object, ...],
    current: tuple[object, ...],
) -> None:
    """A tuning report: its title, what was asked, a table of each setting's results, and the choice beside the
    current settings (the first columns, one for each value of the choice, name them). Prints the choice."""
    lines = [
        f"# {title}",
        "",
        intro,
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(map(str, row)) + " |" for row in rows),
        "",
        f"Chosen: {chosen} (current settings: {current}).",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{', '.join(columns[: len(chosen)])}: {chosen} (current {current}); wrote {path}")


def main(argv: Sequence[str] | None = None) -> int:
    args, sets = conversation_sets(argv, __doc__.splitlines()[0], REPORT)
    pairs = [(0, MAX_GAPS[-1])] + [(words, gap) for words in MIN_WORDS if words for gap in MAX_GAPS]
    results = {pair: score(sets, *pair) for pair in pairs}
    chosen = choose(results)
    settings = sets[0][0][0].settings
    current = (settings.unit_told_min_words, settings.unit_told_max_gap)
    write_report(
        args.report,
        "A follow-up's lead: `unit_told_min_words`, `unit_told_max_gap` (tuning parts only)",
        "Answerable tuning follow-ups, each asked after the assistant's own answers to the turns before it"
        + (", of the index whose adapter did not see it." if args.half_indexes else ", of the served index."),
        (
            "unit_told_min_words",
            "unit_told_max_gap",
            "follow-ups",
            "lead holds a key fact",
            "lead repeats the last answer",
            "key-fact recall",
        ),
        [
            (
                f"{words}{' (off)' if not words else ''}",
                gap,
                r.followups,
                r.lead_holds_fact,
                r.lead_repeats,
                f"{r.recall:.3f}",
            )
            for (words, gap), r in results.items()
        ],
        chosen,
        current,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
