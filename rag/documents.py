"""Loading: a file on disk becomes a `Document` of titled sections, whatever its format.

Formats are detected by content as well as by extension (an error-knowledge record is JSON in a
`.txt` file). A file that cannot be loaded raises `LoaderError` with a short reason; the ingest
skips it, records the reason in the manifest, and goes on with the rest.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.cleaning import clean_text
from rag.errors import LoaderError

SUPPORTED_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".json", ".pdf")
MAX_FILE_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class Section:
    """A run of body text under one heading path.

    Text conventions every loader follows: paragraphs separated by a blank line, list items as
    "- item", code and log blocks as fenced ``` blocks, inline code in backticks.
    """

    headings: tuple[str, ...]  # heading path below the document title; () for text before any heading
    text: str
    anchor: str = ""  # HTML id of the heading, for links into the online page


@dataclass(frozen=True)
class Document:
    doc_id: str  # sha256 of the source path relative to its corpus root
    source_path: str  # relative to the corpus root, e.g. "003_0aeb7ccd02b3dd71.txt"
    title: str
    sections: tuple[Section, ...]
    format: str  # text | markdown | html | json | pdf
    url: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


def iter_source_files(root: Path) -> Iterator[tuple[Path, str]]:
    """(absolute path, path relative to the corpus root) for every candidate file, in a stable order."""
    for path, relative, reason in walk_sources(root):
        if not reason:
            yield path, relative


def walk_sources(root: Path) -> Iterator[tuple[Path, str, str]]:
    """(path, path relative to the root, skip reason or "") for every file under `root`, in a stable order.

    Hidden files and folders are left out silently. Symbolic links are never followed out of the root: a
    link leaving it, a link loop, a dangling link and a link to a folder are reported as skipped.
    """
    if not root.is_dir():
        yield root, root.name, ""
        return
    real_root = root.resolve()

    def walk(folder: Path) -> Iterator[tuple[Path, str, str]]:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            yield folder, folder.relative_to(root).as_posix(), f"unreadable folder ({exc.strerror})"
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            relative = path.relative_to(root).as_posix()
            if entry.is_symlink():
                yield path, relative, _link_problem(path, real_root)
            elif entry.is_dir(follow_symlinks=False):
                yield from walk(path)
            elif entry.is_file(follow_symlinks=False):
                yield path, relative, ""
            else:
                yield path, relative, "not a regular file"

    yield from walk(root)


def _link_problem(path: Path, real_root: Path) -> str:
    """Why a symbolic link is skipped; "" for a link to a file inside the source root."""
    try:
        target = path.resolve(strict=True)
    except FileNotFoundError:
        return "broken symlink (its target does not exist)"
    except (RuntimeError, OSError):  # Python 3.11 raises RuntimeError on a loop, 3.13 OSError(ELOOP)
        return "symlink loop"
    if not target.is_relative_to(real_root):
        return "symlink leads outside the source folder"
    if target.is_dir():
        return "symlink to a folder (its files are read where they are)"
    return ""


def document_id(source_path: str) -> str:
    return hashlib.sha256(source_path.encode("utf-8")).hexdigest()[:16]


def load_document(data: bytes, source_path: str) -> Document:
    """Parse one file's bytes; raises LoaderError(reason) when it holds nothing ingestible."""
    suffix = Path(source_path).suffix.lower()
    if not data.strip():
        raise LoaderError(source_path, "empty file")
    if len(data) > MAX_FILE_BYTES:
        raise LoaderError(source_path, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    if suffix == ".pdf" or data.startswith(b"%PDF-"):
        return _load_pdf(data, source_path)
    if suffix not in SUPPORTED_SUFFIXES:
        raise LoaderError(source_path, f"unsupported file type '{suffix or 'no extension'}'")
    text = _decode(data, source_path)
    stripped = text.lstrip()
    if suffix == ".json" or (suffix == ".txt" and stripped[:1] in "{[" and _looks_like_json(stripped)):
        return _load_json(text, source_path)
    if suffix in (".html", ".htm") or (suffix == ".txt" and re.match(r"(?is)\s*(<!doctype html|<html)", text)):
        return _load_html(text, source_path)
    if suffix in (".md", ".markdown"):
        return _load_markdown(text, source_path)
    return _load_plain_text(text, source_path)


def _decode(data: bytes, source_path: str) -> str:
    if b"\x00" in data and data[:2] not in (b"\xff\xfe", b"\xfe\xff"):  # anywhere: text has none
        raise LoaderError(source_path, "binary file (NUL bytes)")
    for encoding in ("utf-8-sig", "utf-16") if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ("utf-8-sig",):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if "\x00" in text or _control_char_share(text) > 0.05:
            raise LoaderError(source_path, "binary file (control characters)")
        return text
    raise LoaderError(source_path, "not valid UTF-8 text (undecodable bytes)")


def _control_char_share(text: str) -> float:
    sample = text[:8192]
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\n\r\t\f")
    return controls / max(len(sample), 1)


def _looks_like_json(text: str) -> bool:
    return text.rstrip().endswith(("}", "]"))


def _document(source_path: str, title: str, sections: list[Section], fmt: str, **extra: Any) -> Document:
    sections = [s for s in sections if s.text.strip()]
    if not sections:
        raise LoaderError(source_path, "no text content after cleaning")
    return Document(
        doc_id=document_id(source_path),
        source_path=source_path,
        title=title.strip() or title_from_path(source_path),
        sections=tuple(sections),
        format=fmt,
        **extra,
    )


def title_from_path(source_path: str) -> str:
    stem = Path(source_path).stem
    return re.sub(r"[-_]+", " ", stem).strip().capitalize() or source_path


# ---------------------------------------------------------------------------------------------- plain text

_BULLET = re.compile(r"^\s*[•·▪◦●*]\s+")
_NUMBERED_HEADING = re.compile(r"^\d{1,2}\.\s+[A-Z]")
_NOT_IN_HEADINGS = re.compile(r"[=(){}<>\[\]/\\|#$@;`\"]|: ")
_QUESTION_START = re.compile(r"^(How|What|Why|When|Where|Which|Who|Can|Could|Is|Are|Do|Does|Should|Will)\b")
# A heading never ends on a word that needs a continuation: such a line is a wrapped sentence.
_DANGLING_END = {
    "a",
    "an",
    "the",
    "to",
    "of",
    "and",
    "or",
    "if",
    "is",
    "are",
    "be",
    "with",
    "for",
    "when",
    "that",
    "in",
    "on",
    "by",
    "as",
    "at",
    "from",
    "than",
    "but",
}


