"""Servers follow new index versions: watch `CURRENT`, load a new version beside the old, swap it in.

A check reads one small file, so servers do it every few seconds (`Settings.reload_interval_s`). A new
version is loaded on a background thread while the old one keeps answering; only a complete, readable
version built with the served model is swapped in, as one reference assignment, so a request that
started on the old version finishes on it. A version that fails to load is logged once, on one line,
and the old one keeps serving until `CURRENT` changes again.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from rag.errors import KafkaRagError
from rag.index_lock import ServerHold
from rag.index_store import read_pointer, serving_path

log = logging.getLogger(__name__)

Loaded = TypeVar("Loaded")
RELEASE_AFTER_S = 15.0  # longer than any request takes, so the old version is no longer referenced


def release_memory() -> None:
    """Collect the old version's objects and return freed heap pages to the OS (glibc keeps them otherwise)."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name:
        with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
            ctypes.CDLL(name).malloc_trim(0)


class VersionFollower(Generic[Loaded]):
    """Calls `swap(load(version folder))` whenever `CURRENT` names a new version that loads cleanly."""

    def __init__(
        self,
        index_dir: Path,
        serving: str,
        load: Callable[[Path], Loaded],
        swap: Callable[[Loaded], None],
        interval_s: float,
    ) -> None:
        self.index_dir = index_dir
        self.serving = serving
        self._load = load
        self._swap = swap
        self._interval = interval_s
        self._refused: str | None = None  # the pointer value that failed to load, logged once
        self._loading: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._watcher: threading.Thread | None = None
        self._hold: ServerHold | None = None

    def start(self) -> None:
        """Hold the served version against retention and check `CURRENT` every interval, on a daemon thread."""
        if self._watcher is not None or self._interval <= 0:
            return
        log.setLevel(logging.INFO)  # a long-running server says which version it switched to
        try:
            self._hold = ServerHold(self.index_dir)
            self._hold.set(self.serving)
        except OSError as exc:  # a read-only index: serving still works, retention just cannot see us
            log.warning("Cannot record this server's hold in %s/holds (%s)", self.index_dir, exc.strerror)
        self._watcher = threading.Thread(target=self._watch, name="index-follower", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._hold is not None:
            self._hold.release()

    def _watch(self) -> None:
        while not self._stopped.wait(self._interval):
            self.check()

    def check(self, *, wait: bool = False) -> None:
        """Start loading the version `CURRENT` names if it is new; with `wait`, return when that is done."""
        with self._lock:
            if self._loading is not None and self._loading.is_alive():
                loading = self._loading
            else:
                try:
                    pointer = read_pointer(self.index_dir)
                except KafkaRagError as exc:
                    self._refuse(str(exc), str(exc))
                    return
                if pointer is None or pointer in (self.serving, self._refused):
                    return
                loading = threading.Thread(target=self._reload, args=(pointer,), name="index-loader", daemon=True)
                self._loading = loading
                loading.start()
        if wait:
            loading.join()

    def _reload(self, pointer: str) -> None:
        try:
            loaded = self._load(serving_path(self.index_dir))
        except KafkaRagError as exc:
            self._refuse(pointer, f"Index version {pointer} was not loaded, still serving {self.serving}: {exc}")
            return
        except Exception:
            log.exception("Index version %s was not loaded, still serving %s", pointer, self.serving)
            self._refused = pointer
            return
        if self._hold is not None:
            self._hold.set(pointer)  # held before it serves, so retention never removes it under us
        self._swap(loaded)
        log.info("Now serving index version %s (was %s)", pointer, self.serving)
        self.serving, self._refused = pointer, None
        del loaded
        # Requests that started on the old version end within seconds; then give its memory back.
        timer = threading.Timer(RELEASE_AFTER_S, release_memory)
        timer.daemon = True
        timer.start()

    def _refuse(self, pointer: str, message: str) -> None:
        if pointer != self._refused:
            log.error("%s", message)
            self._refused = pointer
