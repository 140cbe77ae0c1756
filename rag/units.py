"""Evidence units of a chunk: the pieces the extractive answerer quotes, each embedded once at ingest.

A unit keeps together what only makes sense together, judged from the text's structure alone:

- a sentence that introduces a list, code block or table (it ends with ":", or is a dangling phrase
  like "To add partitions you can do") stays with what follows it; a long list or block is cut into
  several units, each repeating the lead-in, at item or line boundaries (kind "list" or "code"), and
  a list so cut also gives each of its items as a unit with the lead-in;
- a fenced block, or a run of unfenced command or log lines (a log record, an exception line, a
  stack frame), is one "code" unit; a `# comment` line and a line ending in `\\` stay with the line
  under them;
- a key/value definition table (a run of 2-cell rows `Label: | value`) is one "setting" unit with
  the heading line that names it and the first sentence(s) of its description;
- any other table row is one "row" unit, never cut at a sentence end, with the table's header row
  as an extra part when the chunk holds it;
- other prose is split into sentences; so are the items of a list without a lead-in (steps under a
  heading), each marked with where its list starts (`list_start`), so an answer can show them as that list.

Every part is a verbatim substring of the chunk text (in text order within a unit), so a quote can
always be found in its passage. Parts of different units may overlap (a setting's description
sentence can also lead in a list). The same split runs at ingest, where `unit.text` is embedded in
`build_units` order (`unit_vectors`), and at query time; `UNITS_VERSION` is recorded in the index
manifest so a change here forces re-embedding.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from rag.identifiers import extract_identifiers
from rag.lexical import noun_pattern

# 3: log lines are code, like commands; 4: indented unfenced excerpts are code; 5: a chunk that begins
# inside a fenced block (cut for size) starts as code, empty table cells count, a header cell may end in ")";
# 6: a list of bare names is one unit with the sentence before it; 7: a table row whose first cell opens with
# "#" ("# of offline log directories | …") is a row, not a comment; 8: the wrapped lines of a log or exception
# message belong to its code block, a remark in parentheses ending a line to the sentence before it, and a
# sentence announcing "the following" block is its lead-in; 9: each item of a list cut for size is also a
# unit with its lead-in; 10: ... unless it is alone in its piece; 11: a sentence that points down to its block
# ("Steps are given below.", never quoted alone) is its lead-in, where its list's items were quoted without it;
# 12: a code block cut for size is not cut inside a statement nor before a closing bracket (`_cut_preferences`)
UNITS_VERSION = 12
KINDS = ("sentence", "list", "code", "row", "setting", "title")
MIN_UNIT_CHARS = 12  # shorter sentences ("Ok.", "Yes!") carry nothing worth quoting
MAX_UNIT_CHARS = 600  # a sentence is capped here (a prefix, so still verbatim)
ELISION = "..."  # the line that stands for pieces of a code block an answer leaves out
MAX_BLOCK_CHARS = 700  # a list or code unit is cut at item / line boundaries past this
MIN_PIECE_SHARE = 1 / 5  # a code piece cut early, before a statement or a block, fills this much of it
SHORT_SENTENCE_CHARS = 100  # a setting's first sentence this short takes the next one along
MAX_HEADING_CHARS = 80  # a heading line: this short, without sentence punctuation at its end
MIN_CODE_INDENT = 2  # an unfenced excerpt indents some lines this much past its first; wrapped prose does not
MAX_DANGLING_LEAD_IN = 100  # a lead-in without ":" ("To add partitions you can do") is this short

_FENCE_LINE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ITEM = re.compile(r"^(\s*)(?:[-*+•]|\d{1,3}[.)])\s+")
_CELL_SEPARATOR = re.compile(r" \|(?= |$)")  # the space after a pipe is the next cell's: `a | | | b` has 4 cells
_BARE_CELL = re.compile(r"[\w.-]*")  # empty, or one word or number
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9`\"'(\[])")
# A sentence that announces what comes next in its own words, not with a colon: "One can also add super users
# in server.properties like the following (note that the delimiter is semicolon …)."
_ANNOUNCES = re.compile(r"\b(?:the following|as follows|like this)\b", re.I)
_POINTS_DOWN = re.compile(r"^(?:Below|Here) (?:is|are)\b|\bbelow\.$")
# A short remark in parentheses that ends the line ("… may re-introduce the conflict. (reported to fail 65% of
# the time)") belongs to the sentence before it; quoted alone it says nothing.
_TRAILING_REMARK = re.compile(r"\([^()]{1,120}\)[.!?]?\s*$")
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|resp)\.$", re.I)
_TERMINAL = re.compile(r"[.!?;,:)\]]$")
# An entry of a table of contents: a title numbered like a section, two levels deep or more ("7.4 …", "6.1.2 …").
_SECTION_ENTRY = re.compile(r"^\s*(?:[-*+•]\s+)?\d{1,2}(?:\.\d{1,2})+\.?\s+[A-Z]")
_SENTENCE_STOP = re.compile(r"[.!?][\"')\]]?$")
_COMMAND = re.compile(r"^(?:\$ |bin/|\./|[\w./-]+\.(?:sh|bat)\s|grep |[A-Z_]{2,}=\S)")
_COMMENT = re.compile(r"^#(?:\s|$)")
_CLOSING = tuple(")]}")
_CONTINUING = tuple(",(+&|=\\")  # a line ending on one of these goes on in the next (a statement, a shell line)
# A log record (`[2024-06-02 11:04:19,332] ERROR ...`, `ERROR [ReplicaFetcherThread-0-6], ...`), an exception
# line (`org.apache.kafka.common.errors.TimeoutException: ...`, also as a JSON log's field: `"exception":org…`)
# or a stack frame (`at o.a.k.Foo.bar(Foo.java:1)`).
_LOG_LINE = re.compile(
    r"^(?:\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d"
    r"|(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL) \["
    r"|at [\w$.]+\([^)]*\)"
    r"|(?:\"\w+\"\s*:\s*\"?)?(?:[a-z]\w*\.)+[A-Z]\w*(?:Exception|Error)(?::|$))"
)
_CODE_LINE = re.compile(r"^(?:#|\$ |bin/|kafka-[\w-]+(?:\.sh)?\s|grep |[\w.-]+\.sh\s)")
_INLINE_CODE = re.compile(r"(`+[^`\n]+?`+)")
# A key with the value the text gives it (`acks=all`) is one code span; a dotted name that goes on after a
# colon is part of a longer one (the MBean `kafka.connect:type=…`, a `host.name:9092`).
# A quoted value keeps its quotes only when they pair up: in "Set 'enable.auto.commit=false' and …" the
# closing quote belongs to the sentence. A list value goes on past its commas (`ssl.enabled.protocols=TLSv1.2,TLSv1.1`).
_DOTTED_KEY = re.compile(
    r"(?<![`\w.])([a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)+)"
    r"(=(?:\"[^\"\s]*\"|'[^'\s]*'|[\w.\-]*\w(?:,[\w.\-]*\w)*))?(?![`\w(=]|:\w)"
)
_SHORT_CELL_CHARS = 40  # a row cell this short (and not a sentence) is shown as "Label: value"


@dataclass(frozen=True)
class EvidenceUnit:
    """One quotable piece of a chunk; `parts` are verbatim substrings of the chunk, in text order.

    Parts by kind: "sentence" (sentence,); "list" (lead-in, items); "code" (lead-in?, code lines);
    "setting" (heading line?, description sentence(s)?, key/value rows); "row" (lead-in?, header
    row?, row); "title" (an item's own heading line, embedded like a sentence but never quoted). A
    part holding several lines keeps them as in the text.
    """

    kind: str
    parts: tuple[str, ...]
    subject: str = ""  # what a reference unit is about: a setting's key, a row's first cell
    position: int = 0  # index of the unit in the chunk
    # a sentence of an item of a list with no lead-in (or one an earlier chunk began, `with_block_lead_in`): where
    # that list starts in the chunk
    list_start: int = -1
    item: bool = False  # one item of a list cut for size, with its lead-in (the list's pieces are units too)
    # of a code block cut for size: which piece this is (0 the first or only); the pieces before it are the units
    # right before it, and the first holds what the block begins with (the command whose output a later one shows)
    code_piece: int = 0

    @property
    def text(self) -> str:
        """The quoted words: the parts, one per line."""
        return "\n".join(self.parts)

    @property
    def matched_text(self) -> str:
        """What is embedded and matched: the text, led by its subject when the text does not name it (a
        setting whose key is only in the section heading), so "default of acks" finds the `acks` unit."""
        if self.subject and self.subject.lower() not in self.text.lower():
            return f"{self.subject}: {self.text}"
        return self.text

    @property
    def stated_text(self) -> str:
        """The words the unit states itself, for telling what it adds to an answer: a row's own cells, not the
        lead-in and header every row of its table shares; a setting entry's key, description and values, not
        the labels every entry of its page repeats ("Type:", "Default:", "Valid Values:"): counted, they made
        a second setting's entry read as no news (5 of 16 words new for `sync.group.offsets.interval.seconds`
        after `sync.group.offsets.enabled`)."""
        if self.kind == "row":
            return self.parts[-1]
        if self.kind != "setting":
            return self.matched_text
        *described, rows = self.parts
        values = [row.partition(" |")[2].strip() for row in rows.split("\n")]
        stated = "\n".join([*described, *(value for value in values if value)])
        return f"{self.subject}: {stated}" if self.subject.lower() not in stated.lower() else stated


@dataclass(frozen=True)
class _Span:
    start: int
    end: int

    def of(self, text: str) -> str:
        return text[self.start : self.end]


@dataclass
class _Line:
    kind: str  # "blank" | "text" | "item" | "kv" | "row" | "command" | "comment" | "fence"
    start: int  # offsets of the stripped line (of the block content for a fence)
    end: int
    indent: int = 0
    cells: int = 0


@dataclass(frozen=True)
class _Candidate:
    kind: str
    spans: tuple[_Span, ...]
    subject: str = ""
    list_start: int = -1
    item: bool = False
    code_piece: int = 0


def build_units(text: str, heading: str = "", continues_code: bool = False) -> list[EvidenceUnit]:
    """The evidence units of a chunk's `text`, in text order; `heading` is its section path's last element.
    `continues_code`: the chunk begins inside a fenced block opened in an earlier chunk (`inside_fence`), so
    its text up to the first fence line is code and that fence line closes the block."""
    lines = _scan(text, continues_code)
    builder = _Builder(text, lines, heading)
    builder.run()
    return builder.units()


def chunk_units(text: str, section_path: Sequence[str], continues_code: bool = False) -> list[EvidenceUnit]:
    """A chunk's units (`build_units`) under the last heading of its section path."""
    return build_units(text, section_path[-1] if section_path else "", continues_code)


