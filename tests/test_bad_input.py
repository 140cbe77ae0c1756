"""Bad input through the real entry points: binary stdin and arguments, huge questions, top_k out of range,
symbolic links out of the source tree, link loops and NUL bytes anywhere in a file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rag import ConfigurationError, QuestionError, Settings
from rag.ingest import chunk_files, run_ingest, scan_sources
from tests.conftest import KAFKA_RAG, SEEDS, default_ingest_config, run_kafka_rag

QUESTION = "what does error code 121 mean"


def _ask_bytes(index: Path, stdin: bytes, *args: str | bytes) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_RAG_")}
    return subprocess.run(
        [str(KAFKA_RAG), "ask", *args, "--index", str(index)], input=stdin, env=env, capture_output=True, timeout=120
    )


# ------------------------------------------------------------------------------------------ ask


@pytest.mark.slow
def test_binary_stdin_is_decoded_with_replacement_and_json_stays_utf8(seeds_index):
    garbage = b"\xff\xfe\x00\x01 error code 121 \xc3\x28 INVALID_RECORD_STATE \x80\x81\n"
    result = _ask_bytes(seeds_index, garbage, "-", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.decode("utf-8"))  # strict: valid UTF-8
    assert "\ufffd" in data["question"] and "INVALID_RECORD_STATE" in data["question"]
    plain = _ask_bytes(seeds_index, garbage, "-")
    assert plain.returncode == 0, plain.stderr
    plain.stdout.decode("utf-8")


@pytest.mark.slow
def test_a_non_utf8_argument_is_answered_with_valid_utf8_json(seeds_index):
    result = _ask_bytes(seeds_index, b"", b"error code 121 \xff\xfe mean", "--json")
    assert result.returncode == 0, result.stderr
    assert "\ufffd" in json.loads(result.stdout.decode("utf-8"))["question"]


def test_a_huge_question_is_refused_in_one_line_before_the_model_loads(tmp_path):
    started = time.monotonic()
    result = run_kafka_rag("ask", "-", "--index", str(tmp_path / "index"), stdin="kafka error " * 900_000)  # 10.8 MB
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "kafka-rag: The question is 10,800,000 characters long, over the limit of 250,000: "
        "paste the error message and the lines around it, not the whole log"
    ]
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("top_k", ["0", "-1", "51", "100000"])
def test_top_k_out_of_range_is_one_line_exit_2(tmp_path, top_k):
    result = run_kafka_rag("ask", QUESTION, "--top-k", top_k, "--index", str(tmp_path / "index"))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"kafka-rag: top_k must be between 1 and 50, got {top_k}"]


def test_settings_refuse_top_k_out_of_range():
    for value in (0, 51):
        with pytest.raises(ConfigurationError, match="top_k must be between 1 and 50"):
            Settings(top_k=value)
    with pytest.raises(ConfigurationError, match="top_k must be between 1 and 50"):
        Settings.from_env({"KAFKA_RAG_TOP_K": "100000"})


@pytest.mark.slow
@pytest.mark.parametrize("call", ["ask", "ask_and_search"])
@pytest.mark.parametrize("top_k", [0, -1, 51, 100_000, True, "5", 2.0])
def test_the_service_refuses_top_k_out_of_range(assistant, top_k, call):
    with pytest.raises(QuestionError, match="top_k must be a whole number from 1 to 50"):
        getattr(assistant, call)(QUESTION, top_k=top_k)


@pytest.mark.slow
def test_the_service_caps_questions_and_history(assistant):
    with pytest.raises(QuestionError, match="over the limit of 250,000"):
        assistant.ask("x" * 250_001)
    history = [{"role": "user", "content": "y" * 250_000}] * 5
    with pytest.raises(QuestionError, match="start a new conversation"):
        assistant.ask(QUESTION, history)
    assert assistant.ask(QUESTION, top_k=50).citations


# ------------------------------------------------------------------------------------------ ingest sources


@pytest.fixture()
def hostile_corpus(tmp_path):
    """A corpus with every kind of file ingest must skip, beside one good page."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("root:x:0:0:TOPSECRET-PASSWORD-LINE:/root:/bin/bash\n")
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    shutil.copy(SEEDS / "000_0424dccc37dbf1fb.txt", corpus / "good.txt")
    (corpus / "sub" / "inner.txt").write_text("Inner page\n\nThe widget queue on the broker fills up.\n")
    (corpus / "passwd.txt").symlink_to(outside / "secret.txt")  # leaves the root
    (corpus / "escape").symlink_to(outside)  # a folder outside
    (corpus / "loop.txt").symlink_to(corpus / "loop.txt")  # points at itself
    (corpus / "dangling.txt").symlink_to(corpus / "nowhere.txt")
    (corpus / "alias.txt").symlink_to(corpus / "sub" / "inner.txt")  # a file inside the root: read
    (corpus / "subalias").symlink_to(corpus / "sub")  # a folder inside the root: its files are read once
    (corpus / "late-nul.txt").write_bytes(b"Kafka text that looks fine.\n" * 400 + b"\x00binary tail\n")
    return corpus


def test_ingest_never_leaves_the_source_root_and_reports_every_skip(hostile_corpus):
    files, skipped = scan_sources([hostile_corpus])
    reasons = {s["source_path"]: s["reason"] for s in skipped}
    assert reasons == {
        "passwd.txt": "symlink leads outside the source folder",
        "escape": "symlink leads outside the source folder",
        "loop.txt": "symlink loop",
        "dangling.txt": "broken symlink (its target does not exist)",
        "subalias": "symlink to a folder (its files are read where they are)",
    }
    assert [f.source_path for f in files] == ["alias.txt", "good.txt", "late-nul.txt", "sub/inner.txt"]
    rows = list(
        chunk_files([("late-nul.txt", (hostile_corpus / "late-nul.txt").read_bytes())], default_ingest_config())
    )
    assert rows == [{"kind": "skip", "source_path": "late-nul.txt", "reason": "binary file (NUL bytes)"}]


@pytest.mark.slow
def test_the_ingest_summary_lists_every_skipped_file_and_no_secret_is_indexed(hostile_corpus, tmp_path):
    index_dir = tmp_path / "index"
    result = run_kafka_rag("ingest", str(hostile_corpus), "--index", str(index_dir), "--no-spark")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for line in (
        "  skipped dangling.txt: broken symlink (its target does not exist)",
        "  skipped escape: symlink leads outside the source folder",
        "  skipped late-nul.txt: binary file (NUL bytes)",
        "  skipped loop.txt: symlink loop",
        "  skipped passwd.txt: symlink leads outside the source folder",
        "  skipped subalias: symlink to a folder (its files are read where they are)",
    ):
        assert line in out.splitlines(), out
    data = b"".join(p.read_bytes() for p in index_dir.rglob("*") if p.is_file())
    assert b"TOPSECRET" not in data
    report = run_ingest([hostile_corpus], index_dir, default_ingest_config())  # the library reports the same
    assert {s["source_path"] for s in report.skipped} == {
        "dangling.txt",
        "escape",
        "late-nul.txt",
        "loop.txt",
        "passwd.txt",
        "subalias",
    }
