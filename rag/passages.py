"""The values that cross the service boundary: passages, citations, answers, index status.

Adapters (CLI, web UI, Slack, evals) see only these frozen dataclasses and their `to_dict()`
forms; no LangChain, FAISS or Spark object ever leaves `rag`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

NOT_COVERED = "The knowledge base does not cover this."  # an abstention's answer, and what the LLM must reply
MIN_REPEATED_CHARS = 20  # the shortest text taken for the overlap chunking repeats at the start of the next chunk


@dataclass(frozen=True)
class Passage:
    """One retrieved chunk with the score that ranked it."""

    chunk_id: str
    doc_id: str
    title: str
    section_path: tuple[str, ...]  # document title › heading › sub-heading
    source_path: str  # relative to the corpus root it was ingested from
    text: str
    score: float  # fused score for hybrid, cosine for dense, BM25 for bm25
    url: str = ""  # where the document lives online, when known
    identifiers: tuple[str, ...] = ()

    @property
    def heading(self) -> str:
        """`title › section › sub-section`, the label people see."""
        return " › ".join(self.section_path) if self.section_path else self.title

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def merged(passages: Sequence[Passage]) -> Passage:
    """Chunks of one section as one passage, in the order given (the document's): the first's label and score,
    their texts joined, the text that chunking repeats at the start of the next chunk said once. An answer cites
    a section once, not once per chunk it happens to quote."""
    text = passages[0].text
    for passage in passages[1:]:
        text = _joined(text, passage.text)
    identifiers = tuple(dict.fromkeys(i for passage in passages for i in passage.identifiers))
    return dataclasses.replace(passages[0], text=text, identifiers=identifiers)


def _joined(before: str, after: str) -> str:
    for size in range(min(len(before), len(after)), MIN_REPEATED_CHARS - 1, -1):
        if before.endswith(after[:size]):
            return before + after[size:]
    return f"{before}\n\n{after}"


@dataclass(frozen=True)
class Citation:
    """Marker `[n]` in the answer text, the passage it points to, and the sentences taken from it."""

    marker: int
    passage: Passage
    quotes: tuple[str, ...] = ()  # the answer's sentences attributed to this passage, verbatim from it

    def to_dict(self) -> dict[str, Any]:
        return {"marker": self.marker, "quotes": list(self.quotes), **self.passage.to_dict()}


@dataclass(frozen=True)
class Answer:
    """What `Assistant.ask` returns. Every `[n]` in `text` has a matching citation with marker n."""

    question: str
    text: str  # Markdown with inline [n] markers
    citations: tuple[Citation, ...]
    abstained: bool
    query: str  # the retrieval query actually used (after follow-up rewriting and log reduction)
    related: tuple[Passage, ...] = ()  # on abstention: closest passages, shown as "possibly related"
    notes: tuple[str, ...] = ()  # visible notes, e.g. "Input trimmed to its error signal"
    cautioned: bool = False  # answered, with a low-confidence note (`rag.abstention.answer_confidence`)
    timings_ms: dict[str, float] = field(default_factory=dict)
    answerer: str = "extractive"
    index_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "text": self.text,
            "citations": [c.to_dict() for c in self.citations],
            "abstained": self.abstained,
            "query": self.query,
            "related": [p.to_dict() for p in self.related],
            "notes": list(self.notes),
            "cautioned": self.cautioned,
            "timings_ms": dict(self.timings_ms),
            "answerer": self.answerer,
            "index_version": self.index_version,
        }


@dataclass(frozen=True)
class SearchResult:
    """Ranked passages for one query, without an answer (the eval runner scores these)."""

    query: str
    passages: tuple[Passage, ...]
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexStatus:
    version: str
    documents: int
    chunks: int
    model: str
    built_at: str
    index_type: str
    skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
