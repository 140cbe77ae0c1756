"""The service follows new index versions when asked (`refresh_index`), with the real model and index copies:
a sound new version is swapped in, a request already under way finishes on its version, a damaged one is
refused with one log line while the old one keeps answering."""

from __future__ import annotations

import dataclasses
import gc
import logging
import shutil
import weakref

import pytest

from rag import Answer, Assistant
from rag.index_store import current_version, new_version_name, switch_pointer

pytestmark = pytest.mark.slow

QUESTION = "what does error code 121 mean"


def _publish_copy(index_dir, *, damage: bool = False) -> str:
    """Publish a copy of the serving version under a new name (cut short when `damage`)."""
    version = new_version_name()
    shutil.copytree(index_dir / "versions" / current_version(index_dir), index_dir / "versions" / version)
    if damage:
        chunks = index_dir / "versions" / version / "chunks.arrow"
        chunks.write_bytes(chunks.read_bytes()[:64])
    switch_pointer(index_dir, version)
    return version


def test_refresh_swaps_in_a_new_version_and_refuses_a_damaged_one(seeds_index, settings_factory, tmp_path, caplog):
    index_dir = tmp_path / "index"
    shutil.copytree(seeds_index, index_dir)
    settings = dataclasses.replace(settings_factory(index_dir), reload_interval_s=0)  # no watcher: only when asked
    assistant = Assistant.from_settings(settings)
    first = assistant.ask(QUESTION).index_version
    assert assistant.refresh_index() == first  # nothing new

    in_flight = assistant.stream(QUESTION)
    next(in_flight)  # retrieval has run on the first version
    old = weakref.ref(assistant._retriever)
    second = _publish_copy(index_dir)
    assert assistant.refresh_index() == second
    finished = [event for event in in_flight if isinstance(event, Answer)]
    assert finished[0].index_version == first  # the request under way finished on its version
    del in_flight
    gc.collect()
    assert old() is None  # nothing keeps the old version in memory once its last request is done
    assert assistant.ask(QUESTION).index_version == second
    assert assistant.status.version == second

    caplog.set_level(logging.INFO, logger="rag.follow")
    damaged = _publish_copy(index_dir, damage=True)
    assert assistant.refresh_index() == second
    assert assistant.refresh_index() == second  # asked again: refused again without a second log line
    answer = assistant.ask(QUESTION)
    assert answer.index_version == second and answer.citations
    lines = [r for r in caplog.records if damaged in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.ERROR and lines[0].exc_info is None
    assert "chunks.arrow is unreadable" in lines[0].getMessage()
    assert f"still serving {second}" in lines[0].getMessage()
