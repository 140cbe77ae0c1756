"""The `kafka-rag` command line: exit codes, one-line errors, ask/chat on the seeds index, feedback export."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rag import append_feedback, feedback_record
from rag.cli import main, terminal_text
from rag.passages import Answer, Citation, Passage
from tests.conftest import run_kafka_rag

STACK_TRACE = """2024-06-02 11:04:19,332 ERROR [wordcount-app-StreamThread-3] o.a.k.s.p.i.TaskManager - failed
org.apache.kafka.common.errors.ProducerFencedException: There is a newer producer with the same transactionalId \
which fences the current one.
\tat org.apache.kafka.clients.producer.internals.Sender.run(Sender.java:244)
\tat java.base/java.lang.Thread.run(Thread.java:829)
"""


# ------------------------------------------------------------------------------------------ errors (real process)


def test_missing_source_exits_2_with_one_line(tmp_path):
    result = run_kafka_rag("ingest", str(tmp_path / "no-such-docs"), "--index", str(tmp_path / "index"))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"kafka-rag: Source path {tmp_path / 'no-such-docs'} does not exist: pass a folder or file of documents"
    ]
    assert not (tmp_path / "index").exists()


def test_serve_help_and_a_bad_flag_answer_without_loading_the_web_ui():
    """Gradio's imports take seconds: `serve --help` and a mistyped flag must not wait for them."""
    probe = (
        "import sys\n"
        "from rag.cli import main\n"
        "for argv in (['serve', '--help'], ['serve', '--no-such-flag']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit as exc:\n"
        "        print('exit', exc.code)\n"
        "print('loaded' if 'gradio' in sys.modules or 'ui.web' in sys.modules else 'not loaded')\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines()[-3:] == ["exit 0", "exit 2", "not loaded"], result.stdout + result.stderr
    assert "--openai-api" in result.stdout and "unrecognized arguments: --no-such-flag" in result.stderr


def test_ask_without_an_index_says_to_run_ingest(tmp_path):
    result = run_kafka_rag("ask", "what does error code 121 mean", "--index", str(tmp_path / "index"))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"kafka-rag: No index at {tmp_path / 'index'}/: run 'kafka-rag ingest' first"]


def test_unknown_command_is_a_usage_error():
    result = run_kafka_rag("frobnicate")
    assert result.returncode == 2
    assert "invalid choice: 'frobnicate'" in result.stderr


# ------------------------------------------------------------------------------------------ ask and chat (in process)


