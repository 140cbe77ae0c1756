"""Shared fixtures: the real model, real seeds and Kafka-docs indexes (built once per session), a real Assistant."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "seeds"
KAFKA_DOCS = REPO.parent / "shared" / "corpora" / "kafka-docs"
KAFKA_RAG = Path(sys.executable).parent / "kafka-rag"


def default_ingest_config():
    """The configuration `kafka-rag ingest` uses with no KAFKA_RAG_* variables set."""
    from rag import Settings
    from rag.ingest import IngestConfig

    return IngestConfig.from_settings(Settings.from_env({}))


def user_env() -> dict[str, str]:
    """The environment of a user who runs `kafka-rag` with default settings, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_RAG_")}
    env["HF_HUB_OFFLINE"] = "1"
    return env


def run_kafka_rag(*args: str, cwd: Path = REPO, stdin: str = "", timeout: float = 120) -> subprocess.CompletedProcess:
    """The installed `kafka-rag` command as a user runs it: default settings, offline, any working directory."""
    return subprocess.run(
        [str(KAFKA_RAG), *args], input=stdin, cwd=cwd, env=user_env(), capture_output=True, text=True, timeout=timeout
    )


def free_port() -> int:
    """A loopback port nothing listens on (closed again at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process_group(process: subprocess.Popen, grace_s: float = 20) -> None:
    """Stop a server started with `start_new_session=True` (or `process_group=0`) and everything it started:
    TERM, then KILL."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(grace_s)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def settings_factory():
    from rag import Settings

    def make(index_dir: Path, **overrides) -> Settings:
        return Settings.from_env(
            {}, index_dir=index_dir, feedback_path=index_dir.parent / "feedback.jsonl", **overrides
        )

    return make


@pytest.fixture(scope="session")
def seeds_index(tmp_path_factory) -> Path:
    """An index of seeds/ built with the local engine (the Spark engine is tested on its own)."""
    from rag.ingest import run_ingest

    index_dir = tmp_path_factory.mktemp("seeds-index") / "index"
    run_ingest([SEEDS], index_dir, default_ingest_config())
    return index_dir


def pytest_configure(config: pytest.Config) -> None:
    """A test run started as a background job of a non-interactive shell (a CI step, `make test &`) inherits
    SIGINT ignored, and so would every `kafka-rag` the tests start: restore what a terminal gives them, so
    the tests that press Ctrl-C on one see it interrupted."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


DOCS_GATE_TEST = "test_committed_baseline_gate_passes_on_kafka_docs_index"
GOLDEN_KAFKA_DOCS = REPO / "evals" / "golden_kafka_docs.jsonl"
BASELINE_KAFKA_DOCS = REPO / "evals" / "baseline_kafka_docs.json"


# The gate asks its questions in two processes, so that once the other tests are done it takes both cores (its
# 1759 questions: 112 s in one process, 63 s in two). Each keeps its thread pools to one thread as any serving
# process does (`Assistant.from_settings`), so none spins beside the tests.
GATE_JOBS = 2


class DocsIndexBuild:
    """The Kafka docs index, built by a `kafka-rag ingest` of lowest priority that collection starts; then, when
    the docs gate is collected, that gate's `kafka-rag eval` of the whole golden file, started by a thread the
    moment the index is published. Both take CPU the other tests leave idle, and the gate's minute of asking
    every question of the docs golden file is off the tests' own path."""

    def __init__(self, root: Path, gate: bool) -> None:
        self.root = root
        self.index = root / "index"
        self.gate_out = root / "gate-run"
        self._lock = threading.Lock()
        self._stopped = False
        self._gate: subprocess.Popen | None = None
        self.build = self._start("build.log", "ingest", str(KAFKA_DOCS), "--index", str(self.index), "--no-spark")
        self._gate_thread = threading.Thread(target=self._gate_after_build, name="docs-gate", daemon=True)
        if gate:
            self._gate_thread.start()

    def _start(self, log_name: str, *args: str) -> subprocess.Popen:
        with open(self.root / log_name, "wb") as log:
            return subprocess.Popen(
                ["nice", "-n", "19", str(KAFKA_RAG), *args],
                cwd=REPO,
                env=user_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                # a process group of its own (to stop it whole), but not a session: the kernel's autogroups
                # share the CPU evenly between sessions, whatever their nice, so a session of its own would
                # take half the CPU from the tests instead of what they leave idle
                process_group=0,
            )

    def _gate_after_build(self) -> None:
        if self.build.wait() != 0:
            return
        modes = json.loads(BASELINE_KAFKA_DOCS.read_text(encoding="utf-8"))["config"]["retrieval"]
        with self._lock:
            if not self._stopped:
                self._gate = self._start(
                    "gate.log",
                    "eval", "--golden", str(GOLDEN_KAFKA_DOCS), "--corpus", str(KAFKA_DOCS), "--index", str(self.index),
                    "--retrieval", *modes, "--out", str(self.gate_out), "--baseline", str(BASELINE_KAFKA_DOCS),
                    "--jobs", str(GATE_JOBS),
                )  # fmt: skip

    def log(self, name: str) -> str:
        return (self.root / name).read_text(encoding="utf-8", errors="replace")[-3000:]

    def gate_result(self) -> tuple[int, str]:
        """The gate's exit code and the end of its output, once it has run."""
        assert self._gate_thread.ident is not None, "collection starts the gate when it collects the docs gate test"
        self._gate_thread.join()
        assert self._gate is not None, f"the gate's eval did not start; the build's output:\n{self.log('build.log')}"
        return self._gate.wait(), self.log("gate.log")

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        for process in (self.build, self._gate):
            if process is not None:
                stop_process_group(process)
        shutil.rmtree(self.root, ignore_errors=True)


