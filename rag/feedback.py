"""Thumbs up/down on answers, appended to one JSONL file shared by the web UI and the Slack bot.

Each record is written with a single `os.write` on a file opened with O_APPEND, under a process-wide
lock, so concurrent clicks never interleave lines. `export_thumbs_down` turns bad answers into draft
golden-set lines (same schema as `evals/golden.jsonl`, marked unreviewed) so they become eval cases.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag.errors import ConfigurationError
from rag.passages import Answer

_WRITE_LOCK = threading.Lock()


def check_writable(path: Path) -> None:
    """Fail at start-up, not at the first click, when the feedback file cannot be appended to."""
    try:
        os.close(_open_for_append(path))
    except OSError as exc:
        raise ConfigurationError(
            f"Feedback file {path} is not writable ({exc.strerror}): set KAFKA_RAG_FEEDBACK_PATH to a writable file"
        ) from exc


def feedback_record(
    answer: Answer,
    *,
    rating: str,
    history: Sequence[Mapping[str, str]] = (),
    comment: str = "",
    source: str = "web",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON object stored for one vote; `rating` is "up" or "down"."""
    if rating not in ("up", "down"):
        raise ValueError(f"rating must be 'up' or 'down', got {rating!r}")
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": source,
        "rating": rating,
        "comment": comment,
        "question": answer.question,
        "history": [dict(turn) for turn in history],
        "answer": answer.text,
        "abstained": answer.abstained,
        "query": answer.query,
        "citations": [
            {
                "marker": c.marker,
                "chunk_id": c.passage.chunk_id,
                "source_path": c.passage.source_path,
                "heading": c.passage.heading,
                "quotes": list(c.quotes),
            }
            for c in answer.citations
        ],
        "index_version": answer.index_version,
        "answerer": answer.answerer,
        **(dict(extra) if extra else {}),
    }


def append_feedback(path: Path, record: Mapping[str, Any]) -> None:
    """Append one line atomically (one write call on an O_APPEND descriptor)."""
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    with _WRITE_LOCK:
        fd = _open_for_append(path)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def _open_for_append(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def read_feedback(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def export_thumbs_down(path: Path) -> list[dict[str, Any]]:
    """Draft golden lines from thumbs-down votes, for a person to review and complete."""
    drafts = []
    for number, record in enumerate((r for r in read_feedback(path) if r.get("rating") == "down"), start=1):
        drafts.append(
            {
                "id": f"fb{number:03d}",
                "question": record["question"],
                "history": record.get("history", []),
                "answerable": not record.get("abstained", False),
                "sources": sorted({c["source_path"] for c in record.get("citations", [])}),
                "evidence": [],
                "facts": [],
                "tags": ["feedback", "unreviewed"],
                "reviewed": False,
                "feedback_comment": record.get("comment", ""),
                "bad_answer": record.get("answer", ""),
            }
        )
    return drafts