def unit_texts(text: str, section_path: Sequence[str], continues_code: bool = False) -> list[str]:
    """What ingest embeds for a chunk, one string per unit in `build_units` order."""
    return [u.matched_text for u in chunk_units(text, section_path, continues_code)]


def inside_fence(text: str) -> bool:
    """True when `text` ends inside a fenced block: a chunk cut from the rest of the block starts in code."""
    marker = ""
    for line in text.split("\n"):
        if marker:
            marker = "" if _closes(line, marker) else marker
        elif fence := _FENCE_LINE.match(line):
            marker = fence.group(1)
    return bool(marker)


def ends_in_key_values(text: str) -> bool:
    """`text` ends with key/value rows (`Type: | string`, `Default: | all`): a reference entry, whose rows
    name nothing themselves: its key is in the heading, what it does in the description above them."""
    lines = [line for line in _scan(text) if line.kind != "blank"]
    return bool(lines) and lines[-1].kind == "kv"


# ------------------------------------------------------------------------------------------ scanning


def _scan(text: str, continues_code: bool = False) -> list[_Line]:
    """Classify each line; a fenced block becomes one "fence" line spanning its content."""
    raw: list[tuple[int, int]] = []  # (start, end) of each line without its newline
    offset = 0
    for line in text.split("\n"):
        raw.append((offset, offset + len(line)))
        offset += len(line) + 1
    lines: list[_Line] = []
    index = 0
    while index < len(raw):
        start, end = raw[index]
        line = text[start:end]
        if continues_code and index == 0:  # the block's opening fence is in an earlier chunk
            first, closing = 0, _closing_line(text, raw, 0, "")
        elif fence := _FENCE_LINE.match(line):
            first, closing = index + 1, _closing_line(text, raw, index + 1, fence.group(1))
        else:
            lines.append(_classify(text, start, end))
            index += 1
            continue
        content = [(s, e) for s, e in raw[first:closing] if text[s:e].strip()]
        if content:
            lines.append(_Line("fence", content[0][0], content[-1][1]))
        index = closing + 1
    _mark_commands(lines)
    _mark_wrapped_log_lines(text, lines)
    _mark_rows(text, lines)
    return lines


def _closing_line(text: str, raw: list[tuple[int, int]], index: int, marker: str) -> int:
    """The index of the first line from `index` that closes a block opened by `marker` (by any bare
    fence when the opening fence is not in `text`), or `len(raw)` when the block runs to the end."""
    markers = (marker,) if marker else ("```", "~~~")
    while index < len(raw) and not any(_closes(text[raw[index][0] : raw[index][1]], m) for m in markers):
        index += 1
    return index


