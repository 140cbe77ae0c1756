"""Structure-aware chunking: sections stay whole when they fit, headings travel with their body.

A section (a FAQ question with its answer, a heading with its body) becomes one chunk when it fits
`chunk_size`, a reference entry (a description, then key/value rows) when it fits twice that; a longer
one is split at paragraph boundaries, never inside a fenced code/log block unless the block alone is too
large (a piece that starts inside it records so: `continues_code`), with `overlap` characters of trailing
sentences carried over; a lead-in ("... are given below:") that would end a piece starts the next one,
with what it introduces.
A section too small to stand alone is packed with the sub-sections that follow it (an introduction
with its first topic); a sibling keeps a chunk of its own, so its heading stays in its own section
path. Every chunk records its section path, and the text that gets embedded is prefixed with that path.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rag.documents import Document, Section, load_document
from rag.identifiers import extract_identifiers
from rag.units import ends_in_key_values, inside_fence

CHUNKER_NAME = "structure-aware"
# Chunks carry their identifiers: a new extractor means a full rebuild (8: two-part keys; 9: lists of error
# codes; "KIP-467:" / "KAFKA-9144:" before a title, where only a host's port was meant to be left out; "KIP 467";
# 10: a reference entry kept whole; 11: a definition that is a list follows its term on a line of its own).
CHUNKER_VERSION = 11
PATH_SEPARATOR = " › "
_MIN_STANDALONE_CHARS = 200  # smaller sections join the next one instead of making a thin chunk
# A fenced block, or a reference entry, stays whole up to this many chunk sizes: cut, a block loses its
# command and an entry its description (its rows would be shown under a trailing note).
_WHOLE_BLOCK_CHUNKS = 2


@dataclass(frozen=True)
class Chunk:
    chunk_id: str  # content hash of (document, section path, text): stable across runs and models
    doc_id: str
    source_path: str
    title: str
    section_path: tuple[str, ...]  # document title › heading › sub-heading
    text: str
    identifiers: tuple[str, ...]
    start: int  # character offsets of `text` in `document_text(document)`
    end: int
    url: str = ""
    continues_code: bool = False  # begins inside a fenced block too long for one chunk (`inside_fence`)


def dense_text(section_path: Sequence[str], text: str) -> str:
    """What the model sees of a chunk (unless its vector is its units' mean, `rag.ingest.chunk_texts`):
    the section path first, so a heading informs every piece of its body."""
    return f"{PATH_SEPARATOR.join(section_path)}\n\n{text}"


def lexical_text(section_path: Sequence[str], text: str) -> str:
    """What BM25, term coverage and identifier extraction read: the same words as `dense_text`."""
    return f"{' '.join(section_path)}\n{text}"


def document_text(document: Document) -> str:
    """The document as one string (headings as lines); chunk offsets index into it."""
    return "\n\n".join(_section_block(section) for section in document.sections)


def extracted_text(data: bytes, source_path: str) -> str:
    """A file's title and text as the loaders extract them (what the chunks hold); raises `LoaderError`."""
    document = load_document(data, source_path)
    return f"{document.title}\n\n{document_text(document)}"


def chunk_document(document: Document, chunk_size: int, overlap: int) -> list[Chunk]:
    """Split one document into chunks; deterministic for the same document and settings."""
    full_text = document_text(document)
    chunks: list[Chunk] = []
    cursor = 0
    pending: list[tuple[Section, int]] = []  # small sections waiting to be packed with the next one
    for section in document.sections:
        block = _section_block(section)
        position = full_text.find(block, cursor)
        cursor = position + len(block)
        pending_chars = sum(len(_section_block(s)) for s, _ in pending)
        if pending and (pending_chars + len(block) > chunk_size or not _below(section, pending[0][0])):
            # Packing would split the next section, or bury a sibling's heading in the text (a setting's
            # entry would read as part of the one before): a small section stands alone instead.
            chunks.extend(_chunk_sections(document, pending, chunk_size, overlap))
            pending, pending_chars = [], 0
        pending.append((section, position))
        if pending_chars + len(block) < _MIN_STANDALONE_CHARS and section is not document.sections[-1]:
            continue
        chunks.extend(_chunk_sections(document, pending, chunk_size, overlap))
        pending = []
    return chunks


def _below(section: Section, parent: Section) -> bool:
    """`section` sits under `parent`'s heading: its path extends `parent`'s."""
    depth = len(parent.headings)
    return len(section.headings) > depth and section.headings[:depth] == parent.headings


def _section_block(section: Section) -> str:
    heading = section.headings[-1] if section.headings else ""
    return f"{heading}\n{section.text}" if heading else section.text


def _chunk_sections(
    document: Document, sections: list[tuple[Section, int]], chunk_size: int, overlap: int
) -> Iterator[Chunk]:
    """One or more sections (only the last may be large) into chunks named after the first section."""
    first, start = sections[0]
    text = "\n\n".join(_section_block(s) if i else s.text for i, (s, _) in enumerate(sections))
    start += len(_section_block(first)) - len(first.text)
    path = (document.title, *first.headings)
    anchor = next((s.anchor for s, _ in sections if s.anchor), "")
    url = f"{document.url.split('#')[0]}#{anchor}" if document.url and anchor else document.url
    for piece_start, piece in _split(text, chunk_size, overlap):
        yield Chunk(
            chunk_id=_chunk_id(document.doc_id, path, piece),
            doc_id=document.doc_id,
            source_path=document.source_path,
            title=document.title,
            section_path=path,
            text=piece,
            identifiers=extract_identifiers(lexical_text(path, piece)),
            start=start + piece_start,
            end=start + piece_start + len(piece),
            url=url,
            continues_code=inside_fence(text[:piece_start]),
        )


def _chunk_id(doc_id: str, path: tuple[str, ...], text: str) -> str:
    payload = "\x1f".join((doc_id, *path, text)).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()[:20]


_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])|\n(?=\s*(?:- |\d+\. ))")


