"""The robustness report rewrites questions as users type them, keeps what they paste, and reads only the part
it is asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

import evals.robustness as robustness
from evals.golden import load_golden, select_part
from rag import Assistant

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "evals" / "golden.jsonl"
SEEDS = ROOT / "seeds"
PASTED = "why does my producer throw RecordTooLargeException when max.request.size is 1048576? see /var/log/kafka.log"


def test_capitals_and_title_change_the_users_words_and_keep_what_they_paste():
    capitals, _ = robustness.FORMS["in capitals"]
    title, _ = robustness.FORMS["as a title"]
    assert capitals(PASTED) == (
        "WHY DOES MY PRODUCER THROW RecordTooLargeException WHEN max.request.size IS 1048576? SEE /var/log/kafka.log"
    )
    assert title(PASTED) == (
        "Why Does My Producer Throw RecordTooLargeException When max.request.size Is 1048576? See /var/log/kafka.log"
    )


def test_lower_case_lowers_every_word_the_names_of_exceptions_too_and_keeps_to_one_line_questions():
    lower, one_line = robustness.FORMS["in lower case"]
    assert lower(PASTED) == (
        "why does my producer throw recordtoolargeexception when max.request.size is 1048576? see /var/log/kafka.log"
    )
    assert one_line


def test_a_greeting_and_a_signature_wrap_the_question_whole():
    greeting, _ = robustness.FORMS["after a greeting"]
    signature, _ = robustness.FORMS["above a signature"]
    assert greeting(PASTED).endswith(PASTED) and signature(PASTED).startswith(PASTED + "\n\n")


def test_a_typo_swaps_two_letters_of_the_first_long_word_and_the_other_forms_wrap_or_strip_the_question():
    typo, _ = robustness.FORMS["with a typo"]
    unpunctuated, _ = robustness.FORMS["without question marks"]
    tag, _ = robustness.FORMS["under a ticket tag"]
    assert typo(PASTED) == PASTED.replace("producer", "produecr", 1)
    assert (
        typo("see `RecordTooLargeException` in max.request.size") == "see `RecordTooLargeException` in max.request.size"
    )
    assert unpunctuated("is it 1048576? or more?") == "is it 1048576 or more"
    assert unpunctuated("GET /connectors?expand=status") == "GET /connectors?expand=status"
    assert tag(PASTED) == f"[prod] {PASTED}"
    typographic, _ = robustness.FORMS["with typographic quotes"]
    assert typographic("it's \"x\" in `it's`") == "it\u2019s \u201cx\u201d in `it's`"
    quoted, _ = robustness.FORMS["quoted in a reply"]
    assert quoted("why?\n```\n$ ls\n```") == "> why?\n> ```\n> $ ls\n> ```"


@pytest.mark.slow
def test_every_form_asks_the_tuning_parts_single_turn_questions_and_no_test_part_one(
    seeds_index, monkeypatch, tmp_path
):
    asked: list[str] = []
    real = Assistant.ask_and_search

    def spy(self, question, history=(), **kwargs):
        asked.append(question)
        return real(self, question, history, **kwargs)

    monkeypatch.setattr(Assistant, "ask_and_search", spy)
    # The golden file's first questions, of both parts: every form of every tuning question is asked, so the
    # whole file would take half a minute to say the same.
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(GOLDEN.read_text(encoding="utf-8").splitlines(keepends=True)[:40]), encoding="utf-8")
    items = load_golden(golden, SEEDS)
    assert select_part(items, "test") and any("\n" in i.question.strip() for i in select_part(items, "tune"))
    report = tmp_path / "robustness.md"
    assert robustness.main(["--set", str(golden), str(SEEDS), str(seeds_index), "--report", str(report)]) == 0
    single = [i.question for i in select_part(items, "tune") if not i.history]
    expected = [
        rewrite(question)
        for rewrite, one_line in robustness.FORMS.values()
        for question in single
        if not one_line or "\n" not in question.strip()
    ]
    assert asked == expected
    rows = [line for line in report.read_text(encoding="utf-8").splitlines() if line.startswith("| golden.jsonl |")]
    assert [row.split(" | ")[1] for row in rows] == list(robustness.FORMS)
    assert rows[0].endswith("| 1.000 |")  # as written: answered as written, by definition
