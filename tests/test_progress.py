"""How progress is shown: live bars on a terminal, lines in a pipe, nothing when quiet."""

from __future__ import annotations

import io
import re

from rag.progress import BarProgress, Count, LineProgress, console_progress, no_progress


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as stderr does in an interactive shell."""

    def isatty(self) -> bool:
        return True


def test_counts_read_like_the_old_lines():
    assert str(Count("embedding", 12, 902, "texts")) == "embedding: 12/902 texts"
    assert str(Count("chunks", 40, 0, "chunks")) == "chunks: 40 chunks"
    assert str(Count("embedding", 3, 9, "texts", detail="1/8 tasks")) == "embedding: 3/9 texts (1/8 tasks)"


def test_lines_show_messages_and_each_stage_when_it_begins_and_ends():
    stream = io.StringIO()
    progress = LineProgress(stream, "ingest", every_s=3600)
    progress("scan: 5 files")
    for done in range(0, 903, 100):
        progress(Count("embedding", done, 902, "texts"))
    progress(Count("embedding", 902, 902, "texts"))
    progress(Count("embedding", 902, 902, "texts"))  # the same count twice is printed once
    progress(Count("tasks", 1, 4, "tasks"))  # a stage first seen part-way is shown at once too
    assert stream.getvalue().splitlines() == [
        "[ingest] scan: 5 files",
        "[ingest] embedding: 0/902 texts",
        "[ingest] embedding: 902/902 texts",
        "[ingest] tasks: 1/4 tasks",
    ]


def test_lines_show_a_running_count_every_few_seconds():
    stream = io.StringIO()
    progress = LineProgress(stream, "ingest", every_s=0)
    for done in (1, 2, 3):
        progress(Count("chunks", done, 0, "chunks"))
    assert stream.getvalue().splitlines() == [f"[ingest] chunks: {n} chunks" for n in (1, 2, 3)]


def test_a_terminal_gets_one_bar_per_stage_with_rate_and_eta():
    stream = Terminal()
    with console_progress(stream=stream) as progress:
        assert isinstance(progress, BarProgress)
        progress("scan: 5 files")
        progress(Count("files", 5, 5, "files"))
        for done in (0, 300, 600, 902):
            progress(Count("embedding", done, 902, "texts"))
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())
    assert "[ingest] scan: 5 files" in screen
    assert re.search(r"files\s+\S+\s+5/5\s+files", screen)
    assert re.search(r"embedding\s+\S+\s+902/902\s+texts\s+[\d,.]+ texts/s", screen)
    assert "0:00:00" in screen  # the ETA column


def test_a_pipe_gets_lines_and_quiet_gets_nothing():
    with console_progress(stream=io.StringIO()) as progress:
        assert isinstance(progress, LineProgress)
    with console_progress(quiet=True, stream=Terminal()) as progress:
        assert progress is no_progress
