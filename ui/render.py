"""Answer → chat Markdown for the web UI; pure functions, no Gradio.

Passage text, titles, file names, questions and answers are untrusted: a document may hold
`<script>`, `<img onerror=…>` or a `javascript:` link. Everything from them is escaped here (HTML
characters as entities, every other ASCII punctuation mark backslash-escaped, leading spaces as
`&nbsp;`), so the chat's Markdown renderer shows it as written and builds no tag, link, image,
heading, list or code block from it. Only markup this module writes itself survives: the `[n]`
citation spans, `<mark>` around cited sentences, code spans and fences of the answer (whose content
the renderer prints literally) and http(s) links from the index's own `url` field.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from rag import Answer, Citation, IndexStatus, Passage

# Labels are plain text: an emoji renders as an empty box on a machine without an emoji font.
SOURCES_TITLE = "Sources"
RELATED_TITLE = "Possibly related (not enough to answer)"
RELATED_EXCERPT_CHARS = 400

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_BACKSLASHED = frozenset(string.punctuation) - set(_ENTITIES) - {";", "'"}
_INLINE = re.compile(
    r"(?P<code>(`+)[^`\n]+?\2(?!`))"
    r"|\*\*(?=\S)(?P<bold>[^*\n]+?)(?<=\S)\*\*"
    r"|\[(?P<marker>\d+)\]"
)
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_BULLET = re.compile(r"^\s*[-*+]\s+")
_SAFE_URL = re.compile(r"https?://[A-Za-z0-9.\-]+(?::\d+)?(?:/[^\s<>()\[\]\"'`\\]*)?")


def escape_markdown(text: str) -> str:
    """Untrusted text → Markdown that renders exactly as `text`, with no markup of any kind."""
    return "\n".join(_indent(line) + _escape_inline(line.lstrip(" \t")) for line in text.split("\n"))


def _indent(line: str) -> str:
    """Leading whitespace as non-breaking spaces, so it cannot start an indented code block."""
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    return "&nbsp;" * len(indent.replace("\t", "    "))


def _escape_inline(text: str) -> str:
    return "".join(_escape_char(ch) for ch in text)


def _escape_char(ch: str) -> str:
    if ch in _ENTITIES:
        return _ENTITIES[ch]
    if ch in _BACKSLASHED:
        return "\\" + ch
    return ch


def escape_attribute(text: str) -> str:
    """Text for a double-quoted HTML attribute value."""
    return "".join(_ENTITIES.get(ch, ch) for ch in text).replace("\n", " ")


def render_user(question: str) -> str:
    """The user's own message, shown as typed."""
    return escape_markdown(question)


def render_answer(answer: Answer) -> str:
    """The answer bubble: text with clickable-looking `[n]` markers, then the assistant's notes."""
    labels = {c.marker: c.passage.heading for c in answer.citations}
    body = render_answer_text(answer.text, labels)
    notes = "\n\n".join(f"*Note: {escape_markdown(note)}*" for note in answer.notes)
    return f"{body}\n\n{notes}" if notes else body


def render_answer_text(text: str, labels: dict[int, str]) -> str:
    """Answer Markdown (possibly partial, while streaming) made inert; known `[n]` become citation spans."""
    lines: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if fence is not None:
            if match and _closes(match.group(1), fence):
                lines.append(fence)  # our own closer, so the renderer ends the block exactly here
                fence = None
            else:
                lines.append(line)  # fence content is printed literally by the renderer
        elif match:
            fence = match.group(1)
            lines.append(fence)  # at column 0, outside any list; the info string is dropped: it could carry anything
        else:
            lines.append(_render_answer_line(line, labels))
    if fence is not None:
        lines.append(fence)
    return "\n".join(lines)


def _closes(run: str, fence: str) -> bool:
    """A run of the fence's character at least as long as it ends the block (CommonMark, or earlier)."""
    return run[0] == fence[0] and len(run) >= len(fence)


