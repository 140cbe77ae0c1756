"""How answers hold when the golden questions are typed another way: in capitals, as a title, in lower case,
after a greeting, above a signature, without question marks, with a typo, under a ticket tag, with typographic
quotes, quoted in a reply.

    python -m evals.robustness --set evals/golden.jsonl seeds <seeds index> \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs <docs index> \\
        [--half-indexes SEEDS_H0 SEEDS_H1 DOCS_H0 DOCS_H1] [--part tune|test]

The golden questions are written as users write them, but each user writes one way: all in lower case, the
names of exceptions and errors too ("getting notenoughreplicasexception"), with a greeting ("hi team, …"), with
caps lock on, as a ticket's title, above a signature, without question marks, with a typist's swapped letters,
under a ticket's tag ("[prod] …"), with a phone's curly quotes, or forwarded from a colleague with a reply's
quote marks. The words and what they ask are the same, so the answer should be.
Each single-turn question of the part (tuning by default) is asked as written and in each `FORMS` rewrite, and
scored as `kafka-rag eval` scores it; the report gives, per golden file and form, answerable accuracy, key-fact
recall, abstention recall and over-abstention, and the share of questions answered as when written (the same
decision and the same first cited source). With `--half-indexes` each question is asked of the index whose
embedding adapter did not see it (`evals/held_out_tuning.py`). Test-part ids are read only with `--part test`.
Writes `evals/reports/robustness.md`.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from evals.fit_embedding import add_half_indexes_argument, half_index_pairs
from evals.golden import PARTS, GoldenItem, add_set_argument, load_golden, select_part
from evals.held_out_tuning import tuning_scores
from evals.metrics import QuestionScore, summarise
from evals.report import fmt

REPORT = Path("evals/reports/robustness.md")
METRICS = ("answerable_accuracy", "key_fact_recall", "abstention_recall", "over_abstention")
# A plain lower-case word of the user's prose: not part of a key, path, host or code (`retention.ms`, `a_b`).
_PLAIN_WORD = re.compile(r"(?<![\w.\-/@$`'\"])[a-z]+(?![\w\-/@$`'\"]|\.\w)")


def _capitals(question: str) -> str:
    """Typed with caps lock on; what the user pasted (keys, errors, code) keeps its case."""
    return _PLAIN_WORD.sub(lambda m: m.group(0).upper(), question)


def _title(question: str) -> str:
    """Each plain word capitalised, as a ticket's title is often typed."""
    return _PLAIN_WORD.sub(lambda m: m.group(0).capitalize(), question)


def _unpunctuated(question: str) -> str:
    """Typed without question marks, as chat messages often are."""
    return re.sub(r"\?+(?=\s|$)", "", question)


# A plain word of the user's prose long enough to be mistyped: five letters or more.
_LONG_WORD = re.compile(r"(?<![\w.\-/@$`'\"])([a-z])([a-z]+)([a-z]{2})([a-z])(?![\w\-/@$`'\"]|\.\w)")


def _mistyped(question: str) -> str:
    """Two letters swapped in the first long plain word, as a quick typist does ("rebalancnig")."""
    return _LONG_WORD.sub(lambda m: f"{m[1]}{m[2]}{m[3][::-1]}{m[4]}", question, count=1)


def _typographic(question: str) -> str:
    """Typed on a phone or pasted from a word processor: curly apostrophes and quotation marks, outside code."""

    def curl(text: str) -> str:
        text = re.sub(r"(?<=\w)'(?=\w)", "\u2019", text)
        return re.sub(r'"([^"\n]*)"', "\u201c\\1\u201d", text)

    parts = re.split(r"(```.*?```|`[^`\n]*`)", question, flags=re.S)
    return "".join(part if n % 2 else curl(part) for n, part in enumerate(parts))


# Each form: how it rewrites a question, and whether it applies only to questions of one line (a paste keeps
# its case: a user with caps lock on does not retype a stack trace).
FORMS: dict[str, tuple[Callable[[str], str], bool]] = {
    "as written": (lambda question: question, False),
    "in capitals": (_capitals, True),
    "as a title": (_title, True),
    "in lower case": (str.lower, True),
    "after a greeting": (lambda question: f"hi team, {question}", False),
    "above a signature": (lambda question: f"{question}\n\nThanks,\nPriya Raghunathan", False),
    "without question marks": (_unpunctuated, False),
    "with a typo": (_mistyped, False),
    "under a ticket tag": (lambda question: f"[prod] {question}", False),
    "with typographic quotes": (_typographic, False),
    "quoted in a reply": (lambda question: "\n".join(f"> {line}" for line in question.split("\n")), False),
}


def form_scores(items: Sequence[GoldenItem], indexes: Sequence[Path]) -> dict[str, list[QuestionScore]]:
    """Each form's scores of the single-turn `items` it applies to (asked as `tuning_scores` asks them)."""
    single = [item for item in items if not item.history]
    return {
        name: tuning_scores(
            [
                dataclasses.replace(item, question=rewrite(item.question))
                for item in single
                if not one_line or "\n" not in item.question.strip()
            ],
            indexes,
        )
        for name, (rewrite, one_line) in FORMS.items()
    }


def same_share(written: Sequence[QuestionScore], other: Sequence[QuestionScore]) -> float:
    """The share of `other`'s questions with the same decision and the same first cited source as written."""
    first = {s.id: (s.abstained, s.cited_sources[:1]) for s in written}
    return sum(first[s.id] == (s.abstained, s.cited_sources[:1]) for s in other) / (len(other) or 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(parser)
    add_half_indexes_argument(parser)
    parser.add_argument("--part", choices=PARTS, default="tune", help="which part of each golden file")
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    pairs = half_index_pairs(parser, args) if args.half_indexes else [(index,) for _, _, index in args.set]
    rows = []
    for (golden, corpus, _), indexes in zip(args.set, pairs, strict=True):
        scores = form_scores(select_part(load_golden(golden, corpus), args.part), list(indexes))
        for name, form in scores.items():
            metrics = summarise(form)
            same = same_share(scores["as written"], form)
            rows.append((golden.name, name, len(form), metrics, same))
            figures = ", ".join(f"{m} {fmt(metrics[m], m)}" for m in METRICS)
            print(f"{golden.name}, {name}: {len(form)} questions; {figures}, answered as written {same:.3f}")
    _report(args.report, rows, args.part, bool(args.half_indexes))
    print(f"wrote {args.report}")
    return 0


def _report(path: Path, rows: Sequence[tuple], part: str, held_out: bool) -> None:
    lines = [
        "# The same questions typed another way",
        "",
        f"The single-turn questions of each golden file's {part} part, asked as written and rewritten "
        f"(`evals/robustness.py`: {', '.join(name for name, (_, one_line) in FORMS.items() if one_line)}, the "
        f"questions of one line; {', '.join(name for name, (_, one_line) in list(FORMS.items())[1:] if not one_line)}"
        ", all)"
        + (", each of the index whose embedding adapter did not see it" if held_out else ", of the served index")
        + ". *Answered as written*: the same decision and the same first cited source as the question as written.",
        "",
        f"| golden file | form | questions | {' | '.join(METRICS)} | answered as written |",
        f"|---|---|---|{'---|' * len(METRICS)}---|",
        *(
            f"| {name} | {form} | {count} | {' | '.join(fmt(metrics[m], m) for m in METRICS)} | {same:.3f} |"
            for name, form, count, metrics, same in rows
        ),
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
