"""Sentence units of a chunk: the pieces the extractive answerer may quote.

Every unit is a verbatim substring of the chunk text, so a cited sentence can always be found in
its passage. List items and lines of a fenced block are units of their own; prose is split at
sentence ends. The same split runs at ingest (to embed the units once) and at query time.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9`\"'(\[])")
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|resp)\.$", re.I)
MIN_UNIT_CHARS = 12
MAX_UNIT_CHARS = 600


def split_units(text: str) -> list[str]:
    """Sentences, list items and code lines of `text`, in order, each a substring of it."""
    units: list[str] = []
    position = 0
    for fence in _FENCE.finditer(text):
        units.extend(_prose_units(text[position : fence.start()]))
        units.extend(_logical_lines(fence.group(1)))
        position = fence.end()
    units.extend(_prose_units(text[position:]))
    return [u for u in units if len(u) >= MIN_UNIT_CHARS]


def _prose_units(text: str) -> list[str]:
    units: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        for line in _logical_lines(paragraph):
            units.extend(_sentences(line))
    return units


def _logical_lines(paragraph: str) -> list[str]:
    """Each line stands alone, except a `# comment` line, which stays with the command it describes."""
    lines: list[tuple[int, str]] = []  # (offset in the paragraph, stripped line)
    offset = 0
    for raw in paragraph.split("\n"):
        if line := raw.strip():
            lines.append((paragraph.index(line, offset), line))
        offset += len(raw) + 1
    merged: list[str] = []
    for index, (start, line) in enumerate(lines):
        previous_start, previous = lines[index - 1] if index else (0, "")
        if previous.startswith("# ") and not line.startswith("#"):
            merged[-1] = paragraph[previous_start : start + len(line)]
        else:
            merged.append(line)
    return merged


def _sentences(line: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(line):
        candidate = line[start : match.start() + len(match.group(0).rstrip())].strip()
        if _ABBREVIATION.search(candidate):
            continue
        pieces.append(candidate)
        start = match.end()
    pieces.append(line[start:].strip())
    return [p[:MAX_UNIT_CHARS] for p in pieces if p]
