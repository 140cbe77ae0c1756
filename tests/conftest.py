"""Shared fixtures: the real model, a real seeds index (built once per session), a real Assistant."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "seeds"
KAFKA_DOCS = REPO.parent / "shared" / "corpora" / "kafka-docs"


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
    from rag import Settings
    from rag.ingest import IngestConfig, run_ingest

    defaults = Settings.from_env({})
    index_dir = tmp_path_factory.mktemp("seeds-index") / "index"
    config = IngestConfig(defaults.model, defaults.chunk_size, defaults.chunk_overlap, defaults.encode_batch_size)
    run_ingest([SEEDS], index_dir, config)
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
