"""Version retention and rollback: `kafka-rag index list` and `kafka-rag index rollback [VERSION]`.

Retention runs after a successful publish, under the writer lock: the newest `keep` complete versions
stay, and so do the serving one and every version a live server holds (`rag.index_lock.held_versions`).
Staging folders are removed at the start of every ingest: the writer lock is held then, so any
`.staging-*` left over belongs to a build that died.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.errors import IndexNotFoundError, IndexStoreError
from rag.index_lock import held_versions, writer_lock
from rag.index_store import VERSION_PARTS, load_version, read_pointer, read_version_manifest, switch_pointer


@dataclass(frozen=True)
class VersionInfo:
    name: str
    size_bytes: int
    documents: int
    chunks: int
    built_at: str
    serving: bool
    held: bool
    problem: str  # empty for a complete, readable version; else why it cannot serve

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.name,
            "size_bytes": self.size_bytes,
            "documents": self.documents,
            "chunks": self.chunks,
            "built_at": self.built_at,
            "serving": self.serving,
            "held": self.held,
            "problem": self.problem,
        }


def _version_folders(index_dir: Path) -> list[Path]:
    folder = index_dir / "versions"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def list_versions(index_dir: Path) -> list[VersionInfo]:
    """Every version folder, oldest first, with its counts, size and whether it serves or is held."""
    serving = read_pointer(index_dir)
    held = held_versions(index_dir)
    found = []
    for path in _version_folders(index_dir):
        try:
            manifest = read_version_manifest(path)
            counts, problem, built = manifest["counts"], "", str(manifest.get("built_at", ""))
            missing = [p for p in VERSION_PARTS if not (path / p).exists()]
            if missing:
                problem = f"missing {', '.join(missing)}"
        except IndexStoreError as exc:
            counts, problem, built = {}, str(exc).split(": re-run")[0], ""
        found.append(
            VersionInfo(
                path.name,
                _size(path),
                int(counts.get("documents", 0)),
                int(counts.get("chunks", 0)),
                built,
                path.name == serving,
                path.name in held,
                problem,
            )
        )
    return found


def remove_dead_staging(index_dir: Path) -> list[str]:
    """Remove `.staging-*` folders; call only while holding the writer lock (so their builds are dead)."""
    folder = index_dir / "versions"
    removed = []
    if folder.is_dir():
        for stale in folder.glob(".staging-*"):
            shutil.rmtree(stale, ignore_errors=True)
            removed.append(stale.name)
    return removed


def prune_versions(index_dir: Path, keep: int) -> list[str]:
    """Remove complete versions beyond the newest `keep`, never the serving or a held one; call under the lock."""
    serving = read_pointer(index_dir)
    held = held_versions(index_dir)
    folders = _version_folders(index_dir)
    removed = []
    for path in folders[: max(len(folders) - keep, 0)]:
        if path.name != serving and path.name not in held:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    return removed


def rollback(index_dir: Path, version: str | None = None, *, wait: bool = False) -> str:
    """Point `CURRENT` at `version` (default: the newest complete version before the serving one)."""
    with writer_lock(index_dir, wait=wait):
        serving = read_pointer(index_dir)
        names = [p.name for p in _version_folders(index_dir)]
        if not names:
            raise IndexNotFoundError(f"No index at {index_dir}/: run 'kafka-rag ingest' first")
        if version is None:
            earlier = [n for n in names if serving is None or n < serving]
            candidates = [n for n in reversed(earlier) if _complete(index_dir / "versions" / n)]
            if not candidates:
                raise IndexStoreError(
                    f"No complete version older than {serving} in {index_dir}/: see 'kafka-rag index list'"
                )
            version = candidates[0]
        elif version not in names:
            raise IndexStoreError(f"No version {version} in {index_dir}/: see 'kafka-rag index list'")
        load_version(index_dir / "versions" / version)  # refuse a damaged version with its own clear error
        switch_pointer(index_dir, version)
    return version


def _complete(path: Path) -> bool:
    try:
        load_version(path)
    except IndexStoreError:
        return False
    return True
