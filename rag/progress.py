"""What a long-running command tells the person waiting: messages and counted stages, shown as bars or lines.

The pipeline reports `Event`s to a `Progress` callable: a message (`str`), or a `Count` of a stage
(files read, chunks made, texts embedded, Spark tasks). How they are shown is chosen once, by the
command, with `console_progress`:

    terminal (a TTY)   one live bar per stage, with its count, rate (e.g. texts/s) and ETA (rich)
    pipe or file       the messages as `[ingest] ...` lines, and a stage's count when it ends or every few seconds
    --quiet / --json   nothing (`no_progress`)

Library code never prints; a plain callable (`list.append` in tests) receives the events as they are.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

LINE_EVERY_S = 5.0  # a stage's count is printed at most this often when the output is not a terminal


@dataclass(frozen=True)
class Count:
    """`done` of `total` `unit`s of one stage (total 0: not known yet); `detail` adds e.g. texts embedded so far."""

    stage: str
    done: int
    total: int
    unit: str
    detail: str = ""

    def __str__(self) -> str:
        count = f"{self.done}/{self.total}" if self.total else str(self.done)
        return f"{self.stage}: {count} {self.unit}" + (f" ({self.detail})" if self.detail else "")


Event = str | Count
Progress = Callable[[Event], None]


def no_progress(event: Event) -> None:
    """The silent `Progress`."""


class LineProgress:
    """Messages as prefixed lines; a stage's count when it begins (so a log shows what the wait is for: a Spark
    job's first tasks finish only after its workers load the model), when it completes, and every `every_s`
    seconds while it runs."""

    def __init__(self, stream: IO[str], prefix: str, every_s: float = LINE_EVERY_S) -> None:
        self._stream = stream
        self._prefix = prefix
        self._every_s = every_s
        self._last: dict[str, tuple[float, Count | None]] = {}  # stage → (when last printed, what)

    def __call__(self, event: Event) -> None:
        if isinstance(event, Count):
            now = time.monotonic()
            last = self._last.get(event.stage)  # None: the stage begins, and is shown
            if last is not None:
                since, shown = last
                finished = bool(event.total) and event.done >= event.total
                if shown == event or (not finished and now - since < self._every_s):
                    return
            self._last[event.stage] = (now, event)
        print(f"[{self._prefix}] {event}", file=self._stream, flush=True)


class BarProgress:
    """One live rich bar per stage (count, rate, ETA); messages print above the bars."""

    def __init__(self, stream: IO[str], prefix: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._prefix = prefix
        self._bars = Progress(
            TextColumn("[bold]{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[detail]}"),
            console=Console(file=stream),
            redirect_stdout=False,
        )
        self._tasks: dict[str, Any] = {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, str):
            self._bars.console.print(f"[{self._prefix}] {event}", markup=False, highlight=False)
            return
        task = self._tasks.get(event.stage)
        if task is None:
            task = self._tasks[event.stage] = self._bars.add_task(
                event.stage, total=event.total or None, unit=event.unit, rate="", detail=""
            )
        self._bars.update(task, completed=event.done, total=event.total or None, detail=event.detail)
        speed = self._bars.tasks[self._tasks[event.stage]].speed
        if speed:
            self._bars.update(task, rate=f"{speed:,.1f} {event.unit}/s")

    def __enter__(self) -> BarProgress:
        self._bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bars.stop()


@contextmanager
def console_progress(quiet: bool = False, stream: IO[str] | None = None, prefix: str = "ingest") -> Iterator[Progress]:
    """The `Progress` a command shows on `stream` (stderr): bars on a terminal, lines otherwise, nothing when quiet."""
    stream = stream or sys.stderr
    if quiet:
        yield no_progress
    elif stream.isatty():
        with BarProgress(stream, prefix) as bars:
            yield bars
    else:
        yield LineProgress(stream, prefix)