@pytest.mark.slow
def test_ask_json_prints_an_answer(seeds_index, capsys):
    assert main(["ask", "--index", str(seeds_index), "--json", "what does error code 121 mean"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["question"] == "what does error code 121 mean"
    assert data["abstained"] is False
    assert "000_0424dccc37dbf1fb.txt" in [c["source_path"] for c in data["citations"]]
    assert [c["marker"] for c in data["citations"]] == list(range(1, len(data["citations"]) + 1))
    assert {"text", "query", "notes", "cautioned", "timings_ms", "related", "answerer", "index_version"} <= set(data)


@pytest.mark.slow
def test_ask_prints_the_answer_and_numbered_sources(seeds_index, capsys):
    assert main(["ask", "--index", str(seeds_index), "what does error code 121 mean"]) == 0
    out = capsys.readouterr().out
    assert "The record state is invalid." in out
    assert "\nSources:\n" in out
    assert "] Kafka Error INVALID_RECORD_STATE › " in out
    assert "(000_0424dccc37dbf1fb.txt)" in out


@pytest.mark.slow
def test_ask_dash_reads_the_question_from_stdin(seeds_index, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(STACK_TRACE))
    assert main(["ask", "-", "--index", str(seeds_index), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["question"] == STACK_TRACE
    assert "ProducerFencedException" in data["query"]
    assert any("reduced to its error signal" in note for note in data["notes"])
    assert data["citations"][0]["source_path"] == "002_5d9f9cd9ceb365b0.txt"


@pytest.mark.slow
def test_ask_with_no_argument_reads_stdin_too(seeds_index, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("what does error code 121 mean\n"))
    assert main(["ask", "--index", str(seeds_index), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["question"] == "what does error code 121 mean\n"


@pytest.mark.slow
def test_ask_with_an_empty_question_is_one_line(seeds_index, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("   \n"))
    assert main(["ask", "-", "--index", str(seeds_index)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        "kafka-rag: The question is empty: type a question or paste an error message"
    ]


@pytest.mark.slow
def test_ask_off_topic_lists_possibly_related(seeds_index, capsys):
    assert main(["ask", "--index", str(seeds_index), "write me a poem about kafka"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("The knowledge base does not cover this.")
    assert "Possibly related:" in out and "Sources:" not in out


@pytest.mark.slow
def test_ask_flags_override_settings(seeds_index, capsys):
    flags = ["--json", "--top-k", "1", "--retrieval", "bm25"]
    assert main(["ask", "--index", str(seeds_index), *flags, "how do I enable idempotent writes?"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["citations"]) == 1
    assert "enable.idempotence=true" in data["citations"][0]["text"]


@pytest.mark.slow
def test_chat_keeps_history_across_turns(seeds_index, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("what does error code 121 mean\nhow do I fix it?\n\n"))
    assert main(["chat", "--index", str(seeds_index)]) == 0
    out = capsys.readouterr().out
    turns = out.split("you> ")
    assert len(turns) == 4  # banner, two answered turns, the empty line that ends the chat
    assert "000_0424dccc37dbf1fb.txt" in turns[1]
    assert "000_0424dccc37dbf1fb.txt" in turns[2]  # "it" is the error from the first turn
    assert "The knowledge base does not cover this." not in turns[2]


# ------------------------------------------------------------------------------------------ feedback export


def _vote(path: Path, question: str, rating: str) -> None:
    passage = Passage("c1", "d1", "Title", ("Title", "Section"), "000_0424dccc37dbf1fb.txt", "text", 0.5)
    answer = Answer(
        question=question,
        text="text [1]",
        citations=(Citation(1, passage, ("text",)),),
        abstained=False,
        query=question,
    )
    append_feedback(path, feedback_record(answer, rating=rating, comment=f"about {question}"))


def test_feedback_export_prints_draft_golden_lines(tmp_path, capsys):
    path = tmp_path / "feedback.jsonl"
    _vote(path, "q1", "down")
    _vote(path, "q2", "up")
    _vote(path, "q3", "down")
    assert main(["feedback", "export", "--feedback", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    drafts = [json.loads(line) for line in lines]
    assert [(d["id"], d["question"]) for d in drafts] == [("fb001", "q1"), ("fb002", "q3")]
    assert all(d["reviewed"] is False and "unreviewed" in d["tags"] for d in drafts)
    assert drafts[0]["sources"] == ["000_0424dccc37dbf1fb.txt"]


def test_feedback_export_to_a_file(tmp_path, capsys):
    path = tmp_path / "feedback.jsonl"
    _vote(path, "q1", "down")
    out = tmp_path / "drafts.jsonl"
    assert main(["feedback", "export", "--feedback", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == f"Wrote 1 draft golden lines to {out} (marked unreviewed)"
    assert json.loads(out.read_text(encoding="utf-8"))["question"] == "q1"


def test_feedback_export_without_a_file_is_one_line(tmp_path, capsys):
    assert main(["feedback", "export", "--feedback", str(tmp_path / "none.jsonl")]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"kafka-rag: No feedback file at {tmp_path / 'none.jsonl'}: nothing has been rated yet"
    ]


def test_terminal_text_shows_fenced_blocks_indented_without_fences():
    markdown = "To add configs: [1]\n````\n$ bin/kafka-configs.sh --alter \\\n    --add-config x=y\n```\n````\n[2]"
    assert terminal_text(markdown) == (
        "To add configs: [1]\n    $ bin/kafka-configs.sh --alter \\\n        --add-config x=y\n    ```\n[2]"
    )
