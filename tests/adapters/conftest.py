"""Fixtures for the web UI tests: a launched app on a free port, a spy around the real assistant,
and a small index of the seeds plus one hostile document (HTML and a javascript: link in its text).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from rag import Assistant, Settings
from tests.conftest import default_ingest_config, free_port

REPO = Path(__file__).resolve().parents[2]
BOOM = "BOOM-7f3a"  # a question containing this makes the spy fail like a bug inside the assistant

HOSTILE_NAME = "900_injection_probe.txt"
HOSTILE_QUESTION = "What is BROKER_WIDGET_STALL and how do I fix the widget queue?"
HOSTILE_DOCUMENT = """\
Kafka Error BROKER_WIDGET_STALL <script>alert("title")</script>
Error code 999 · Retriable Broker
The broker widget stall means the widget request queue on the broker is full.
Common Causes
- The broker widget stall happens when the widget queue fills up faster than the widget thread drains it \
<script>alert(1)</script>.
- A slow disk makes the widget thread block <img src=x onerror=alert(1)> on every flush; \
see [the widget runbook](javascript:alert(1)) for the widget queue.
Solutions
- Raise widget.queue.size on the broker and restart the widget thread.
"""


class SpyAssistant:
    """The real assistant, recording each question; a question containing BOOM raises like a bug."""

    def __init__(self, real: Assistant) -> None:
        self.real = real
        self.questions: list[str] = []

    @property
    def status(self) -> Any:
        return self.real.status

    def ask(self, question: str, history: Any = (), **options: Any) -> Any:
        self._record(question)
        return self.real.ask(question, history, **options)

    def stream(self, question: str, history: Any = (), **options: Any) -> Iterator[Any]:
        self._record(question)
        return self.real.stream(question, history, **options)

    def _record(self, question: str) -> None:
        self.questions.append(question)
        if BOOM in question:
            raise RuntimeError("simulated failure inside the assistant")


@contextmanager
def launched(assistant: Any, settings: Settings, *, mcp: bool = False, openai_api: bool = False) -> Iterator[str]:
    """`build_app` served on a free loopback port for the duration of the block; yields its URL."""
    from ui.web import build_app, interface_options, launch_options

    settings = dataclasses.replace(settings, ui_host="127.0.0.1", ui_port=free_port())
    app = build_app(assistant, settings, mcp=mcp)
    extra = interface_options(assistant, settings, mcp=mcp, openai_api=openai_api)
    app.launch(**launch_options(settings), **extra, prevent_thread_lock=True, quiet=True)
    try:
        yield app.local_url or f"http://127.0.0.1:{settings.ui_port}/"
    finally:
        app.close()


@pytest.fixture(scope="session")
def hostile_index(seeds_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeds plus HOSTILE_NAME (real model, real FAISS): a copy of the shared seeds index, ingested again
    with the new file, as a user adds one; the seeds' vectors are reused, so only that file is embedded."""
    from rag.ingest import run_ingest

    corpus = tmp_path_factory.mktemp("hostile-corpus")
    for seed in (REPO / "seeds").iterdir():
        shutil.copy(seed, corpus / seed.name)
    (corpus / HOSTILE_NAME).write_text(HOSTILE_DOCUMENT, encoding="utf-8")
    index = tmp_path_factory.mktemp("hostile-index") / "index"
    shutil.copytree(seeds_index, index)
    report = run_ingest([corpus], index, default_ingest_config())
    assert report.documents == 6 and report.reused > 0, report
    return index


@pytest.fixture(scope="session")
def hostile_settings(hostile_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    feedback = tmp_path_factory.mktemp("hostile-feedback") / "feedback.jsonl"
    return Settings.from_env({}, index_dir=hostile_index, feedback_path=feedback)


@pytest.fixture(scope="session")
def hostile_assistant(hostile_settings: Settings) -> Assistant:
    return Assistant.from_settings(hostile_settings)