def _heading_level(line: str, previous_blank: bool) -> int | None:
    """1 = numbered section, 2 = title-like line, 3 = FAQ question; None for body text.

    Plain text has no markup, so headings are recognised by shape: short, unindented, capitalised,
    no sentence punctuation at the end, and no code characters.
    """
    if not line or line[0].isspace():
        return None
    stripped = line.strip()
    if len(stripped) < 3 or not (stripped[0].isupper() or stripped[0].isdigit()):
        return None
    if stripped.endswith("?") and len(stripped) <= 200 and "`" not in stripped:
        return 3
    if len(stripped) > 90 or stripped[-1] in ".,;:!-" or _NOT_IN_HEADINGS.search(stripped):
        return None
    if stripped.rsplit(None, 1)[-1].lower() in _DANGLING_END:
        return None
    if _QUESTION_START.match(stripped):
        return 3
    if len(stripped.split()) > 12:
        return None
    if _NUMBERED_HEADING.match(stripped):
        return 1 if previous_blank else None
    if stripped[0].isdigit():
        return None
    return 2


def _load_plain_text(raw: str, source_path: str) -> Document:
    text = clean_text(raw)
    lines = text.split("\n")
    title_index = next((i for i, line in enumerate(lines) if line.strip()), 0)
    title = _BULLET.sub("", lines[title_index]).strip() if lines else ""
    faq = _is_faq(lines)
    if faq and _heading_level(lines[title_index], True) == 2:
        # A FAQ export starts with its first category heading, not a title.
        title, title_index = FAQ_TITLE, -1
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    body: list[str] = []

    def flush() -> None:
        content = _dedupe_paragraphs("\n".join(body)).strip()
        if content:
            sections.append(Section(tuple(h for _, h in path), content))
        body.clear()

    previous_blank = True
    for index, line in enumerate(lines):
        if index == title_index:
            previous_blank = True
            continue
        if line.strip() == title:
            continue
        level = _heading_level(line, previous_blank)
        if level == 2 and faq and 3 not in (_heading_level(n, True) for n in _next_text_lines(lines, index, 2)):
            level = None  # in a FAQ, a title-like line is a category only when a question follows it
        if level is not None:
            flush()
            # A FAQ question is filed under the page, not under the category line before it: an export keeps
            # some category lines and drops others, so a category's span is unknown, and nesting every later
            # question under it ("Exactly-Once Processing › Why does my consumer never get any data?") gives
            # those questions a subject they are not about, in their citations and in what retrieval reads.
            floor = 2 if faq and level == 3 else level
            while path and path[-1][0] >= floor:
                path.pop()
            path.append((level, line.strip()))
        else:
            body.append(_BULLET.sub("- ", line))
        previous_blank = not line.strip()
    flush()
    return _document(source_path, title, sections, "text")


