"""The casing bound's script reads only tuning-part questions, and the bound the code ships is its choice."""

from __future__ import annotations

from pathlib import Path

import evals.tune_casing as tune_casing
from evals.golden import part_of
from rag import CAPITALISED_THROUGHOUT

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_FILES = [ROOT / "evals" / "golden.jsonl", ROOT / "evals" / "golden_kafka_docs.jsonl"]


def test_only_tuning_part_questions_are_read():
    found = tune_casing.shares(GOLDEN_FILES)
    assert found and all(part_of(item_id) == "tune" for _, item_id, _ in found)
    assert [share for share, _, _ in found] == sorted((share for share, _, _ in found), reverse=True)


def test_the_shipped_bound_is_the_scripts_choice_and_above_every_users_question(tmp_path):
    report = tmp_path / "tune_casing.md"
    assert tune_casing.main([*map(str, GOLDEN_FILES), "--report", str(report)]) == 0
    highest = tune_casing.shares(GOLDEN_FILES)[0][0]
    assert highest < CAPITALISED_THROUGHOUT < 1.0
    assert tune_casing.choose(highest) == CAPITALISED_THROUGHOUT, "re-run evals/tune_casing.py and ship its choice"
    assert "(the same)" in report.read_text(encoding="utf-8")
