"""Load test of the web UI's HTTP API: N simulated users asking golden questions concurrently.

Each user sends its questions one after another through Gradio's plain HTTP API on loopback
(`POST /gradio_api/call/ask`, then reading the event stream until `complete`), so latency is end to
end: queue, assistant, JSON. The run is bounded by a request count and a wall-clock deadline.
Without `--url` it starts `kafka-rag serve` on a free port and stops it afterwards.

    .venv/bin/python benchmarks/ui_load.py --users 16 --requests 320
    .venv/bin/python benchmarks/ui_load.py --url http://127.0.0.1:7860 --users 4

Target: p95 under 1 s with 16 users on 2 cores, extractive answerer.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FALLBACK_QUESTIONS = (
    "What causes INVALID_RECORD_STATE (error code 121) and how do I fix it?",
    "What is the difference between an idempotent producer and a transactional producer?",
    "How do I fix InvalidCommitOffsetSyncException when committing offsets?",
    "How does exactly-once semantics work in Kafka Streams?",
)


def load_questions(path: Path) -> list[dict[str, Any]]:
    """Golden questions with their history; a few seed questions when the golden set is absent."""
    if not path.exists():
        return [{"question": q, "history": []} for q in FALLBACK_QUESTIONS]
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            case = json.loads(line)
            cases.append({"question": case["question"], "history": case.get("history", [])})
    return cases


def call_ask(url: str, case: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """One question through the HTTP API; returns the Answer JSON or raises with the server's error."""
    body = json.dumps({"data": [case["question"], case["history"], None, None, None]}).encode()
    request = urllib.request.Request(
        f"{url}/gradio_api/call/ask", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        event_id = json.load(response)["event_id"]
    with urllib.request.urlopen(f"{url}/gradio_api/call/ask/{event_id}", timeout=timeout_s) as response:
        event = ""
        for raw in response:
            line = raw.decode("utf-8").rstrip("\n")
            if line.startswith("event:"):
                event = line.partition(":")[2].strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                data = line.partition(":")[2].strip()
                if event == "error":
                    raise RuntimeError(f"server error: {data}")
                return json.loads(data)[0]
    raise RuntimeError("event stream ended without a result")


def run_load(
    url: str, cases: list[dict[str, Any]], *, users: int, requests: int, duration_s: float, timeout_s: float
) -> dict[str, Any]:
    """Users share one request budget and one deadline; each records its own latencies."""
    budget = itertools.count()
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []
    abstained = 0
    deadline = time.monotonic() + duration_s
    start_gate = threading.Barrier(users)

    def user(number: int) -> None:
        nonlocal abstained
        start_gate.wait()
        for turn in itertools.count():
            ticket = next(budget)
            if ticket >= requests or time.monotonic() > deadline:
                return
            case = cases[(number * 7 + turn) % len(cases)]
            began = time.perf_counter()
            try:
                answer = call_ask(url, case, timeout_s)
            except (OSError, RuntimeError, ValueError) as exc:
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                continue
            elapsed = time.perf_counter() - began
            with lock:
                latencies.append(elapsed)
                abstained += bool(answer.get("abstained"))

    threads = [threading.Thread(target=user, args=(n,), daemon=True) for n in range(users)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(duration_s + timeout_s + 5)
    wall = time.perf_counter() - began
    return summarize(latencies, errors, abstained, wall, users)


def summarize(latencies: list[float], errors: list[str], abstained: int, wall: float, users: int) -> dict[str, Any]:
    ordered = sorted(latencies)

    def quantile(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")

    return {
        "users": users,
        "requests": len(latencies),
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
        "abstained": abstained,
        "wall_s": round(wall, 2),
        "throughput_rps": round(len(latencies) / wall, 2) if wall else 0.0,
        "p50_ms": round(quantile(0.50), 1),
        "p95_ms": round(quantile(0.95), 1),
        "max_ms": round(ordered[-1] * 1000, 1) if ordered else float("nan"),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 1) if ordered else float("nan"),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"kafka-rag serve exited with {process.returncode} before answering")
        try:
            with urllib.request.urlopen(f"{url}/gradio_api/info", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {timeout_s:.0f} s")


def start_server(index: Path | None) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    command = [
        str(Path(sys.executable).with_name("kafka-rag")),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if index is not None:
        command += ["--index", str(index)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "KAFKA_RAG_ANSWERER": "extractive"}
    process = subprocess.Popen(command, env=env, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL)
    return f"http://127.0.0.1:{port}", process


def stop_server(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running UI (default: start `kafka-rag serve` on a free port)")
    parser.add_argument("--index", type=Path, help="index for the started server (default: settings)")
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--requests", type=int, default=320, help="total requests across all users")
    parser.add_argument("--duration", type=float, default=120.0, help="stop sending after this many seconds")
    parser.add_argument("--timeout", type=float, default=60.0, help="per-request timeout in seconds")
    parser.add_argument("--warmup", type=int, default=4, help="sequential requests before measuring")
    parser.add_argument("--golden", type=Path, default=REPO / "evals" / "golden.jsonl")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    cases = load_questions(args.golden)
    process = None
    url = (args.url or "").rstrip("/")
    if not url:
        url, process = start_server(args.index)
    try:
        if process is not None:
            wait_until_up(url, process, timeout_s=300)
        for case in itertools.islice(itertools.cycle(cases), args.warmup):
            call_ask(url, case, args.timeout)
        result = run_load(
            url,
            cases,
            users=args.users,
            requests=args.requests,
            duration_s=args.duration,
            timeout_s=args.timeout,
        )
    finally:
        if process is not None:
            stop_server(process)
    result.update({"questions": len(cases), "cores": os.cpu_count(), "url": url})
    for key, value in result.items():
        print(f"{key:>15}: {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