def _blocks(text: str) -> list[tuple[int, str]]:
    """Paragraphs and whole fenced blocks with their offsets in `text`."""
    blocks: list[tuple[int, str]] = []
    position = 0
    for fence in _FENCE.finditer(text):
        blocks.extend(_paragraphs(text[position : fence.start()], position))
        blocks.append((fence.start(), fence.group(0)))
        position = fence.end()
    blocks.extend(_paragraphs(text[position:], position))
    return blocks


def _paragraphs(text: str, offset: int) -> list[tuple[int, str]]:
    return [(offset + m.start(), m.group(0)) for m in re.finditer(r"\S(?:.|\n(?!\s*\n))*", text)]


def _split(text: str, chunk_size: int, overlap: int) -> Iterator[tuple[int, str]]:
    """(offset, piece) pairs covering `text`; pieces end at block, then sentence, then line boundaries."""
    whole = _WHOLE_BLOCK_CHUNKS * chunk_size
    if len(text) <= chunk_size or (len(text) <= whole and ends_in_key_values(text)):
        yield 0, text
        return
    units: list[tuple[int, str]] = []
    for offset, block in _blocks(text):
        if len(block) <= chunk_size or (block.startswith("```") and len(block) <= whole):
            units.append((offset, block))
        else:
            units.extend(_sentences(block, offset, chunk_size))
    piece: list[tuple[int, str]] = []
    for unit in units:
        if piece and unit[0] + len(unit[1]) - piece[0][0] > chunk_size:
            # A lead-in ("... are given below:") goes with what it introduces when both fit in a piece:
            # the whole last unit, or else the last sentence of a paragraph that ends in one.
            held = _lead_in(piece, unit, chunk_size)
            kept = piece[:-1] + [(piece[-1][0], piece[-1][1][: held[0][0] - piece[-1][0]])] if held else piece
            kept = [part for part in kept if part[1].strip()]
            yield kept[0][0], text[kept[0][0] : kept[-1][0] + len(kept[-1][1])]
            piece = held or _overlap_tail(kept, overlap)
        piece.append(unit)
    if piece:
        yield piece[0][0], text[piece[0][0] : piece[-1][0] + len(piece[-1][1])]


def _lead_in(piece: list[tuple[int, str]], unit: tuple[int, str], chunk_size: int) -> list[tuple[int, str]]:
    """The tail of `piece` to carry into the next piece with `unit`: a lead-in ending the piece, when
    it fits beside `unit`; nothing when it would leave the piece empty."""
    offset, last = piece[-1]
    if not last.rstrip().endswith(":"):
        return []
    end = unit[0] + len(unit[1])
    if end - offset <= chunk_size:
        return [piece[-1]] if len(piece) > 1 else []
    starts = [m.end() for m in _SENTENCE_END.finditer(last.rstrip())]
    start = starts[-1] if starts else 0
    if start == 0 or end - (offset + start) > chunk_size:
        return []
    return [(offset + start, last[start:])]


def _sentences(block: str, offset: int, chunk_size: int) -> Iterator[tuple[int, str]]:
    # Code and table rows are split only between lines: a row cut at a sentence end loses its name.
    whole_lines = block.startswith("```") or _is_table(block)
    separator = re.compile(r"\n") if whole_lines else _SENTENCE_END
    position = 0
    for match in list(separator.finditer(block)) + [None]:
        end = match.start() if match else len(block)
        sentence = block[position:end]
        while len(sentence) > chunk_size:  # one giant line: cut it at the last space that fits
            cut = sentence.rfind(" ", 0, chunk_size)
            cut = cut if cut > chunk_size // 2 else chunk_size
            yield offset + position, sentence[:cut]
            position += cut
            sentence = sentence[cut:]
        if sentence.strip():
            yield offset + position, sentence
        position = match.end() if match else len(block)


def _is_table(block: str) -> bool:
    lines = block.split("\n")
    return len(lines) > 1 and sum(" | " in line for line in lines) * 2 > len(lines)


def _overlap_tail(piece: list[tuple[int, str]], overlap: int) -> list[tuple[int, str]]:
    """The trailing units of the previous piece that fit in `overlap` characters."""
    tail: list[tuple[int, str]] = []
    size = 0
    for unit in reversed(piece):
        size += len(unit[1])
        if size > overlap:
            break
        tail.insert(0, unit)
    return tail