def _closes(line: str, marker: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(marker) and not stripped.strip(marker[0])


def _classify(text: str, start: int, end: int) -> _Line:
    line = text[start:end]
    stripped = line.strip()
    if not stripped:
        return _Line("blank", start, start)
    lead = len(line) - len(line.lstrip())
    span_start, span_end = start + lead, start + lead + len(stripped)
    if _ITEM.match(line):
        return _Line("item", span_start, span_end, indent=lead)
    cells = len(row_cells(stripped))
    cells = cells if cells > 1 else 0
    if _COMMENT.match(stripped):  # kept for a table row it may turn out to be: "# of offline log directories | …"
        return _Line("comment", span_start, span_end, indent=lead, cells=cells)
    if _COMMAND.match(stripped) or _LOG_LINE.match(stripped):
        return _Line("command", span_start, span_end, indent=lead)
    return _Line("text", span_start, span_end, indent=lead, cells=cells)


def row_cells(row: str) -> list[str]:
    """The cells of a table row as the chunker writes it (`a | b | c`), stripped; one cell for a line of prose."""
    return [cell.strip() for cell in _CELL_SEPARATOR.split(row)]


def _mark_rows(text: str, lines: list[_Line]) -> None:
    """Table rows: 3+ cells, or 2 cells beside another row of the same width (a lone `a | b` is prose)."""
    for index, line in enumerate(lines):
        if line.kind != "text" or not line.cells:
            continue
        neighbours = [lines[i] for i in (index - 1, index + 1) if 0 <= i < len(lines)]
        if line.cells >= 3 or any(n.cells == line.cells for n in neighbours):
            cells = row_cells(text[line.start : line.end])
            line.kind = "kv" if line.cells == 2 and _is_label(cells[0]) else "row"
    for index, line in enumerate(lines):  # a lone key/value row is an ordinary row
        if line.kind == "kv":
            neighbours = [lines[i] for i in (index - 1, index + 1) if 0 <= i < len(lines)]
            if not any(n.kind == "kv" for n in neighbours):
                line.kind = "row"


def _is_label(cell: str) -> bool:
    return cell.endswith(":") and 1 < len(cell) <= 40 and len(cell.split()) <= 4


def _mark_commands(lines: list[_Line]) -> None:
    """A `# comment` line is code only above a command (other comments between allowed); else it is prose."""
    for index, line in enumerate(lines):
        if line.kind == "comment" and not _reaches_command(lines, index):
            line.kind = "text"


def _mark_wrapped_log_lines(text: str, lines: list[_Line]) -> None:
    """The lines an exception or log message wraps onto are code with it: right under it, and not starting
    as a sentence does ("java.lang.IllegalArgumentException: Transaction timeout 10000 was set" over "lower
    than streams commit interval 30000. …"), where quoted alone they were fragments."""
    wrapping = False
    for line in lines:
        words = text[line.start : line.end]
        if line.kind == "command":
            wrapping = bool(_LOG_LINE.match(words))
        elif wrapping and line.kind == "text" and not line.cells and _wraps_on(words):
            line.kind = "command"
        else:
            wrapping = False


def _reaches_command(lines: list[_Line], index: int) -> bool:
    while index < len(lines) and lines[index].kind == "comment":
        index += 1
    return index < len(lines) and lines[index].kind == "command"


# ------------------------------------------------------------------------------------------ grouping


class _Builder:
    def __init__(self, text: str, lines: list[_Line], heading: str) -> None:
        self.text = text
        self.lines = lines
        self.heading = heading
        self.candidates: list[_Candidate] = []
        self.claimed: set[tuple[int, int]] = set()  # sentence spans taken into a larger unit

    def run(self) -> None:
        self._walk(0, len(self.lines))

    def _walk(self, index: int, stop: int) -> None:
        while index < stop:
            line = self.lines[index]
            if line.kind == "blank":
                index += 1
            elif line.kind == "fence":
                self._code([(line.start, line.end)], self._lead_in(index))
                index += 1
            elif line.kind in ("command", "comment"):
                end = index
                while end < stop and self.lines[end].kind in ("command", "comment"):
                    end += 1
                self._code([(ln.start, ln.end) for ln in self.lines[index:end]], self._lead_in(index))
                index = end
            elif line.kind == "item":
                index = self._list(index, stop)
            elif line.kind == "kv":
                index = self._setting(index, stop)
            elif line.kind == "row":
                index = self._rows(index, stop)
            elif (end := self._preformatted_end(index, stop)) > index:
                self._code([(ln.start, ln.end) for ln in self.lines[index:end]], self._lead_in(index))
                index = end
            else:
                self._sentences(_Span(line.start, line.end))
                index += 1

    def _preformatted_end(self, index: int, stop: int) -> int:
        """The end of an unfenced excerpt starting at `index` (a schema, config file or code pasted as plain
        lines): 2+ consecutive plain lines, some indented past the first by `MIN_CODE_INDENT`, and at most a
        third of them ending like a sentence. Wrapped prose (a stray space at most) is not. `index` if none."""
        end = index
        while end < stop and self.lines[end].kind == "text" and not self.lines[end].cells:
            end += 1
        run = self.lines[index:end]
        if not run or self.text[run[0].start : run[0].end].endswith(":"):
            return index  # a lead-in: the excerpt starts on the next line, led by it
        if len(run) < 2 or not any(line.indent >= run[0].indent + MIN_CODE_INDENT for line in run):
            return index
        ending = sum(bool(_SENTENCE_STOP.search(self.text[line.start : line.end])) for line in run)
        return end if 3 * ending <= len(run) else index

    def units(self) -> list[EvidenceUnit]:
        kept = [
            c
            for c in self.candidates
            if not (c.kind in ("sentence", "title") and (c.spans[0].start, c.spans[0].end) in self.claimed)
        ]
        kept.sort(key=lambda c: (c.spans[0].start, c.spans[-1].end))
        return [
            EvidenceUnit(
                c.kind, tuple(s.of(self.text) for s in c.spans), c.subject, position, c.list_start, c.item, c.code_piece
            )
            for position, c in enumerate(kept)
        ]

    # -- prose

    def _sentences(self, span: _Span, list_start: int = -1) -> list[_Span]:
        spans = _sentence_spans(self.text, span)
        for s in spans:
            if s.end - s.start >= MIN_UNIT_CHARS:
                capped = _Span(s.start, min(s.end, s.start + MAX_UNIT_CHARS))
                self.candidates.append(_Candidate("sentence", (capped,), list_start=list_start))
        return spans

    def _lead_in(self, index: int) -> _Span | None:
        """The last sentence of the line before `index` (blank lines between allowed) if it introduces it."""
        line = self._line_before(index)
        if line is None or line.kind not in ("text", "item"):
            return None
        last = _sentence_spans(self.text, _Span(line.start, line.end))[-1]
        if line.kind == "item":  # an item introduces what is indented under it, or nothing
            current = self.lines[index]
            return last if current.kind == "fence" or current.indent > line.indent else None
        if _introduces(last.of(self.text)):
            return last
        return None

    def _claim(self, span: _Span) -> None:
        self.claimed.add((span.start, min(span.end, span.start + MAX_UNIT_CHARS)))

    # -- code

    def _code(self, spans: list[tuple[int, int]], lead_in: _Span | None) -> None:
        """One unit per piece of at most MAX_BLOCK_CHARS, cut at line boundaries, each with the lead-in."""
        groups = _logical_lines(self.text, spans)
        budget = MAX_BLOCK_CHARS - (lead_in.end - lead_in.start + 1 if lead_in else 0)
        if lead_in:
            self._claim(lead_in)
        for number, piece in enumerate(_pack(groups, budget, _cut_preferences(self.text, groups))):
            body = _Span(piece[0][0], piece[-1][1])
            shown = (lead_in, body) if lead_in else (body,)
            self.candidates.append(_Candidate("code", shown, code_piece=number))

    # -- lists

    def _list(self, index: int, stop: int) -> int:
        """A run of items at one indent; returns the index after it."""
        indent = self.lines[index].indent
        items: list[tuple[int, int]] = []  # (first line index, end line index) of each item with its children
        cursor = index
        while cursor < stop:
            line = self.lines[cursor]
            if line.kind != "item" or line.indent != indent:
                break
            end = cursor + 1
            while end < stop and self._inside_item(end, indent):
                end += 1
            items.append((cursor, end))
            cursor = end
            while cursor < stop and self.lines[cursor].kind == "blank":
                cursor += 1
            if cursor < stop and not (self.lines[cursor].kind == "item" and self.lines[cursor].indent == indent):
                cursor = end  # the blank lines end the list
                break
        lead_in = self._lead_in(index) or (self._paragraph_before(index) if self._all_names(items) else None)
        if lead_in:
            self._claim(lead_in)
            item_spans = [(self.lines[a].start - self.lines[a].indent, self._last_end(a, b)) for a, b in items]
            budget = MAX_BLOCK_CHARS - (lead_in.end - lead_in.start + 1)
            pieces = _pack([[s] for s in item_spans], budget)
            for piece in pieces:
                self.candidates.append(_Candidate("list", (lead_in, _Span(piece[0][0], piece[-1][1]))))
            if len(pieces) > 1:
                # Cut for size, the list also gives each item with its lead-in: "reset the group's offsets to
                # the earliest" is answered by the lead-in and `--to-earliest`, not by a piece of other items.
                # An item alone in its piece is that piece already.
                self.candidates += [
                    _Candidate("list", (lead_in, _Span(*span)), item=True)
                    for piece in pieces
                    if len(piece) > 1
                    for span in piece
                ]
        else:
            for a, b in items:
                added = len(self.candidates)
                self._sentences(_Span(self.lines[a].start, self.lines[a].end), list_start=self.lines[index].start)
                if b > a + 1 and len(self.candidates) == added + 1:
                    self._title_if_heading(added)
                self._walk(a + 1, b)
        return cursor

    def _title_if_heading(self, candidate: int) -> None:
        """The one-line item at `candidate`, which has lines of its own under it, is that item's heading
        ("- Adding Acls" above the text and command that add them) when it reads like one: kind "title"."""
        span = self.candidates[candidate].spans[0]
        if _reads_as_heading(_ITEM.sub("", span.of(self.text))):
            self.candidates[candidate] = dataclasses.replace(self.candidates[candidate], kind="title")

    def _all_names(self, items: list[tuple[int, int]]) -> bool:
        """Every item is one short line that is not a sentence (`num.io.threads`, "Processor API"): quoted
        alone, an item like that states nothing."""
        for first, end in items:
            line = self.lines[first]
            words = self.text[line.start : line.end]
            if end - first > 1 or not _reads_as_heading(words):
                return False
        return True

    def _paragraph_before(self, index: int) -> _Span | None:
        """The last sentence of the prose line right before `index` (blank lines between allowed)."""
        line = self._line_before(index)
        if line is None or line.kind != "text":
            return None
        return _sentence_spans(self.text, _Span(line.start, line.end))[-1]

    def _line_before(self, index: int) -> _Line | None:
        """The last line before `index` that is not blank."""
        before = index - 1
        while before >= 0 and self.lines[before].kind == "blank":
            before -= 1
        return self.lines[before] if before >= 0 else None

    def _inside_item(self, index: int, indent: int) -> bool:
        line = self.lines[index]
        if line.kind == "blank":
            return False
        if line.kind == "fence":
            return True  # fences sit at column 0 under an item (see rag.html_text)
        return line.indent > indent

    def _last_end(self, first: int, end: int) -> int:
        return max(line.end for line in self.lines[first:end])

    # -- tables

    def _rows(self, index: int, stop: int) -> int:
        end = index
        while end < stop and self.lines[end].kind == "row":
            end += 1
        rows = self.lines[index:end]
        header: _Line | None = None
        if len(rows) > 1 and _is_header(row_cells(self.text[rows[0].start : rows[0].end])):
            header, rows = rows[0], rows[1:]
        lead_in = self._lead_in(index)
        if lead_in:
            self._claim(lead_in)
        for row in rows:
            spans = [s for s in (lead_in,) if s]
            if header is not None and header.cells == row.cells:
                spans.append(_Span(header.start, header.end))
            spans.append(_Span(row.start, row.end))
            first = row_cells(self.text[row.start : row.end])[0]
            self.candidates.append(_Candidate("row", tuple(spans), first))
        return end

    def _setting(self, index: int, stop: int) -> int:
        end = index
        while end < stop and self.lines[end].kind == "kv":
            end += 1
        rows = _Span(self.lines[index].start, self.lines[end - 1].end)
        heading, description, subject = self._definition(index)
        spans: list[_Span] = []
        if heading is not None:
            spans.append(heading)
            self._claim(heading)
        if description is not None:
            spans.append(description)
        spans.append(rows)
        self.candidates.append(_Candidate("setting", tuple(spans), subject))
        return end

    def _definition(self, index: int) -> tuple[_Span | None, _Span | None, str]:
        """(heading line, first description sentence(s), subject) of the key/value rows at `index`."""
        first_text: int | None = None
        cursor = index - 1
        while cursor >= 0 and self.lines[cursor].kind not in ("kv", "row"):
            line = self.lines[cursor]
            if line.kind == "text" and self._is_heading(cursor):
                break
            if line.kind == "text":
                first_text = cursor
            cursor -= 1
        heading: _Span | None = None
        subject = ""
        if cursor >= 0 and self.lines[cursor].kind == "text":
            line = self.lines[cursor]
            heading = _Span(line.start, line.end)
            subject = heading.of(self.text)
        elif cursor < 0:
            subject = self.heading  # the chunk starts with the description: its heading is in the path
        description: _Span | None = None
        if first_text is not None:
            line = self.lines[first_text]
            sentences = _sentence_spans(self.text, _Span(line.start, line.end))
            taken = sentences[:1]
            if len(sentences) > 1 and sentences[0].end - sentences[0].start < SHORT_SENTENCE_CHARS:
                taken = sentences[:2]
            description = _Span(taken[0].start, taken[-1].end)
            for sentence in taken:
                self._claim(sentence)
        return heading, description, subject

    def _is_heading(self, index: int) -> bool:
        """A short line without sentence punctuation, directly above a text line."""
        line = self.lines[index]
        words = self.text[line.start : line.end]
        below = self.lines[index + 1] if index + 1 < len(self.lines) else None
        return (
            len(words) <= MAX_HEADING_CHARS
            and not _TERMINAL.search(words)
            and below is not None
            and below.kind in ("text", "item")
        )


def _introduces(sentence: str) -> bool:
    """The sentence before a block is its lead-in: it ends with a colon, stops mid-phrase ("To add partitions you
    can do"), announces "the following", or points down to it ("Steps are given below.", "Here are the required
    parameters."; not a sentence ending "… here.", which names a link in the docs' text)."""
    return (
        sentence.endswith(":")
        or _dangling(sentence)
        or bool(_ANNOUNCES.search(sentence) or _POINTS_DOWN.search(sentence))
    )


def _dangling(sentence: str) -> bool:
    """A short phrase of words that stops without punctuation: "To add partitions you can do"."""
    return (
        len(sentence) <= MAX_DANGLING_LEAD_IN
        and not _TERMINAL.search(sentence)
        and sentence[0].isalpha()
        and len(sentence.split()) >= 2
    )


def _is_header(cells: list[str]) -> bool:
    """A header row: every cell a short label, none a number, a sentence or empty. A label may end in a
    parenthesis: `Protocol (API key)`."""
    return all(
        cell
        and len(cell) <= _SHORT_CELL_CHARS
        and not _TERMINAL.search(cell.removesuffix(")"))
        and not re.fullmatch(r"-?\d+(?:\.\d+)?|true|false", cell, re.I)
        and cell[0].isalpha()
        for cell in cells
    )


def _sentence_spans(text: str, span: _Span) -> list[_Span]:
    """Sentences of one line, at sentence ends that are not abbreviations."""
    line = span.of(text)
    pieces: list[_Span] = []
    start = 0
    for match in _SENTENCE_END.finditer(line):
        end = match.start() + len(match.group(0).rstrip())
        if _ABBREVIATION.search(line[start:end].strip()) or _TRAILING_REMARK.match(line, match.end()):
            continue
        pieces.append(_strip(text, span.start + start, span.start + end))
        start = match.end()
    pieces.append(_strip(text, span.start + start, span.end))
    return [p for p in pieces if p.end > p.start] or [span]


def _strip(text: str, start: int, end: int) -> _Span:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return _Span(start, end)


def _logical_lines(text: str, spans: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Lines of a block that must stay together: a `# comment` with the line under it, `\\` continuations."""
    lines: list[tuple[int, int]] = []
    for start, end in spans:
        offset = start
        for raw in text[start:end].split("\n"):
            if raw.strip():  # whole lines, indent included, so the block keeps its layout
                lines.append((offset, offset + len(raw.rstrip())))
            offset += len(raw) + 1
    groups: list[list[tuple[int, int]]] = []
    joins_next = False
    for start, end in lines:
        if joins_next and groups:
            groups[-1].append((start, end))
        else:
            groups.append([(start, end)])
        line = text[start:end]
        joins_next = bool(_COMMENT.match(line)) or line.endswith("\\")
    return groups


def _pack(
    groups: list[list[tuple[int, int]]], budget: int, preferences: Sequence[tuple[bool, bool]] = ()
) -> list[list[tuple[int, int]]]:
    """Consecutive groups packed into pieces of at most `budget` characters (a lone group may pass it). A piece
    that must end ends before the group of the highest `preferences` among those that leave it at least
    `MIN_PIECE_SHARE` of the budget, the latest of equals: without preferences, before the first group that does
    not fit."""
    pieces: list[list[tuple[int, int]]] = []
    start = 0
    while start < len(groups):
        end = start + 1
        while end < len(groups) and groups[end][-1][1] - groups[start][0][0] <= budget:
            end += 1
        if end < len(groups) and preferences:
            filled = [
                c
                for c in range(start + 1, end)
                if groups[c - 1][-1][1] - groups[start][0][0] >= budget * MIN_PIECE_SHARE
            ]
            end = max([*filled, end], key=lambda c: (preferences[c], c))
        pieces.append([span for group in groups[start:end] for span in group])
        start = end
    return pieces


def _cut_preferences(text: str, groups: list[list[tuple[int, int]]]) -> list[tuple[bool, bool]]:
    """Where a code block may be cut before each group, compared as tuples: not before a line that closes a
    bracket (it ends what is before it), nor inside a statement (the line before ends on "," "(" "+" …). A piece
    opening "final Exception exception) {" shows the end of a method's signature without its start."""
    preferences = []
    for number, group in enumerate(groups):
        line = text[group[0][0] : group[0][1]]
        above = text[groups[number - 1][-1][0] : groups[number - 1][-1][1]] if number else ""
        preferences.append((not line.lstrip().startswith(_CLOSING), not above.rstrip().endswith(_CONTINUING)))
    return preferences


# ------------------------------------------------------------------------------------------ rendering


def is_title(unit: EvidenceUnit) -> bool:
    """A sentence unit that is a title line ("Using the Native Docker Image"): short, one line, no
    sentence punctuation and not a list item; or an item's own heading (kind "title"); or an entry of a
    table of contents, a list of titles numbered like sections ("- 7.4 Authentication using SASL"). It
    names a topic but states nothing, so it is not quoted."""
    text = unit.text
    if unit.kind == "title":
        return True
    if unit.kind == "list" or (unit.kind == "sentence" and _ITEM.match(text)):
        lines = [line for line in text.split("\n") if line.strip()]
        return all(_reads_as_heading(line.strip()) for line in lines) and any(map(_SECTION_ENTRY.match, lines))
    return unit.kind == "sentence" and _reads_as_heading(text) and "\n" not in text


def _reads_as_heading(text: str) -> bool:
    """Short, and not ended like a sentence: a name or a title, not a statement."""
    return len(text) <= MAX_HEADING_CHARS and not _TERMINAL.search(text)


def defines(unit: EvidenceUnit, thing: Sequence[str]) -> bool:
    """A sentence unit, or an item of a list unit, that says what `thing` (its words, `Query.defined`) is
    (`says_what_it_is`): the Streams guide's notions of time are a list of "Event time - The point in time …"."""
    if unit.kind == "list":
        return any(says_what_it_is(part, thing) for part in unit.parts)
    return unit.kind == "sentence" and says_what_it_is(unit.text, thing)


def says_what_it_is(text: str, thing: Sequence[str]) -> bool:
    """`text` has a sentence that says what `thing` is: "A KTable is an abstraction of a changelog stream …",
    "Log compaction is a mechanism …", "… the set of in-sync replicas, which is known as the ISR", "Such a
    record is sometimes referred to as a tombstone", a glossary's "- Event time - The point in time when …", an
    appositive with a clause of what it does ("Kafka's MirrorMaker (version 2), a tool to replicate data …"; not "For
    each partition, a leader is elected"); each word singular or plural (`noun_pattern`: "Semantic partitioning
    means …" says nothing of what a partition is)."""
    if not thing:
        return False
    name = r"[\s-]+".join(noun_pattern(word) for word in thing)
    return bool(
        re.search(
            rf"(?:^|[.;:]\s+)(?:(?:an?|the)\s+)?{name}(?:\s+\([^)]*\))?,?\s+(?:is|are)\s+(?:an?|the|one)\b"
            rf"|\b{name}\s+(?:refers?\s+to|means|stands\s+for)\b"
            rf"|\b(?:known\s+as|called|referred\s+to\s+as|termed)\s+(?:(?:an?|the)\s+)?[\"'“]?{name}\b(?![’']s\b)"
            rf"|^\s*(?:[-*+•]\s+)?{name}\s*(?::|\s[-–—])\s+(?:an?|the)\s"
            rf"|\b{name}(?:\s+\([^)]*\))?,\s+an?\s+(?:[\w-]+\s+){{0,3}}?[\w-]+\s+(?:to|that|which|used|designed)\b",
            text,
            re.I | re.M,
        )
    )


def is_lead_in_sentence(unit: EvidenceUnit) -> bool:
    """A sentence unit that introduces something ("All workers require a few configs:") but holds none of it:
    what it introduces did not follow it in the chunk (it starts the next chunk, or was a diagram). A question
    the text asks ("How does a broker react when it detects a quota violation?") introduces its answer."""
    return unit.kind == "sentence" and unit.text.rstrip().endswith((":", "?"))


# A sentence that announces what comes after it, or points at a link: "Below are the supported system
# properties.", "The following paragraphs explain …", "The complete set … is documented here."
_POINTS_AHEAD = re.compile(r"^(?:(?:Below|Here) (?:is|are)\b|The following\b)|\b(?:below|here)\.$")


# A sentence that sends the reader elsewhere for what they want: "For more information, see the Kafka Producer
# documentation.", "Please check KIP-405 for more information.", "See KIP-950 for more details."
_REFERS_ELSEWHERE = re.compile(
    r"^(?:For (?:more|further|additional)(?: \w+)? (?:information|details)\b|Please (?:see|refer to|read|check)\b"
    r"|See\b|Refer to\b)|\bfor (?:more |further )?(?:information|details)\.$",
    re.I,
)


def is_bare_row(unit: EvidenceUnit) -> bool:
    """A table row that states nothing but its key: a cell of it is empty, and every other cell after its first
    is one bare word or number ("NONE | 0 | False |", the protocol error with no description; "3 | A | | |", a
    step of a worked example). Its vector is its header's, so it matches any question in the header's words."""
    if unit.kind != "row":
        return False
    cells = row_cells(unit.parts[-1])[1:]
    return any(not cell for cell in cells) and all(_BARE_CELL.fullmatch(cell) for cell in cells)


def refers_elsewhere(unit: EvidenceUnit) -> bool:
    """A sentence unit whose point is where to read more: quoted in an answer it states nothing."""
    return unit.kind == "sentence" and bool(_REFERS_ELSEWHERE.search(_ITEM.sub("", unit.text.strip())))


def points_ahead(unit: EvidenceUnit) -> bool:
    """A sentence unit that introduces what follows it or points at a link: at the end of its chunk it holds
    nothing of what it announces (a lead-in, or a table of settings the page includes from elsewhere)."""
    if unit.kind != "sentence":
        return False
    text = unit.text.strip()
    return is_lead_in_sentence(unit) or bool(_POINTS_AHEAD.search(text) or _ANNOUNCES.search(text))


def stops_mid_sentence(unit: EvidenceUnit) -> bool:
    """A sentence unit that ends in a comma: what completes it (the list or block after it, a unit of its own) is
    not in it, and alone it says nothing ("If you want to use static membership,")."""
    return unit.kind == "sentence" and unit.text.rstrip().endswith(",")


def opens_with_command(unit: EvidenceUnit) -> bool:
    """A code unit whose first line is a command (`$ bin/kafka-metadata-quorum.sh …`): the pieces of its block cut
    for size after it are what that command printed."""
    first = unit.parts[-1].lstrip().partition("\n")[0] if unit.kind == "code" else ""
    return _COMMAND.match(first) is not None


# A line one runs, sets or writes (`is_runnable`): a setting given a value (`acks=all`, `"topics": "orders"`, `acks:
# all`) or named alone on its line (`log.cleaner.max.compaction.lag.ms`), a flag, a markup element, or program code
# (a call, a statement's end, a lambda, a comment, an annotation, a declaration).
_RUNNABLE_LINE = re.compile(
    r"^(?:[\w.\-\[\]\"'${}<>]+\s*(?:=|:\s)"
    r"|[a-z][\w-]*(?:\.[\w-]+)+$"
    r"|--?[A-Za-z]|<\w|//|/\*|\*|@\w|(?:import|package|public|private|protected|class|def|val|var)\s)"
    r"|\w\(|[;{]\s*$|^[})\]]|(?:\w|\))\s*->(?!>)"
)


def is_runnable(code: str) -> bool:
    """Whether a code block holds something to run, set or write (a command, a setting, program code), not only
    what something looks like: a tool's output, a data layout (`/brokers/ids/[0...N] --> {"host":...}`), a
    diagram."""
    lines = [line.strip() for line in code.split("\n") if line.strip()]
    return any(
        _COMMAND.match(line.removeprefix("> ")) or _CODE_LINE.match(line) or _RUNNABLE_LINE.search(line)
        for line in lines
    )


def is_log(code: str) -> bool:
    """Whether a code block is log output (what one sees), not commands (what one runs)."""
    lines = [line.strip() for line in code.split("\n") if line.strip()]
    if not lines or not _LOG_LINE.match(lines[0]):
        return False
    # Every line a log line, or one a log message wraps onto (`_mark_wrapped_log_lines`).
    return all(_LOG_LINE.match(line) or _wraps_on(line) for line in lines)


def _wraps_on(line: str) -> bool:
    """A line that may carry on the message of the log line above it: no sentence start, no command."""
    return not line[0].isupper() and not _COMMAND.match(line) and not _CODE_LINE.match(line)


def table_start(text: str) -> tuple[str, bool]:
    """The first row of the table that `text` ends inside, and whether `text` also holds what comes
    before that table (so the row is its header); ("", False) when `text` does not end in a table.
    Rows of one table may differ in width (`ALTER_CONFIGS (33) | Alter | Cluster |` has an empty note)."""
    lines = text.strip().split("\n")
    if len(row_cells(lines[-1])) < 2:
        return "", False
    start = len(lines) - 1
    while start > 0 and len(row_cells(lines[start - 1])) > 1:
        start -= 1
    return lines[start], start > 0


def list_ending(text: str, continues_code: bool = False) -> tuple[str, bool] | None:
    """How `text` ends inside a list: (its lead-in, True) when `text` holds what comes before the list
    ("" when that does not introduce it), ("", False) when `text` is all list (it began earlier); None
    when `text` does not end in a list. A chunk that begins with items continues such a list."""
    lines = [line for line in _scan(text, continues_code) if line.kind != "blank"]
    index = len(lines) - 1
    indent: int | None = None  # of the outermost item seen so far
    while index >= 0:
        line = lines[index]
        if line.kind == "item":
            indent = line.indent if indent is None else min(indent, line.indent)
        elif not (line.kind == "fence" or line.indent > (indent if indent is not None else 0)):
            break  # a line of its own, not inside an item
        index -= 1
    if indent is None:
        return None
    if index < 0:
        return "", False
    line = lines[index]
    if line.kind != "text":
        return "", True
    last = _sentence_spans(text, _Span(line.start, line.end))[-1].of(text)
    return (last if _introduces(last) else ""), True


def starts_in_list(text: str) -> bool:
    """`text` begins with a list item (a chunk cut inside a list begins so)."""
    return bool(_ITEM.match(text.lstrip("\n")))


def starts_with_code(text: str, continues_code: bool = False) -> bool:
    """`text` begins with a fenced block of its own: a chunk cut between a block and the sentence that introduces
    it begins so."""
    return not continues_code and bool(_FENCE_LINE.match(text.lstrip("\n")))


def lead_in_ending(text: str, continues_code: bool = False) -> str:
    """The sentence `text` ends with when it introduces what follows (`_introduces`: "… like this:", "Here is
    a sample configuration."), "" otherwise: what a block that begins the next chunk is shown under."""
    lines = [line for line in _scan(text, continues_code) if line.kind != "blank"]
    if not lines or lines[-1].kind != "text":
        return ""
    last = _sentence_spans(text, _Span(lines[-1].start, lines[-1].end))[-1].of(text)
    return last if _introduces(last) else ""


def before_closing_block(text: str, block: str) -> str:
    """`text` without the fenced block it ends with, when that block is `block` (a fenced block as the next chunk
    begins with it, `leading_block_end` long: its closing fence not included): chunks overlap, and the chunk
    before one that opens with a block may end with the same block under its lead-in. `text` itself otherwise."""
    opening = block.strip()
    body = text.rstrip()
    if not opening or not _FENCE_LINE.match(opening) or not body.endswith("```"):
        return text
    inner = body[:-3].rstrip()
    return inner[: -len(opening)] if inner.endswith(opening) else text


def leading_block_end(text: str, continues_code: bool = False) -> int:
    """Where the list or fenced block that `text` begins with ends (0 when it begins with neither)."""
    code = starts_with_code(text, continues_code)
    if not code and not starts_in_list(text):
        return 0  # not scanned: most chunks begin with prose
    lines = [line for line in _scan(text, continues_code) if line.kind != "blank"]
    if code:
        return lines[0].end if lines and lines[0].kind == "fence" else 0
    indent = lines[0].indent
    end = 0
    for line in lines:
        if line.kind != "item" and line.kind != "fence" and line.indent <= indent:
            break
        end = line.end
    return end


def continued_block_end(text: str) -> int:
    """Where the content of the fenced block that `text` begins inside (a chunk whose `continues_code`: the
    block opened in an earlier chunk) ends."""
    lines = _scan(text, continues_code=True)
    return lines[0].end if lines and lines[0].kind == "fence" else 0


def with_block_lead_in(unit: EvidenceUnit, lead_in: str) -> EvidenceUnit:
    """A sentence of an item of a list begun in an earlier chunk, as a list unit under that list's lead-in; a
    code block whose lead-in ends the earlier chunk, under that lead-in. The item's later sentences too ("Please
    use the `GET /connectors/{name}/tasks` endpoint instead."): shown apart from their item's first, they read
    as items of their own. Each keeps its `list_start`, by which the sentences of one item are found together."""
    if lead_in and unit.kind == "code" and len(unit.parts) == 1:
        return dataclasses.replace(unit, parts=(lead_in, unit.parts[0]))
    if not lead_in or unit.kind != "sentence" or unit.list_start < 0:
        return unit
    return dataclasses.replace(unit, kind="list", parts=(lead_in, unit.text))


def with_table_header(unit: EvidenceUnit, header: str) -> EvidenceUnit:
    """A row unit shown with the column names of its table when its chunk began below the header row."""
    if unit.kind != "row" or not header:
        return unit
    row = unit.parts[-1]
    width = len(row_cells(row))
    if len(row_cells(header)) != width or (len(unit.parts) > 1 and len(row_cells(unit.parts[-2])) == width):
        return unit
    return dataclasses.replace(unit, parts=(*unit.parts[:-1], header, row))


def lead_in(unit: EvidenceUnit) -> str:
    """The sentence the unit's body follows: a list's or code block's lead-in, a setting's (last)
    description sentence before its rows; "" when it has none. Units of one passage that share it are
    shown with it once (`render_shared_lead`): a setting's description that ends in a list is both the
    setting's description and the list's lead-in."""
    if unit.kind in ("list", "code") and len(unit.parts) == 2:
        return unit.parts[0]
    if unit.kind == "row":
        return _row_parts(unit)[0]
    if unit.kind == "setting":
        description = [part for part in unit.parts[:-1] if part != unit.subject]
        if not description:
            return ""
        # its last sentence: "Determines which partition … are produced. Available options are:" leads in
        # the list whose own lead-in is "Available options are:"
        last = description[-1]
        return _sentence_spans(last, _Span(0, len(last)))[-1].of(last)
    return ""


def render_shared_lead(units: Sequence[EvidenceUnit], marker: int) -> str:
    """Units of one passage that share their lead-in (`lead_in`) as one block that states it once: the
    setting's entry (each in full, should two settings share a description), or else the first list or
    code piece; then the pieces of a list or code block cut for size joined again, or the rows of one
    table one per line, in text order."""
    ordered = sorted(units, key=lambda u: u.position)
    lines = [render_unit(u, marker) for u in ordered if u.kind == "setting"] or [
        f"{format_sentence(ordered[0].parts[0])} [{marker}]"
    ]
    if items := [u for u in ordered if u.kind == "list"]:
        lines.append(_render_items(*_with_later_sentences(items)))
    lines += [_row_line(u) for u in ordered if u.kind == "row"]  # rows of one table under its lead-in
    if code := [u for u in ordered if u.kind == "code"]:
        lines.append(_fenced(_joined_pieces(code)))
    return "\n".join(lines)


def _joined_pieces(pieces: Sequence[EvidenceUnit]) -> str:
    """Pieces of a code block cut for size, in text order, with an elision line where a piece between two of them
    (of the same chunk) is left out: the handler's first lines and its registration, joined, read as whole code."""
    lines = [pieces[0].parts[-1]]
    for before, piece in itertools.pairwise(pieces):
        if piece.code_piece > before.code_piece + 1:
            lines.append(ELISION)
        lines.append(piece.parts[-1])
    return "\n".join(lines)


def _with_later_sentences(units: Sequence[EvidenceUnit]) -> list[str]:
    """The list units' items in text order, each later sentence of an item (one line, no item marker:
    `with_block_lead_in`) joined to the sentence right before it when that one is shown: not to another item."""
    joined: list[str] = []
    for before, unit in zip((None, *units), units, strict=False):
        piece = unit.parts[1]
        follows = before is not None and before.position == unit.position - 1
        if follows and "\n" not in piece and not _ITEM.match(piece):
            joined[-1] += f" {piece.strip()}"
        else:
            joined.append(piece)
    return joined


def render_list_items(units: Sequence[EvidenceUnit], text: str, marker: int) -> str:
    """Sentences of items of one list without a lead-in (`list_start`), shown as that list: one "- " line
    per item in the order of `text`, the chunk they come from, and the marker on the first line."""
    lines: list[str] = []
    end = 0
    for unit in sorted(units, key=lambda u: u.position):
        start = text.find(unit.text, end)
        sentence = format_sentence(unit.text)
        if lines and start >= end and "\n" not in text[end:start]:
            lines[-1] += f" {sentence}"  # the item's next sentence
        else:
            lines.append(f"- {sentence}")
        end = max(end, start + len(unit.text))
    lines[0] += f" [{marker}]"
    return "\n".join(lines)


def render_unit(unit: EvidenceUnit, marker: int) -> str:
    """The unit as answer Markdown, with " [marker]" on its first prose line (own line after a bare code block)."""
    cite = f" [{marker}]"
    if unit.kind == "code":
        *led_by, code = unit.parts
        block = _fenced(code)
        return f"{format_sentence(led_by[0])}{cite}\n{block}" if led_by else f"{block}\n[{marker}]"
    if unit.kind == "list":
        lead_in, items = unit.parts
        return f"{format_sentence(lead_in)}{cite}\n{_render_items(items)}"
    if unit.kind == "setting":
        return _render_setting(unit) + cite
    if unit.kind == "row":
        return _render_row(unit, cite)
    return format_sentence(unit.text) + cite


def format_sentence(text: str) -> str:
    """Commands and config keys in code formatting; the words themselves stay as in the source."""
    text = re.sub(r"^(?:[-*+•]|\d{1,3}[.)])\s+", "", text.strip())
    if _CODE_LINE.match(text) and "`" not in text and "\n" not in text:
        return f"`{text}`"
    # Inline code the source already marks stays as it is: a key inside a command must not split it.
    pieces = _INLINE_CODE.split(text)
    for index in range(0, len(pieces), 2):
        pieces[index] = _DOTTED_KEY.sub(_code_if_identifier, pieces[index])
    return "".join(pieces)


def _code_if_identifier(match: re.Match[str]) -> str:
    return f"`{match.group(0)}`" if extract_identifiers(match.group(1)) else match.group(0)


def _fenced(code: str) -> str:
    """`code` dedented in a Markdown fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{textwrap.dedent(code)}\n{fence}"


def _render_items(*pieces: str) -> str:
    """Items as "- " lines (nested ones indented as in the text), continuation lines under their item. A
    code block inside an item stays verbatim, and one that a piece of a list cut for size ends inside is
    closed there: an open fence would turn what follows into code."""
    margin = min((len(line) - len(line.lstrip()) for p in pieces for line in p.split("\n") if line.strip()), default=0)
    out: list[str] = []
    for piece in pieces:
        fence, fence_indent, shift = "", 0, 0
        for line in (line[margin:] for line in piece.split("\n") if line.strip()):
            indent = len(line) - len(line.lstrip())
            body = line.strip()
            if fence:  # shifted with its fence, so the code keeps its own indentation
                closing = _closes(body, fence)
                out.append(" " * fence_indent + body if closing else " " * shift + line)
                fence = "" if closing else fence
                continue
            if opening := _FENCE_LINE.match(body):
                fence, fence_indent = opening.group(1), max(indent, 2)
                shift = fence_indent - indent
                out.append(" " * fence_indent + body)
                continue
            bullet = _ITEM.match(body)
            if bullet:
                out.append(" " * indent + "- " + format_sentence(body[bullet.end() :]))
            else:
                out.append(" " * max(indent, 2) + format_sentence(body))
        if fence:
            out.append(" " * fence_indent + fence)
    return "\n".join(out)


def setting_default(unit: EvidenceUnit) -> str | None:
    """A setting entry's default as its "Default:" row gives it ("" or "null" for none); None without the row."""
    if unit.kind != "setting":
        return None
    rows = [row_cells(line) for line in unit.parts[-1].split("\n")]
    return next((cells[1] for cells in rows if len(cells) == 2 and cells[0] == "Default:"), None)


def has_no_default(unit: EvidenceUnit) -> bool:
    """A setting entry whose default row is null or empty."""
    return setting_default(unit) in ("", "null")


def render_setting_mention(unit: EvidenceUnit, marker: int) -> str:
    """A setting entry in a few words, its name and default: "`num.io.threads` (default 8) [3]"."""
    default = setting_default(unit)
    value = "" if default is None else " (no default)" if has_no_default(unit) else f" (default {default})"
    return f"`{unit.subject}`{value} [{marker}]"


# The configuration reference's rating of how often a setting needs attention: an answer about a setting shows
# its name, description, type, default, valid values and how it can be updated, and spends no room on that.
UNSHOWN_SETTING_LABELS = ("Importance:",)


def _render_setting(unit: EvidenceUnit) -> str:
    parts = list(unit.parts)
    rows = parts.pop()
    if parts and parts[0] == unit.subject:
        parts.pop(0)
    values = []
    for row in rows.split("\n"):
        label, _, value = row.partition(" |")
        if value.strip() and label.strip() not in UNSHOWN_SETTING_LABELS:
            values.append(f"{label.strip().rstrip(':')}: {value.strip()}")
    text = f"`{unit.subject}`" if unit.subject else ""
    if parts:
        description = format_sentence(" ".join(parts))
        text = f"{text}: {description}" if text else description
    details = f"({' · '.join(values)})" if values else ""
    return " ".join(piece for piece in (text, details) if piece)


def _row_parts(unit: EvidenceUnit) -> tuple[str, list[str], list[str]]:
    """A row unit's lead-in ("" when none), header cells (empty when none) and cells."""
    parts = list(unit.parts)
    cells = row_cells(parts.pop())
    header: list[str] = []
    if parts and len(row_cells(parts[-1])) == len(cells) and " | " in parts[-1]:
        header = row_cells(parts.pop())
    return (parts[0] if parts else ""), header, cells


def _render_row(unit: EvidenceUnit, cite: str) -> str:
    lead, line = _row_parts(unit)[0], _row_line(unit)
    return f"{format_sentence(lead)}{cite}\n{line}" if lead else line + cite


def _row_line(unit: EvidenceUnit) -> str:
    """The row as one line: its first cell as its name, short cells labelled in brackets, long ones after."""
    _, header, cells = _row_parts(unit)
    short: list[str] = []
    long: list[str] = []
    for number, cell in enumerate(cells[1:], start=1):
        if not cell:
            continue
        label = f"{header[number]}: " if header else ""
        if len(cell) <= _SHORT_CELL_CHARS and not _SENTENCE_END.search(cell) and not cell.endswith("."):
            short.append(label + cell)
        else:
            long.append(label + format_sentence(cell) if long else format_sentence(cell))
    # A name is code (`UNKNOWN_MEMBER_ID`, `PRODUCE (0)`); a first cell of words is not ("Offline
    # Partition Count", "Provisioning the KRaft controller quorum").
    name = re.sub(r"\s*\([^)]*\)", "", cells[0]).strip()
    line = (f"`{cells[0]}`" if not re.search(r"\s", name) else format_sentence(cells[0])) if cells[0] else ""
    if short:
        line += f" ({' · '.join(short)})"
    if long:
        line += ": " + " · ".join(long)
    return line.strip()