_DOCS_INDEX_BUILD = pytest.StashKey[DocsIndexBuild]()


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests on the Kafka docs index run last, and the index is built from the start in a process of lower
    priority: its minutes of embedding take the CPU that the other tests leave idle while they wait on
    servers, JVMs and a browser, instead of holding up the suite."""
    users = {id(item) for item in items if "kafka_docs_build" in getattr(item, "fixturenames", ())}
    if not users or not KAFKA_DOCS.is_dir() or config.option.collectonly:
        return
    items[:] = [item for item in items if id(item) not in users] + [item for item in items if id(item) in users]
    gate = any(getattr(item, "originalname", item.name) == DOCS_GATE_TEST for item in items)
    config.stash[_DOCS_INDEX_BUILD] = DocsIndexBuild(Path(tempfile.mkdtemp(prefix="kafka-docs-index-")), gate)


def pytest_unconfigure(config: pytest.Config) -> None:
    build = config.stash.get(_DOCS_INDEX_BUILD, None)
    if build is not None:
        build.stop()


@pytest.fixture(scope="session")
def kafka_docs_build(pytestconfig) -> DocsIndexBuild:
    """An index of the Kafka documentation (HTML pages), built once per session (3-4 minutes: mark users slow)
    by the process that collection started; this waits for it."""
    if not KAFKA_DOCS.is_dir():
        pytest.skip(f"no Kafka docs corpus at {KAFKA_DOCS}")
    build = pytestconfig.stash.get(_DOCS_INDEX_BUILD, None)
    assert build is not None, "collection starts the build for every test that uses this fixture"
    if build.build.wait() != 0:
        pytest.fail(f"Building the Kafka docs index failed (exit {build.build.returncode}):\n{build.log('build.log')}")
    return build


@pytest.fixture(scope="session")
def kafka_docs_index(kafka_docs_build) -> Path:
    return kafka_docs_build.index


@pytest.fixture(scope="session")
def settings(seeds_index, settings_factory):
    return settings_factory(seeds_index)


@pytest.fixture(scope="session")
def assistant(settings):
    from rag import Assistant

    return Assistant.from_settings(settings)


@pytest.fixture()
def seeds_copy(tmp_path) -> Path:
    """A writable copy of the seeds, for tests that change the corpus."""
    target = tmp_path / "corpus"
    shutil.copytree(SEEDS, target)
    return target
