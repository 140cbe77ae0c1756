"""Soak test: a served index under steady load while new versions are published under it.

`kafka-rag serve` runs on 127.0.0.1 over a private copy of an index; N users ask without pause through
the HTTP API for the whole run; meanwhile three versions are published into the same index folder, at
1/5, 2/5 and 3/5 of the run (each after the one before has finished; the load goes on at least 30 s past
the last):

  1. a real `kafka-rag ingest` of the corpus with one paragraph added (a new version, a few chunks embedded),
  2. a damaged version: the serving version's folder copied under a new name with its `faiss.index` cut
     short, then `CURRENT` switched to it (what a disk fault or a bad copy leaves; the server must refuse it),
  3. a real ingest again (which also repairs the damaged serving version).

Reported: requests served, failures (target 0), p50/p95 latency before the first publish and from it on,
how long each good version took to reach answers, the server's log lines about the damaged version, and
the server's peak RSS before and during the swaps beside one version's size on disk.

    .venv/bin/python benchmarks/soak.py                       # 8 users, 5 minutes, index/ and seeds/
    .venv/bin/python benchmarks/soak.py --seconds 60 --json soak.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ui_load import call_ask, free_port, load_questions, stop_server, wait_until_up  # noqa: E402

from rag.index_store import current_version, new_version_name, switch_pointer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
KAFKA_RAG = Path(sys.executable).with_name("kafka-rag")
TAIL_S = 30.0  # load after the last publish (the server returns an old version's memory 15 s after a swap)


def rss_kib(pid: int) -> int:
    """Resident set size of one process (the server is one Python process; its threads share it)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def loaded_version_mib(index_dir: Path) -> float:
    """What one loaded version adds to a process that already holds the model (the server's swap cost)."""
    from rag.embedding import load_embedder
    from rag.index_store import load_index
    from rag.retrieval import Retriever
    from rag.settings import Settings

    settings = Settings()
    embedder = load_embedder(settings.model, settings.embed_backend, threads=1)
    embedder.encode(["warm up"])
    before = rss_kib(os.getpid())
    retriever = Retriever(load_index(index_dir), embedder)
    after = rss_kib(os.getpid())
    del retriever
    return round((after - before) / 1024, 1)


def swap_growth_mib(index_dir: Path, swaps: int = 8) -> list[int]:
    """RSS (MiB) of one Assistant after each of `swaps` version swaps, asked between swaps: flat means no leak."""
    from rag import Assistant, Settings
    from rag.follow import release_memory

    work = Path(tempfile.mkdtemp(prefix="kafka-rag-swaps-"))
    copy = work / "index"
    shutil.copytree(index_dir, copy, ignore=shutil.ignore_patterns(".lock", "holds"))
    assistant = Assistant.from_settings(Settings.from_env({}, index_dir=copy, reload_interval_s=0))
    sizes = []
    for swap in range(swaps + 1):
        if swap:
            version = new_version_name()
            shutil.copytree(copy / "versions" / (current_version(copy) or ""), copy / "versions" / version)
            switch_pointer(copy, version)
            assistant.refresh_index()
        for question in ("what does error code 121 mean", "how do I fix a rebalance storm"):
            assistant.ask(question)
        release_memory()
        sizes.append(rss_kib(os.getpid()) // 1024)
    shutil.rmtree(work, ignore_errors=True)
    return sizes


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1) if ordered else float("nan")