FAQ_TITLE = "Frequently asked questions"


def _next_text_lines(lines: list[str], index: int, count: int) -> list[str]:
    return [line for line in lines[index + 1 :] if line.strip()][:count]


def _is_faq(lines: list[str]) -> bool:
    """Mostly question headings each followed by an answer: the shape of a FAQ page."""
    questions = sum(1 for line in lines if _heading_level(line, True) == 3)
    return questions >= 5 and questions >= 0.02 * len(lines)


def _dedupe_paragraphs(text: str) -> str:
    """Drop a paragraph that repeats the one before it (page titles printed twice by web exports)."""
    paragraphs = re.split(r"\n\s*\n", text)
    kept = [p for i, p in enumerate(paragraphs) if i == 0 or p.strip() != paragraphs[i - 1].strip()]
    return "\n\n".join(kept)


# ---------------------------------------------------------------------------------------------- markdown

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)


def _load_markdown(raw: str, source_path: str) -> Document:
    text = clean_text(_FRONT_MATTER.sub("", raw))
    title = ""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    body: list[str] = []
    in_fence = False

    def flush() -> None:
        content = "\n".join(body).strip()
        if content:
            sections.append(Section(tuple(h for _, h in path), content))
        body.clear()

    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            body.append(line)
            continue
        match = None if in_fence else _MD_HEADING.match(line)
        if not match:
            body.append(_BULLET.sub("- ", line))
            continue
        level, heading = len(match.group(1)), match.group(2).strip()
        if level == 1 and not title:
            flush()
            title = heading
            continue
        flush()
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, heading))
    flush()
    return _document(source_path, title, sections, "markdown")


# ---------------------------------------------------------------------------------------------- html


def _load_html(raw: str, source_path: str) -> Document:
    from rag.html_text import parse_html

    title, sections = parse_html(raw, title_from_path(source_path))
    cleaned = [Section(s.headings, clean_text(s.text), s.anchor) for s in sections]
    return _document(source_path, title, cleaned, "html")


# ---------------------------------------------------------------------------------------------- json


