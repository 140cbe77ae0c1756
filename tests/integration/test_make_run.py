"""`make run` on a fresh copy of the repository ends with the chat UI answering over HTTP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import free_port, stop_process_group
from tests.test_spark_job import JVM_CHATTER

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
NOT_COPIED = (
    ".venv",
    ".git",
    "index",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    "*.egg-info",
    "runs",
    "feedback.jsonl",
)
START_TIMEOUT_S = 900  # venv check + ingest of the seeds (model load, Spark start-up) + serve, on a busy machine


def fresh_copy(dest: Path) -> Path:
    """The tree without the built index. The existing virtualenv is linked entry by entry with a fresh
    install stamp of the copy's own, so `make` finds it up to date and never reinstalls into it."""
    shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)
    (dest / "index").mkdir(exist_ok=True)
    venv = dest / ".venv"
    venv.mkdir()
    for entry in (REPO / ".venv").iterdir():
        if entry.name != ".installed":
            (venv / entry.name).symlink_to(entry)
    (venv / ".installed").touch()
    return dest


def ask(url: str, question: str) -> dict:
    body = json.dumps({"data": [question, [], None, None, None]}).encode()
    request = urllib.request.Request(
        f"{url}/gradio_api/call/ask", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        event_id = json.load(response)["event_id"]
    with urllib.request.urlopen(f"{url}/gradio_api/call/ask/{event_id}", timeout=60) as response:
        stream = response.read().decode("utf-8")
    assert "event: complete" in stream, stream
    data = stream.split("event: complete", 1)[1].split("data:", 1)[1].strip().splitlines()[0]
    return json.loads(data)[0]


@pytest.mark.timeout(START_TIMEOUT_S + 120)  # so the test's own deadline, with its log tail, fires first
def test_make_run_ingests_the_seeds_and_serves_the_chat(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    tree = fresh_copy(tmp_path / "repo")
    up_to_date = subprocess.run(["make", "-q", "venv"], cwd=tree, capture_output=True)
    assert up_to_date.returncode == 0, "make would rebuild the linked virtualenv; the test must not"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "KAFKA_RAG_UI_PORT": str(port),
        "KAFKA_RAG_FEEDBACK_PATH": str(tmp_path / "feedback.jsonl"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(tree),  # run the copy's code, not the editable install's
    }
    log_path = tmp_path / "make-run.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            ["make", "run"], cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, f"make run exited with {process.returncode}:\n{log_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no UI after {START_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    page = response.read().decode("utf-8")
                break
            except (urllib.error.URLError, OSError):
                time.sleep(1)
        assert "Kafka troubleshooting assistant" in page
        answer = ask(url, "What causes INVALID_RECORD_STATE (error code 121)?")
        assert not answer["abstained"], answer
        assert "000_0424dccc37dbf1fb.txt" in {c["source_path"] for c in answer["citations"]}, answer
        assert (tree / "index" / "CURRENT").exists()
        log = log_path.read_text(encoding="utf-8", errors="replace")
        ingest_output = log.split("kafka-rag ingest seeds --index index\n", 1)[1].split(".venv/bin/kafka-rag serve")[0]
        assert "[ingest] publish: version " in ingest_output
        assert JVM_CHATTER.findall(ingest_output) == [], ingest_output  # Spark's and the JVM's chatter stays hidden
        # the ingest's own progress on stderr, one summary line on stdout, and nothing else
        others = [line for line in ingest_output.splitlines() if not line.startswith("[ingest] ")]
        assert len(others) == 1 and others[0].startswith("Index "), ingest_output
    finally:
        stop_process_group(process)
    assert process.returncode is not None
