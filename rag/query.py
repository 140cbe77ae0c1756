"""Turning what a user typed into a retrieval query: log reduction and follow-up rewriting.

Pasted logs and stack traces are mostly noise for retrieval (timestamps, thread names, hosts, stack
frames, hex ids); `reduce_to_signal` keeps the exception classes and messages, the `Caused by`
chain, config keys and error codes, plus any prose the user wrote around the paste. A follow-up
("and what's its default?") is rewritten deterministically into a standalone query by carrying the
subject of the earlier user turns; the LLM's rewrite replaces this when the LLM answerer is on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag.identifiers import extract_identifiers
from rag.lexical import tokenize

MAX_SIGNAL_CHARS = 1200
MAX_LINE_CHARS = 500  # regexes see at most this much of one line: a 200 KB single-line paste stays linear
FOLLOWUP_MAX_TERMS = 8  # a longer question in a conversation usually states its own subject

_TIMESTAMP = re.compile(
    r"\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
)
_LEVEL = re.compile(r"\b(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b")
_THREAD = re.compile(r"\[[^\]\n]{0,120}\]|\((?:[\w.-]*thread[\w.-]*|main)\)", re.I)
_HOST = re.compile(
    r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b|\b[\w-]+(?:\.[\w-]+)+:\d{2,5}\b|\b[\w-]+(?:\.[\w-]+){2,}/"
    r"|\b[\w-]+(?:\.[\w-]+)*\.(?:com|net|org|io|local|internal|cloud|corp|lan)\b(?!\.)"
)
_HEX = re.compile(r"\b(?:0x)?[0-9a-f]{12,}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_FRAME = re.compile(r"^\s*(?:at\s+[\w$.<>/]+\(.*\)|\.\.\.\s*\d+\s+more|~?\[[^\]]*\.jar[^\]]*\])\s*$")
_EXCEPTION_LINE = re.compile(r"(?:Caused by:\s*)?(?:[\w$]+\.)*[\w$]*(?:Exception|Error)\b(?::\s*.*)?")
_LOG_SHAPE = re.compile(r"^\s*at\s+[\w$.]+\(|Caused by:|\b(?:ERROR|WARN|INFO)\b|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", re.M)

_SIGNAL_LINE = re.compile(r"\b(?:ERROR|FATAL|WARN|WARNING|Caused by)\b|[\w$]+(?:Exception|Error)\b")

_ANAPHORA = re.compile(r"\b(it|its|it's|that|this|these|those|they|them|their|there|same|such|one)\b", re.I)
_FOLLOWUP_START = re.compile(r"^\s*(and|also|what about|how about|so|then|but|ok|okay)\b", re.I)


@dataclass(frozen=True)
class ReducedQuery:
    text: str
    trimmed: bool  # the input was a log paste or too long, and was reduced to its signal


def looks_like_log(text: str) -> bool:
    return len(_LOG_SHAPE.findall(text)) >= 2


def reduce_to_signal(text: str, max_chars: int) -> ReducedQuery:
    """Keep what identifies the problem; drop what identifies this particular occurrence."""
    text = _printable(text)
    if not looks_like_log(text) and len(text) <= max_chars:
        return ReducedQuery(" ".join(text.split()), trimmed=False)
    kept: list[str] = []
    seen: set[str] = set()
    lines = text[:400_000].split("\n")  # a 200 KB paste is scanned once, linearly
    if any(_SIGNAL_LINE.search(line[:MAX_LINE_CHARS]) for line in lines):
        # Heartbeats and INFO chatter drown the one line that matters: keep errors, exceptions and prose.
        lines = [
            line
            for line in lines
            if _SIGNAL_LINE.search(line[:MAX_LINE_CHARS]) or not _LOG_SHAPE.search(line[:MAX_LINE_CHARS])
        ]
    for raw_line in lines:
        if _FRAME.match(raw_line):
            continue
        line = raw_line[:MAX_LINE_CHARS]
        line = _HEX.sub(" ", _HOST.sub(" ", _THREAD.sub(" ", _LEVEL.sub(" ", _TIMESTAMP.sub(" ", line)))))
        line = " ".join(line.split()).strip(" -:|")
        if "Exception" in line or "Error" in line:
            exception = _EXCEPTION_LINE.search(line[:MAX_LINE_CHARS])
            if exception:
                line = exception.group(0).replace("Caused by:", "").strip()
        if len(line) < 4 or line.lower() in seen:
            continue
        seen.add(line.lower())
        kept.append(line[:300])
    limit = MAX_SIGNAL_CHARS if looks_like_log(text) else max(max_chars, MAX_SIGNAL_CHARS)
    return ReducedQuery(" ".join(kept)[:limit].strip(), trimmed=True)


def _printable(text: str) -> str:
    """Binary junk and control characters become spaces; any script's letters stay."""
    return "".join(ch if ch.isprintable() or ch in "\n\t" else " " for ch in text)


def is_followup(question: str, history: Sequence[Mapping[str, str]]) -> bool:
    """In a conversation, a short question without a subject of its own leans on the earlier turns."""
    if not any(turn.get("role") == "user" for turn in history):
        return False
    if extract_identifiers(question) and not _ANAPHORA.search(question):
        return False
    content = [t for t in tokenize(question) if len(t) > 3]
    return bool(_ANAPHORA.search(question) or _FOLLOWUP_START.match(question)) or len(content) <= FOLLOWUP_MAX_TERMS


def rewrite_followup(question: str, history: Sequence[Mapping[str, str]]) -> str:
    """Standalone query for a follow-up: the question plus the subject of the earlier user turns."""
    if not is_followup(question, history):
        return question
    user_turns = [turn.get("content", "") for turn in history if turn.get("role") == "user"]
    last_answer = next((t.get("content", "") for t in reversed(history) if t.get("role") == "assistant"), "")
    subject_identifiers: list[str] = []
    for turn in reversed(user_turns[-2:]):
        for identifier in extract_identifiers(turn):
            if identifier not in subject_identifiers:
                subject_identifiers.append(identifier)
    for identifier in extract_identifiers(last_answer)[:3]:
        if identifier not in subject_identifiers:
            subject_identifiers.append(identifier)
    previous = reduce_to_signal(user_turns[-1], MAX_SIGNAL_CHARS).text if user_turns else ""
    subject = " ".join(dict.fromkeys([*subject_identifiers[:6], *_content_words(previous)[:12]]))
    return f"{question} ({subject})" if subject else question


def _content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[A-Za-z][\w.\-]*", text) if len(w) > 3 and w.lower() not in _GENERIC]


_GENERIC = frozenset(
    [
        "what",
        "does",
        "mean",
        "when",
        "with",
        "that",
        "this",
        "have",
        "from",
        "there",
        "their",
        "about",
        "which",
        "should",
        "would",
        "could",
        "happen",
        "happens",
        "happening",
        "doing",
        "getting",
        "keep",
        "keeps",
        "mine",
    ]
)