class Load:
    """Users asking without pause until stopped; every request is recorded with its outcome."""

    def __init__(self, url: str, cases: list[dict[str, Any]], users: int, timeout_s: float) -> None:
        self.url, self.cases, self.timeout_s = url, cases, timeout_s
        self.records: list[tuple[float, float, str]] = []  # (finished at, latency s, version or "")
        self.errors: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._user, args=(n,), daemon=True) for n in range(users)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(self.timeout_s + 10)

    def _user(self, number: int) -> None:
        for turn in itertools.count():
            if self.stop.is_set():
                return
            case = self.cases[(number * 7 + turn) % len(self.cases)]
            began = time.monotonic()
            try:
                answer = call_ask(self.url, case, self.timeout_s)
            except (OSError, RuntimeError, ValueError) as exc:
                with self._lock:
                    self.errors.append((time.monotonic(), f"{type(exc).__name__}: {exc}"))
                continue
            done = time.monotonic()
            with self._lock:
                self.records.append((done, done - began, str(answer.get("index_version", ""))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, default=REPO / "index", help="a built index of --corpus (copied)")
    parser.add_argument("--corpus", type=Path, default=REPO / "seeds", help="the corpus that index was built from")
    parser.add_argument("--seconds", type=float, default=300.0, help="length of the run")
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--interval", type=float, default=2.0, help="the server's CURRENT check interval (s)")
    parser.add_argument("--timeout", type=float, default=60.0, help="per-request timeout (s)")
    parser.add_argument("--golden", type=Path, default=REPO / "evals" / "golden.jsonl")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if current_version(args.index) is None:
        raise SystemExit(f"No index at {args.index}/: build it with 'kafka-rag ingest {args.corpus} --index ...'")

    work = Path(tempfile.mkdtemp(prefix="kafka-rag-soak-"))
    index_dir, corpus = work / "index", work / "corpus"
    shutil.copytree(args.index, index_dir, ignore=shutil.ignore_patterns(".lock", "holds"))
    shutil.copytree(args.corpus, corpus)
    log_path = work / "serve.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_RAG_")}
    env.update(HF_HUB_OFFLINE="1", KAFKA_RAG_RELOAD_INTERVAL_S=str(args.interval), KAFKA_RAG_ANSWERER="extractive")
    with log_path.open("wb") as sink:
        server = subprocess.Popen(
            [str(KAFKA_RAG), "serve", "--index", str(index_dir), "--port", str(port)],
            env={**env, "KAFKA_RAG_FEEDBACK_PATH": str(work / "feedback.jsonl")},
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    rss: list[tuple[float, int]] = []
    published: list[dict[str, Any]] = []
    try:
        wait_until_up(url, server, timeout_s=300)
        cases = load_questions(args.golden)
        for case in cases[:4]:
            call_ask(url, case, args.timeout)
        first_version = current_version(index_dir) or ""
        version_bytes = folder_bytes(index_dir / "versions" / first_version)
        load = Load(url, cases, args.users, args.timeout)
        started = time.monotonic()
        sampling = threading.Event()

        switches: list[tuple[float, str]] = []  # when CURRENT changed, to what: the moment of each publish

        def sample() -> None:
            ticks = 0
            while not sampling.is_set():
                pointer = (index_dir / "CURRENT").read_text().strip()
                if not switches or switches[-1][1] != pointer:
                    switches.append((time.monotonic(), pointer))
                if ticks % 10 == 0:
                    rss.append((time.monotonic(), rss_kib(server.pid)))
                ticks += 1
                sampling.wait(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        load.start()
        target_file = sorted(p for p in corpus.rglob("*") if p.is_file())[0]
        for number, kind in enumerate(("ingest", "damaged", "ingest"), start=1):
            time.sleep(max(started + args.seconds * number / 5 - time.monotonic(), 0))
            at = time.monotonic()
            if kind == "ingest":
                with target_file.open("a", encoding="utf-8") as handle:
                    handle.write(f"\nSoak paragraph {number}: the broker logs a rebalance after each restart.\n")
                result = subprocess.run(
                    [str(KAFKA_RAG), "ingest", str(corpus), "--index", str(index_dir), "--no-spark", "--json"],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if result.returncode != 0:
                    raise SystemExit(f"ingest {number} failed: {result.stderr.strip()}")
                version = json.loads(result.stdout)["version"]
            else:
                serving = current_version(index_dir) or ""
                version = new_version_name()
                shutil.copytree(index_dir / "versions" / serving, index_dir / "versions" / version)
                damaged = index_dir / "versions" / version / "faiss.index"
                damaged.write_bytes(damaged.read_bytes()[:100])
                switch_pointer(index_dir, version)
            published.append({"kind": kind, "version": version, "started_s": round(at - started, 1)})
            published[-1]["published_at"] = time.monotonic()
        # Keep the load on past the last swap, long enough for the old version's memory to be returned.
        time.sleep(max(started + args.seconds - time.monotonic(), TAIL_S))
        load.join()
        sampling.set()
        sampler.join(5)
    finally:
        stop_server(server)

    switched = {pointer: at for at, pointer in switches}
    for entry in published:  # the moment CURRENT moved, not when the ingest process exited
        entry["published_at"] = switched.get(entry["version"], entry["published_at"])
    first_publish = published[0]["published_at"]
    before = [lat for at, lat, _ in load.records if at < first_publish]
    during = [lat for at, lat, _ in load.records if at >= first_publish]
    for entry in published:
        seen = [at for at, _, v in load.records if v == entry["version"] and at >= entry["published_at"]]
        entry["served_after_s"] = round(min(seen) - entry["published_at"], 1) if seen else None
        later = [kib for at, kib in rss if at >= entry["published_at"] + 10]
        entry["rss_mib_10s_later"] = round(later[0] / 1024, 1) if later else None
        entry["published_s"] = round(entry.pop("published_at") - started, 1)
    damaged_version = next(p["version"] for p in published if p["kind"] == "damaged")
    log_lines = log_path.read_text(errors="replace").splitlines()
    rss_before = max((kib for at, kib in rss if at < first_publish), default=0)
    rss_peak = max((kib for _, kib in rss), default=0)
    result = {
        "seconds": args.seconds,
        "users": args.users,
        "check_interval_s": args.interval,
        "requests": len(load.records),
        "failures": len(load.errors),
        "first_failure": load.errors[0][1] if load.errors else "",
        "p50_ms_before_swaps": quantile(before, 0.50),
        "p95_ms_before_swaps": quantile(before, 0.95),
        "p50_ms_during_swaps": quantile(during, 0.50),
        "p95_ms_during_swaps": quantile(during, 0.95),
        "publishes": published,
        "answers_from_damaged_version": sum(1 for _, _, v in load.records if v == damaged_version),
        "log_lines_about_damaged_version": [line for line in log_lines if damaged_version in line],
        "tracebacks_in_server_log": sum("Traceback" in line for line in log_lines),
        "version_mib_on_disk": round(version_bytes / 1_048_576, 1),
        "version_mib_loaded": loaded_version_mib(args.index),
        "rss_mib_one_process_before_and_after_each_of_8_swaps": swap_growth_mib(args.index),
        "rss_mib_peak_before_swaps": round(rss_before / 1024, 1),
        "rss_mib_peak": round(rss_peak / 1024, 1),
        "rss_mib_growth": round((rss_peak - rss_before) / 1024, 1),
        "rss_mib_at_end": round((rss[-1][1] if rss else 0) / 1024, 1),
        "rss_mib_growth_at_end": round(((rss[-1][1] if rss else 0) - rss_before) / 1024, 1),
        "cores": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if result["failures"] or result["answers_from_damaged_version"] else 0


if __name__ == "__main__":
    sys.exit(main())