def _load_json(raw: str, source_path: str) -> Document:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LoaderError(source_path, f"malformed JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    records = data if isinstance(data, list) else [data]
    if not records or not all(isinstance(r, dict) for r in records):
        raise LoaderError(source_path, "JSON is not an object or a list of objects")
    if all("signature" in r or "root_cause" in r for r in records):
        return _error_knowledge_document(records, source_path)
    sections = [
        Section((str(r.get("title") or r.get("name") or f"Record {i + 1}"),), _json_to_text(r))
        for i, r in enumerate(records)
    ]
    return _document(source_path, title_from_path(source_path), sections, "json")


def _error_name(signature: str) -> str:
    head = signature.split(":", 1)[0].strip()
    return head.rsplit(".", 1)[-1] if re.fullmatch(r"[\w.$]+", head) else head


def _error_knowledge_document(records: list[dict[str, Any]], source_path: str) -> Document:
    """Error-knowledge records: signature, root cause, workarounds and dead ends as readable text.

    Translated fields (`*_zh`) are left out of the text; identifying fields stay as metadata.
    """
    sections: list[Section] = []
    metadata: dict[str, Any] = {"records": []}
    url = ""
    for record in records:
        signature = str(record.get("signature") or "").strip()
        name = _error_name(signature) if signature else str(record.get("id") or "Error")
        versions = [str(v.get("version")) for v in record.get("versions") or [] if isinstance(v, dict)]
        overview = [f"Error: `{name}`"]
        if signature:
            overview.append(f"Signature: {signature}")
        for label, key in (("Error code", "error_code"), ("Category", "category"), ("Regex", "regex")):
            if record.get(key):
                overview.append(f"{label}: {record[key]}")
        if versions:
            overview.append(f"Seen in: {', '.join(versions)}")
        sections.append(Section((name,), "\n".join(overview)))
        if record.get("root_cause"):
            sections.append(Section((name, "Root cause"), str(record["root_cause"]).strip()))
        workarounds = [
            _with_rate(str(w.get("how") or w.get("action") or ""), w.get("success_rate"), "works")
            for w in record.get("workarounds") or []
            if isinstance(w, dict)
        ]
        if any(workarounds):
            sections.append(Section((name, "Workarounds"), "\n".join(f"- {w}" for w in workarounds if w)))
        dead_ends = [
            _with_rate(
                " ".join(filter(None, (str(d.get("action") or ""), str(d.get("why_fails") or "")))),
                d.get("fail_rate"),
                "fails",
            )
            for d in record.get("dead_ends") or []
            if isinstance(d, dict)
        ]
        if any(dead_ends):
            sections.append(
                Section((name, "Dead ends (what does not help)"), "\n".join(f"- {d}" for d in dead_ends if d))
            )
        url = url or str(record.get("official_doc_url") or "")
        metadata["records"].append(
            {
                "id": record.get("id"),
                "error_name": name,
                "error_code": record.get("error_code"),
                "category": record.get("category"),
                "versions": versions,
                "official_doc_url": record.get("official_doc_url"),
            }
        )
    title = sections[0].headings[0] if len(records) == 1 else title_from_path(source_path)
    if len(records) == 1 and records[0].get("signature"):
        title = f"{title}: {str(records[0]['signature']).split(':', 1)[-1].strip()}"
    return _document(source_path, title, sections, "json", url=url, metadata=metadata)


def _with_rate(text: str, rate: Any, verb: str) -> str:
    text = text.strip()
    if text and isinstance(rate, int | float):
        return f"{text} (reported to {verb} {round(rate * 100)}% of the time)"
    return text


def _json_to_text(value: Any, depth: int = 0) -> str:
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            rendered = _json_to_text(item, depth + 1)
            if rendered:
                lines.append(f"{key}: {rendered}" if "\n" not in rendered else f"{key}:\n{rendered}")
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join(f"- {_json_to_text(item, depth + 1)}" for item in value if item not in (None, ""))
    return "" if value is None else str(value)


# ---------------------------------------------------------------------------------------------- pdf


def _load_pdf(data: bytes, source_path: str) -> Document:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
    except (PdfReadError, ValueError, KeyError) as exc:
        raise LoaderError(source_path, f"unreadable PDF ({exc})") from exc
    sections = [Section((f"Page {n}",), clean_text(text)) for n, text in enumerate(pages, start=1) if text]
    return _document(source_path, str(meta_title), sections, "pdf")
