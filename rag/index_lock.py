"""Who may change an index directory, and which versions running servers still read.

    index/
      .lock                 the writer lock: an ingest or a rollback holds `flock(LOCK_EX)` on it for
                            its whole run; the file says who ("pid 123 started 2026-11-23T06:00:00Z")
      holds/<pid>-<id>      one per running server: it holds `flock(LOCK_SH)` on the file while it
                            lives, and the file names the version it serves (rewritten on every swap)

OS file locks are freed by the kernel when their holder dies, so a kill -9 never leaves a stale lock:
a lock file that can be locked is a lock nobody holds, whatever it still says.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from rag.errors import IndexLockedError, IndexStoreError

LOCK_FILE = ".lock"
HOLDS_DIR = "holds"
WAIT_POLL_S = 0.2


@contextmanager
def writer_lock(index_dir: Path, *, wait: bool = False) -> Iterator[None]:
    """Hold the one writer lock of `index_dir` for the block; raise `IndexLockedError` when taken (unless `wait`)."""
    try:
        index_dir.mkdir(parents=True, exist_ok=True)
        handle = (index_dir / LOCK_FILE).open("a+", encoding="utf-8")
    except OSError as exc:
        raise IndexStoreError(
            f"Cannot create the lock file in {index_dir}/ ({exc.strerror}): check its permissions"
        ) from exc
    try:
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait:
                    raise IndexLockedError(
                        f"another ingest ({_holder(handle)}) is building {index_dir}/; "
                        "wait for it or use another --index"
                    ) from None
                time.sleep(WAIT_POLL_S)
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, started {started}\n")
        handle.flush()
        yield
    finally:
        handle.close()  # closing the descriptor releases the lock


def _holder(handle: IO[str]) -> str:
    handle.seek(0)
    return handle.read().strip() or "pid unknown"


def is_locked(index_dir: Path) -> bool:
    """True while some process holds the writer lock of `index_dir`."""
    path = index_dir / LOCK_FILE
    if not path.is_file():
        return False
    with path.open("r", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


class ServerHold:
    """A running server's claim on the version it serves, so retention never removes it."""

    def __init__(self, index_dir: Path) -> None:
        folder = index_dir / HOLDS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{os.getpid()}-{secrets.token_hex(4)}"
        self._handle: IO[str] | None = self.path.open("w", encoding="utf-8")
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_SH)

    def set(self, version: str) -> None:
        """Record the version now served (the file is rewritten in place; the lock stays)."""
        if self._handle is None:
            return
        self._handle.seek(0)
        self._handle.write(version + "\n")  # written before truncating: a reader never sees it empty
        self._handle.truncate()
        self._handle.flush()
        os.utime(self.path)

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
            self.path.unlink(missing_ok=True)


def held_versions(index_dir: Path) -> set[str]:
    """Versions that live servers hold; hold files of dead servers are removed on the way."""
    folder = index_dir / HOLDS_DIR
    held: set[str] = set()
    if not folder.is_dir():
        return held
    for path in folder.iterdir():
        try:
            with path.open("r", encoding="utf-8") as handle:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # a live server holds it
                    handle.seek(0)
                    version = handle.read().strip()
                    if version:
                        held.add(version)
                    continue
            path.unlink(missing_ok=True)  # its server is gone
        except OSError:
            continue
    return held
