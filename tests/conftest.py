"""Shared fixtures: the real model, real seeds and Kafka-docs indexes (built once per session), a real Assistant."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
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


def run_kafka_rag(*args: str, cwd: Path = REPO, stdin: str = "", timeout: float = 120) -> subprocess.CompletedProcess:
    """The installed `kafka-rag` command as a user runs it: default settings, offline, any working directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_RAG_")}
    env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run(
        [str(KAFKA_RAG), *args], input=stdin, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def free_port() -> int:
    """A loopback port nothing listens on (closed again at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process_group(process: subprocess.Popen, grace_s: float = 20) -> None:
    """Stop a server started with `start_new_session=True` and everything it started: TERM, then KILL."""
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


@pytest.fixture(scope="session")
def kafka_docs_index(tmp_path_factory) -> Path:
    """An index of the Kafka documentation (HTML pages), built once per session: 2-3 minutes, so mark users slow."""
    from rag.ingest import run_ingest

    if not KAFKA_DOCS.is_dir():
        pytest.skip(f"no Kafka docs corpus at {KAFKA_DOCS}")
    index_dir = tmp_path_factory.mktemp("kafka-docs-index") / "index"
    run_ingest([KAFKA_DOCS], index_dir, default_ingest_config())
    return index_dir


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
