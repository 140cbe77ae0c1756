"""The golden Q&A set, checked line by line before scoring: a broken line stops a run instead of skewing it.

A line is one JSON object (extra fields are allowed and ignored):

    {"id", "question", "history"?, "answerable", "sources", "evidence", "facts", "tags"?, "origin"?}

`origin` is where a user question came from (e.g. a mailing-list thread address); it is kept, not checked.

With a corpus root, each evidence string must occur in one of its sources and each fact group must have an
alias in them (both case- and whitespace-normalised), so the set cannot drift away from the documents.
The sources are read as the ingest reads them (loader, then the chunker's document text, plus the title),
so evidence copied from an HTML page's visible text matches even though the raw file holds markup.

Every item belongs to one part, `tune` or `test`, fixed by a hash of its id: constants, weights and
thresholds are fitted on `select_part(items, "tune")` only, and the README quotes the test part.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from rag import GoldenFileError, LoaderError, extracted_text

ROLES = ("user", "assistant")
PARTS = ("tune", "test")


def part_of(item_id: str) -> str:
    """`tune` or `test`, from the first byte of sha256(id): the same on every run and machine, about 50/50."""
    return PARTS[hashlib.sha256(item_id.encode("utf-8")).digest()[0] & 1]


@dataclass(frozen=True)
class GoldenItem:
    """One question with what a correct retrieval (evidence) and a correct answer (facts) must contain."""

    id: str
    question: str
    answerable: bool
    sources: tuple[str, ...]
    evidence: tuple[str, ...]
    facts: tuple[tuple[str, ...], ...]  # each group: accepted aliases of one key fact
    history: tuple[dict[str, str], ...] = ()
    tags: tuple[str, ...] = ()
    origin: str = ""  # where a user question came from (a thread address); empty when written by hand

    @property
    def part(self) -> str:
        return part_of(self.id)


def select_part(items: Iterable[GoldenItem], part: str) -> list[GoldenItem]:
    """The items of one part, in file order; fit scripts use `select_part(load_golden(...), "tune")`."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    return [item for item in items if item.part == part]


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    """`--set GOLDEN CORPUS INDEX`, repeatable: the fit and tuning scripts' inputs."""
    parser.add_argument(
        "--set",
        nargs=3,
        action="append",
        required=True,
        type=Path,
        metavar=("GOLDEN", "CORPUS", "INDEX"),
        help="a golden file, its corpus root and an index of that corpus (repeat for several corpora)",
    )


def normalise(text: str) -> str:
    """Lowercase and collapse whitespace, so evidence matches across line wrapping and re-chunking."""
    return " ".join(text.lower().split())


def load_golden(path: Path, corpus_root: Path | None = None) -> list[GoldenItem]:
    """Read and validate a golden file; with `corpus_root`, evidence and facts are checked against sources."""
    name = str(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenFileError(name, 0, "file", f"cannot read it ({exc}); pass a UTF-8 JSONL file") from exc
    items: list[GoldenItem] = []
    first_line: dict[str, int] = {}
    texts: dict[str, str] = {}  # normalised extracted text, loaded once per source
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        item = _parse_line(name, number, line)
        if item.id in first_line:
            _fail(name, number, "id", f"duplicate id '{item.id}' (first used on line {first_line[item.id]})")
        first_line[item.id] = number
        if corpus_root is not None:
            _check_against_sources(name, number, item, corpus_root, texts)
        items.append(item)
    return items


def _fail(path: str, line: int, field: str, problem: str) -> NoReturn:
    raise GoldenFileError(path, line, field, problem)


def _parse_line(path: str, number: int, line: str) -> GoldenItem:
    """Turn one JSON line into a `GoldenItem`, naming the first field that is missing or malformed."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise GoldenFileError(path, number, "json", f"not valid JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(raw, dict):
        _fail(path, number, "json", "expected one JSON object per line")
    item_id = _text(raw, "id", path, number)
    question = _text(raw, "question", path, number)
    answerable = raw.get("answerable")
    if not isinstance(answerable, bool):
        _fail(path, number, "answerable", "missing or not true/false")
    sources = _strings(raw, "sources", path, number)
    evidence = _strings(raw, "evidence", path, number)
    facts = _fact_groups(raw, path, number)
    tags = _strings(raw, "tags", path, number) if "tags" in raw else ()
    history = _history(raw, path, number)
    origin = _text(raw, "origin", path, number) if "origin" in raw else ""
    for field, values in (("sources", sources), ("evidence", evidence), ("facts", facts)):
        if answerable and not values:
            _fail(path, number, field, "an answerable item needs at least one entry")
        if not answerable and values:
            _fail(path, number, field, "an unanswerable item must leave it empty")
    return GoldenItem(item_id, question, answerable, sources, evidence, facts, history, tags, origin)


def _text(raw: dict[str, Any], field: str, path: str, number: int) -> str:
    value = raw.get(field)
    if not isinstance(value, str) or not value.strip():
        _fail(path, number, field, "missing or not a non-empty string")
    return value


def _strings(raw: dict[str, Any], field: str, path: str, number: int) -> tuple[str, ...]:
    value = raw.get(field)
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        _fail(path, number, field, "missing or not a list of non-empty strings")
    return tuple(value)


def _fact_groups(raw: dict[str, Any], path: str, number: int) -> tuple[tuple[str, ...], ...]:
    value = raw.get("facts")
    if not isinstance(value, list) or not all(
        isinstance(group, list) and group and all(isinstance(a, str) and a.strip() for a in group) for group in value
    ):
        _fail(path, number, "facts", 'missing or not a list of alias lists, e.g. [["read_committed"]]')
    return tuple(tuple(group) for group in value)


def _history(raw: dict[str, Any], path: str, number: int) -> tuple[dict[str, str], ...]:
    value = raw.get("history", [])
    if not isinstance(value, list):
        _fail(path, number, "history", "not a list of {role, content} turns")
    for turn in value:
        if not isinstance(turn, dict) or turn.get("role") not in ROLES:
            _fail(path, number, "history", f"every turn needs a role of {' or '.join(ROLES)}")
        if not isinstance(turn.get("content"), str) or not turn["content"].strip():
            _fail(path, number, "history", "every turn needs non-empty string content")
    return tuple({"role": turn["role"], "content": turn["content"]} for turn in value)


def _check_against_sources(path: str, number: int, item: GoldenItem, corpus_root: Path, texts: dict[str, str]) -> None:
    """Evidence and facts must really be in the named documents, or the metrics would measure nothing."""
    for source in item.sources:
        if source not in texts:
            texts[source] = _source_text(path, number, corpus_root, source)
    own = [texts[source] for source in item.sources]
    for quote in item.evidence:
        if not any(normalise(quote) in text for text in own):
            _fail(path, number, "evidence", f"'{quote}' is not in {', '.join(item.sources)}; copy it exactly")
    for group in item.facts:
        if not any(normalise(alias) in text for alias in group for text in own):
            _fail(path, number, "facts", f"no alias of {list(group)} occurs in {', '.join(item.sources)}")


def _source_text(path: str, number: int, corpus_root: Path, source: str) -> str:
    """A source's title and text as the loaders extract them (what the chunks hold), normalised."""
    file = corpus_root / source
    if not file.is_file():
        _fail(path, number, "sources", f"'{source}' is not a file under {corpus_root}")
    try:
        text = extracted_text(file.read_bytes(), source)
    except LoaderError as exc:
        _fail(path, number, "sources", f"'{source}' cannot be loaded ({exc.reason}); name a file the ingest reads")
    return normalise(text)
