"""A running `kafka-rag serve` follows new index versions: real server, real HTTP clients asking without
pause, a real CLI ingest publishing a new version, then a damaged version published under it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time

import httpx
import pytest

from rag.index_lock import held_versions
from rag.index_store import current_version, switch_pointer
from tests.conftest import KAFKA_RAG, SEEDS, free_port, run_kafka_rag, stop_process_group

pytestmark = pytest.mark.slow

QUESTION = "What does error code 121 INVALID_RECORD_STATE mean?"
INTERVAL_S = 1.0
LOAD_SLACK_S = 20.0  # loading a version beside the serving one, on a busy two-core machine


def ask_over_http(http: httpx.Client) -> dict:
    """One question through `/gradio_api/call/ask`; the answer's JSON, or an error naming what came back."""
    posted = http.post("gradio_api/call/ask", json={"data": [QUESTION, [], None, None, None]})
    posted.raise_for_status()
    event_id = posted.json()["event_id"]
    event = None
    with http.stream("GET", f"gradio_api/call/ask/{event_id}") as stream:
        stream.raise_for_status()
        for line in stream.iter_lines():
            if line.startswith("event:"):
                event = line.removeprefix("event:").strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                data = json.loads(line.removeprefix("data:"))
                if event == "error":
                    raise RuntimeError(f"the server answered an error: {data}")
                return data[0]
    raise RuntimeError(f"the stream of event {event_id} ended without an answer (last event: {event})")


class Askers:
    """Clients asking the server without pause; each result is (monotonic time, version or error text).

    Each question is one call of Gradio's HTTP API (POST the inputs, then read that event's own stream), as
    `curl` would make it, so that a failure counted is one the server gave. gradio_client reads all of a client's
    questions from one shared event stream and raises `CancelledError` for each question still waiting when that
    stream ends; one CI run (stop 104) failed on such an error that nothing else in the test pointed to."""

    def __init__(self, url: str, count: int) -> None:
        self.url = url
        self.results: list[tuple[float, str]] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(count)]

    def __enter__(self) -> Askers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as http:
            while not self._stop.is_set():
                try:
                    self.results.append((time.monotonic(), ask_over_http(http)["index_version"]))
                except Exception as exc:  # any failed request is what this test counts
                    self.failures.append(f"{type(exc).__name__}: {exc}")

    def versions_since(self, moment: float) -> list[str]:
        return [version for at, version in list(self.results) if at > moment]

    def wait_for(self, version: str, since: float, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, seen in list(self.results):
                if at > since and seen == version:
                    return at
            time.sleep(0.1)
        raise AssertionError(f"no answer from version {version} within {timeout:.0f} s")


@pytest.fixture()
def served(seeds_index, tmp_path):
    """`kafka-rag serve` on a private copy of the seeds index, checking CURRENT every second."""
    index_dir = tmp_path / "index"
    shutil.copytree(seeds_index, index_dir)
    port = free_port()
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_RAG_")}
    env.update(
        HF_HUB_OFFLINE="1",
        KAFKA_RAG_RELOAD_INTERVAL_S=str(INTERVAL_S),
        KAFKA_RAG_FEEDBACK_PATH=str(tmp_path / "feedback.jsonl"),
    )
    with log.open("w") as sink:
        process = subprocess.Popen(
            [str(KAFKA_RAG), "serve", "--index", str(index_dir), "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 180
    while True:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.5)
    try:
        yield url, index_dir, log
    finally:
        stop_process_group(process)


def test_a_server_follows_new_versions_without_a_failed_request_and_refuses_a_damaged_one(served, tmp_path):
    url, index_dir, log = served
    first = current_version(index_dir)
    corpus = tmp_path / "corpus"
    shutil.copytree(SEEDS, corpus)
    (corpus / "004_477c5e4c40f4a68e.txt").unlink()  # a real change, published without re-embedding

    with Askers(url, count=4) as askers:
        askers.wait_for(first, since=0, timeout=120)
        result = run_kafka_rag("ingest", str(corpus), "--index", str(index_dir), "--no-spark", "--quiet")
        assert result.returncode == 0, result.stderr
        published = time.monotonic()
        second = current_version(index_dir)
        assert second != first
        switched = askers.wait_for(second, since=published, timeout=INTERVAL_S + LOAD_SLACK_S)
        time.sleep(2 * INTERVAL_S)
        settled = time.monotonic()
        time.sleep(2 * INTERVAL_S)
        assert set(askers.versions_since(settled)) == {second}  # nobody is answered from the old one any more
        assert held_versions(index_dir) == {second}  # the server's hold moved with it

        damaged = "29991231T000000000000Z"  # sorts after every real version
        shutil.copytree(index_dir / "versions" / second, index_dir / "versions" / damaged)
        faiss_file = index_dir / "versions" / damaged / "faiss.index"
        faiss_file.write_bytes(faiss_file.read_bytes()[:100])
        switch_pointer(index_dir, damaged)
        broken_at = time.monotonic()
        time.sleep(4 * INTERVAL_S + 4)
        after = askers.versions_since(broken_at)

    assert askers.failures == [], askers.failures[:3]
    assert len(askers.results) > 20
    assert switched - published <= INTERVAL_S + LOAD_SLACK_S
    assert after and set(after) == {second}  # the damaged version never served; the previous one did
    lines = [line for line in log.read_text().splitlines() if damaged in line]
    assert len(lines) == 1, lines  # one clear line, once
    assert "was not loaded, still serving " + second in lines[0]
    assert f"{faiss_file} is unreadable" in lines[0]
    assert "Traceback" not in log.read_text()
    assert any(f"Now serving index version {second} (was {first})" in line for line in log.read_text().splitlines())