def _render_answer_line(line: str, labels: dict[int, str]) -> str:
    bullet = _BULLET.match(line)
    prefix, rest = ("- ", line[bullet.end() :]) if bullet else (_indent(line), line.lstrip(" \t"))
    parts: list[str] = []
    position = 0
    for token in _INLINE.finditer(rest):
        if token.group("marker") and int(token.group("marker")) not in labels:
            continue
        parts.append(_escape_inline(rest[position : token.start()]))
        if token.group("code"):
            parts.append(token.group("code"))  # code spans are printed literally by the renderer
        elif token.group("bold"):
            parts.append(f"<strong>{_escape_inline(token.group('bold'))}</strong>")
        else:
            number = int(token.group("marker"))
            title = escape_attribute(labels[number])
            parts.append(f'<span class="cite" title="{title}">[{number}]</span>')
        position = token.end()
    parts.append(_escape_inline(rest[position:]))
    return prefix + "".join(parts)


def render_sources(citations: Sequence[Citation]) -> str:
    """One entry per cited passage: marker, title › section, file, score, text with cited sentences marked."""
    return "\n\n---\n\n".join(
        _passage_entry(c.passage, label=f"[{c.marker}]", text=highlight(c.passage.text, c.quotes)) for c in citations
    )


def render_related(passages: Sequence[Passage]) -> str:
    """Closest passages after an abstention, shown apart from the answer and without markers."""
    return "\n\n---\n\n".join(_passage_entry(p, label="•", text=escape_markdown(_excerpt(p.text))) for p in passages)


def _passage_entry(passage: Passage, *, label: str, text: str) -> str:
    where = [f"file {escape_markdown(passage.source_path)}", f"score {passage.score:.3f}"]
    if passage.url and _SAFE_URL.fullmatch(passage.url):
        shown = passage.url.split("://", 1)[1]
        where.append(f"document: [{escape_markdown(shown)}]({passage.url})")
    quoted = "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))
    return f"**{escape_markdown(label)} {escape_markdown(passage.heading)}**  \n{' · '.join(where)}\n\n{quoted}"


def _excerpt(text: str) -> str:
    if len(text) <= RELATED_EXCERPT_CHARS:
        return text
    return text[:RELATED_EXCERPT_CHARS].rsplit(" ", 1)[0] + " …"


def highlight(text: str, quotes: Sequence[str]) -> str:
    """Escaped passage text with each quoted sentence wrapped in `<mark>` (whitespace-tolerant match)."""
    marked = [False] * len(text)
    for quote in quotes:
        words = quote.split()
        if not words:
            continue
        pattern = re.compile(r"\s+".join(re.escape(word) for word in words))
        for found in pattern.finditer(text):
            marked[found.start() : found.end()] = [True] * (found.end() - found.start())
    lines = []
    start = 0
    for line in text.split("\n"):
        lines.append(_highlight_line(line, marked[start : start + len(line)]))
        start += len(line) + 1
    return "\n".join(lines)


def _highlight_line(line: str, marked: list[bool]) -> str:
    body = line.lstrip(" \t")
    indent = len(line) - len(body)
    out = [_indent(line)]
    run: list[str] = []
    inside = False
    for ch, is_marked in zip(body, marked[indent:], strict=True):
        if is_marked != inside:
            out.append(_close_run(run, inside))
            run, inside = [], is_marked
        run.append(ch)
    out.append(_close_run(run, inside))
    return "".join(out)


def _close_run(run: list[str], marked: bool) -> str:
    text = _escape_inline("".join(run))
    return f"<mark>{text}</mark>" if marked and text.strip() else text


def sources_title(answer: Answer) -> str:
    return f"{SOURCES_TITLE} ({len(answer.citations)})"


def related_title(answer: Answer) -> str:
    return f"{RELATED_TITLE} ({len(answer.related)})"


def render_error(message: str) -> str:
    """A short error bubble; the message is escaped like any other text."""
    return f"**Error:** {escape_markdown(message)}"


def render_status(status: IndexStatus, *, retrieval: str, answerer: str) -> str:
    """Footer line: what the assistant is answering from."""
    model = status.model.rsplit("/", 1)[-1]
    parts = [
        f"Index {escape_markdown(status.version)}",
        f"{status.documents} documents",
        f"{status.chunks} chunks",
        f"model {escape_markdown(model)}",
        f"built {escape_markdown(status.built_at)}",
        f"{escape_markdown(retrieval)} retrieval",
        f"{escape_markdown(answerer)} answerer",
    ]
    if status.skipped:
        parts.append(f"{status.skipped} files skipped")
    return " · ".join(parts)
