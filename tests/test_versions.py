"""The writer lock, server holds, retention and rollback, on small synthetic versions (real FAISS, real flock).

Locks are taken through separate open file descriptions, so a second lock in this process conflicts exactly
as a second process would; the cross-process cases (kill -9, Ctrl-C, two CLI ingests) are in
test_index_operations.py.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from rag.errors import IndexLockedError, IndexNotFoundError, IndexStoreError
from rag.index_lock import ServerHold, held_versions, is_locked, writer_lock
from rag.index_store import current_version, write_version
from rag.versions import list_versions, prune_versions, remove_dead_staging, rollback
from tests.test_index_store import _basis, _manifest, _table


def _write(index_dir: Path, seed: int) -> str:
    table, _ = _table(6, seed)
    return write_version(index_dir, table, _manifest(), flat_max=1000, token_basis=_basis())


def _names(index_dir: Path) -> list[str]:
    return sorted(p.name for p in (index_dir / "versions").iterdir())


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    index_dir = tmp_path / "index"
    with writer_lock(index_dir):
        assert is_locked(index_dir)
        with pytest.raises(IndexLockedError) as caught, writer_lock(index_dir):
            pass
    message = str(caught.value)
    assert re.fullmatch(
        rf"another ingest \(pid {os.getpid()}, started \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ\) is building "
        rf"{re.escape(str(index_dir))}/; wait for it or use another --index",
        message,
    ), message
    assert not is_locked(index_dir)
    with writer_lock(index_dir):  # released: the next writer gets it at once
        pass


def test_a_waiting_writer_gets_the_lock_when_it_is_released(tmp_path):
    index_dir = tmp_path / "index"
    order: list[str] = []
    released = threading.Event()

    def second() -> None:
        with writer_lock(index_dir, wait=True):
            order.append("second has it")

    with writer_lock(index_dir):
        waiter = threading.Thread(target=second)
        waiter.start()
        time.sleep(0.6)
        assert order == []  # still waiting
        order.append("first releases")
        released.set()
    waiter.join(5)
    assert order == ["first releases", "second has it"]


def test_the_lock_is_released_when_the_block_raises(tmp_path):
    index_dir = tmp_path / "index"
    with pytest.raises(KeyboardInterrupt), writer_lock(index_dir):
        raise KeyboardInterrupt
    assert not is_locked(index_dir)


def test_retention_keeps_the_newest_the_serving_and_the_held_versions(tmp_path):
    index_dir = tmp_path / "index"
    built = [_write(index_dir, seed) for seed in range(6)]
    hold = ServerHold(index_dir)
    hold.set(built[0])  # a running server still answers from the oldest
    (index_dir / "CURRENT").write_text(built[1] + "\n")  # and someone rolled back to the second
    removed = prune_versions(index_dir, keep=2)
    assert removed == built[2:4]
    assert _names(index_dir) == [built[0], built[1], built[4], built[5]]
    hold.release()
    assert held_versions(index_dir) == set()
    assert prune_versions(index_dir, keep=2) == [built[0]]


def test_a_dead_servers_hold_protects_nothing_and_is_removed(tmp_path):
    index_dir = tmp_path / "index"
    built = [_write(index_dir, seed) for seed in range(3)]
    stale = index_dir / "holds" / "99999-dead"
    stale.parent.mkdir()
    stale.write_text(built[0] + "\n")  # written by a server that was killed: nobody holds its lock
    assert held_versions(index_dir) == set()
    assert not stale.exists()
    assert prune_versions(index_dir, keep=1) == built[:2]


def test_staging_folders_of_dead_builds_are_removed(tmp_path):
    index_dir = tmp_path / "index"
    _write(index_dir, 1)
    (index_dir / "versions" / ".staging-20260101T000000000000Z").mkdir()
    assert remove_dead_staging(index_dir) == [".staging-20260101T000000000000Z"]
    assert not list((index_dir / "versions").glob(".staging-*"))


def test_list_versions_marks_serving_held_and_damaged(tmp_path):
    index_dir = tmp_path / "index"
    built = [_write(index_dir, seed) for seed in range(3)]
    (index_dir / "versions" / built[0] / "manifest.json").write_text("{not json")
    hold = ServerHold(index_dir)
    hold.set(built[1])
    versions = {v.name: v for v in list_versions(index_dir)}
    hold.release()
    assert list(versions) == built
    assert versions[built[2]].serving and not versions[built[1]].serving
    assert versions[built[1]].held and not versions[built[2]].held
    assert versions[built[2]].chunks == 0 and versions[built[2]].size_bytes > 0
    assert "manifest.json is not valid JSON" in versions[built[0]].problem
    assert versions[built[1]].problem == ""


def test_rollback_goes_to_the_previous_complete_version(tmp_path):
    index_dir = tmp_path / "index"
    built = [_write(index_dir, seed) for seed in range(3)]
    (index_dir / "versions" / built[1] / "faiss.index").write_bytes(b"trunc")  # damaged: skipped over
    assert rollback(index_dir) == built[0]
    assert current_version(index_dir) == built[0]
    assert rollback(index_dir, built[2]) == built[2]
    with pytest.raises(IndexStoreError, match=r"faiss.index is unreadable"):
        rollback(index_dir, built[1])
    with pytest.raises(IndexStoreError, match=r"No version 2000 in .*: see 'kafka-rag index list'"):
        rollback(index_dir, "2000")
    assert current_version(index_dir) == built[2]


def test_rollback_needs_the_writer_lock_and_an_index(tmp_path):
    index_dir = tmp_path / "index"
    with pytest.raises(IndexNotFoundError):
        rollback(index_dir)
    _write(index_dir, 0)
    with writer_lock(index_dir), pytest.raises(IndexLockedError):
        rollback(index_dir)
    with pytest.raises(IndexStoreError, match="No complete version older than"):
        rollback(index_dir)
