"""Feedback: votes appended atomically to one JSONL file, and thumbs-down exported as golden-set drafts."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from rag import (
    Answer,
    Citation,
    ConfigurationError,
    Passage,
    append_feedback,
    check_writable,
    export_thumbs_down,
    feedback_record,
)

GOLDEN = Path(__file__).resolve().parents[1] / "evals" / "golden.jsonl"


def _passage(source: str = "000_0424dccc37dbf1fb.txt", chunk_id: str = "c1") -> Passage:
    return Passage(
        chunk_id=chunk_id,
        doc_id="d1",
        title="Kafka Error INVALID_RECORD_STATE",
        section_path=("Kafka Error INVALID_RECORD_STATE", "Solutions"),
        source_path=source,
        text="Ensure each record is acknowledged exactly once per fetch session.",
        score=0.8,
    )


def _answer(question: str = "what does error code 121 mean?", abstained: bool = False) -> Answer:
    citations = (
        ()
        if abstained
        else (
            Citation(1, _passage(), ("Ensure each record is acknowledged exactly once per fetch session.",)),
            Citation(2, _passage("003_0aeb7ccd02b3dd71.txt", "c2")),
        )
    )
    return Answer(
        question=question,
        text="Acknowledge once [1] [2].",
        citations=citations,
        abstained=abstained,
        query=question,
        index_version="v1",
    )


def test_feedback_record_fields():
    history = [{"role": "user", "content": "share consumer acks fail"}]
    record = feedback_record(
        _answer(), rating="down", history=history, comment="wrong page", source="slack", extra={"user": "U123"}
    )
    assert record["rating"] == "down"
    assert record["source"] == "slack"
    assert record["comment"] == "wrong page"
    assert record["question"] == "what does error code 121 mean?"
    assert record["history"] == history
    assert record["answer"] == "Acknowledge once [1] [2]."
    assert record["index_version"] == "v1"
    assert record["user"] == "U123"
    assert record["citations"][0] == {
        "marker": 1,
        "chunk_id": "c1",
        "source_path": "000_0424dccc37dbf1fb.txt",
        "heading": "Kafka Error INVALID_RECORD_STATE › Solutions",
        "quotes": ["Ensure each record is acknowledged exactly once per fetch session."],
    }
    json.dumps(record)


def test_rating_must_be_up_or_down():
    with pytest.raises(ValueError, match="rating must be 'up' or 'down', got 'meh'"):
        feedback_record(_answer(), rating="meh")


def test_append_is_atomic_under_concurrent_threads(tmp_path):
    path = tmp_path / "nested" / "feedback.jsonl"
    comment = "x" * 5000  # long lines make interleaving visible if writes were not atomic
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(thread: int) -> None:
        try:
            barrier.wait()
            for n in range(50):
                record = feedback_record(
                    _answer(f"question {thread}-{n}"), rating="up" if n % 2 else "down", comment=comment
                )
                append_feedback(path, record)
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 400
    records = [json.loads(line) for line in lines]
    assert sorted(r["question"] for r in records) == sorted(f"question {t}-{n}" for t in range(8) for n in range(50))
    assert all(r["comment"] == comment for r in records)


def test_append_keeps_unicode_and_one_record_per_line(tmp_path):
    path = tmp_path / "feedback.jsonl"
    append_feedback(path, {"question": "ошибка\nна брокере 漢字", "rating": "down"})
    append_feedback(path, {"question": "second", "rating": "up"})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["question"] for line in lines] == ["ошибка\nна брокере 漢字", "second"]


def test_check_writable_creates_the_file(tmp_path):
    path = tmp_path / "a" / "b" / "feedback.jsonl"
    check_writable(path)
    assert path.is_file() and path.read_text() == ""


def test_check_writable_leaves_existing_votes_alone(tmp_path):
    path = tmp_path / "feedback.jsonl"
    path.write_text('{"rating": "up"}\n')
    check_writable(path)
    assert path.read_text() == '{"rating": "up"}\n'


def test_unwritable_path_is_a_configuration_error(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a folder should be")
    path = blocker / "feedback.jsonl"
    with pytest.raises(ConfigurationError) as caught:
        check_writable(path)
    message = str(caught.value)
    assert message.startswith(f"Feedback file {path} is not writable (")
    assert message.endswith("): set KAFKA_RAG_FEEDBACK_PATH to a writable file")


def test_directory_as_feedback_path_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigurationError, match="is not writable"):
        check_writable(tmp_path)


def test_export_thumbs_down_makes_unreviewed_golden_drafts(tmp_path):
    path = tmp_path / "feedback.jsonl"
    history = [{"role": "user", "content": "share consumer acks fail"}]
    append_feedback(path, feedback_record(_answer("q up"), rating="up"))
    append_feedback(path, feedback_record(_answer("q down"), rating="down", history=history, comment="wrong"))
    append_feedback(path, feedback_record(_answer("q abstained", abstained=True), rating="down"))
    drafts = export_thumbs_down(path)
    assert [d["id"] for d in drafts] == ["fb001", "fb002"]
    first, second = drafts
    assert first["question"] == "q down"
    assert first["history"] == history
    assert first["answerable"] is True
    assert first["sources"] == ["000_0424dccc37dbf1fb.txt", "003_0aeb7ccd02b3dd71.txt"]
    assert first["evidence"] == [] and first["facts"] == []
    assert first["reviewed"] is False
    assert "unreviewed" in first["tags"]
    assert first["feedback_comment"] == "wrong"
    assert first["bad_answer"] == "Acknowledge once [1] [2]."
    assert second["answerable"] is False
    assert second["sources"] == []


def test_drafts_share_the_golden_schema(tmp_path):
    """A draft has every field a golden line has (plus review markers), with the same types."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8").splitlines()[0])
    path = tmp_path / "feedback.jsonl"
    path.write_text('{"rating": "down", "question": "why?", "answer": "because"}\n', encoding="utf-8")
    (draft,) = export_thumbs_down(path)
    assert set(golden) - {"history"} <= set(draft)
    assert all(type(draft[key]) is type(golden[key]) for key in golden)


def test_export_reads_votes_written_by_others(tmp_path):
    path = tmp_path / "feedback.jsonl"
    path.write_text('\n{"rating": "down", "question": "minimal", "answer": "a"}\n\n', encoding="utf-8")
    (draft,) = export_thumbs_down(path)
    assert draft["question"] == "minimal"
    assert draft["history"] == [] and draft["sources"] == [] and draft["answerable"] is True
