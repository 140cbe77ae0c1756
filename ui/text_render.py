"""Answer → plain Markdown for machine clients (MCP tools, the OpenAI-compatible API); pure functions.

Unlike `ui.render`, nothing here is escaped for a browser: the reader is an agent or a chat front-end that
renders (and sanitises) Markdown itself. The answer keeps its `[n]` markers and the sources follow as a
list, one line per marker, so a client that shows only text still shows where each claim comes from.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag import Answer, Passage

SOURCES_HEADING = "**Sources**"
RELATED_HEADING = "**Possibly related (not enough to answer)**"


def passage_line(passage: Passage) -> str:
    """`title › section` (`source path`) and its link when the document has one."""
    line = f"{passage.heading} (`{passage.source_path}`)"
    return f"{line} {passage.url}" if passage.url else line


def render_answer(answer: Answer) -> str:
    """The answer text with its `[n]` markers, its notes, then the sources (or related passages) as a list."""
    parts = [answer.text]
    parts += [f"> Note: {note}" for note in answer.notes]
    if answer.citations:
        sources = "\n".join(f"- [{c.marker}] {passage_line(c.passage)}" for c in answer.citations)
        parts.append(f"{SOURCES_HEADING}\n{sources}")
    if answer.related:
        related = "\n".join(f"- {passage_line(p)}" for p in answer.related)
        parts.append(f"{RELATED_HEADING}\n{related}")
    return "\n\n".join(parts)


def render_passages(passages: Sequence[Passage]) -> str:
    """Search results for an agent: `[n] title › section`, where it comes from and its score, then the text."""
    if not passages:
        return "No passages found."
    return "\n\n---\n\n".join(
        f"[{rank}] {passage_line(p)}, score {p.score:.3f}\n\n{p.text}" for rank, p in enumerate(passages, start=1)
    )


def strip_sources(text: str) -> str:
    """An earlier reply as history: the answer without the sources list `render_answer` appended."""
    for heading in (SOURCES_HEADING, RELATED_HEADING):
        head, found, _ = text.partition(f"\n\n{heading}\n")
        if found:
            text = head
    return text
