"""HTML pages become titled sections, with the Apache Kafka site's own page layout handled first-class.

Kafka's documentation keeps each page's content inside ``<script type="text/x-handlebars-template">``
blocks that the browser fills in, so a plain HTML-to-text call returns almost nothing: the template bodies
are parsed as HTML where they stand, and their Handlebars expressions become placeholder words
(``{{fullDotVersion}}`` -> ``VERSION``). Page chrome is dropped: scripts, styles, forms, navigation,
headers and footers, breadcrumbs, menus, cookie banners, comment threads, Previous/Next pagination, the
in-page tables of contents of the Streams guide, and server-side include directives (HTML comments).

Title rule: the first ``<h1>`` left after chrome is dropped (it heads the content, so it is the title and
not part of any heading path), else a non-empty ``<title>``, else the caller's fallback. Kafka's top-level
pages (design.html, ops.html, ...) have neither, so their caller-supplied name is used.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

from bs4 import BeautifulSoup
from bs4.element import CData, Comment, NavigableString, PageElement, Tag

from rag.documents import Section

_TEMPLATE = re.compile(
    r"<script\b[^>]*\btype\s*=\s*[\"']?text/x-handlebars-template[\"']?[^>]*>(.*?)</script\s*>", re.I | re.S
)
_HANDLEBARS = re.compile(r"\{\{\{?\s*([^{}]*?)\s*\}\}\}?")
# The variables Kafka's templateData.js defines; any other expression keeps its name without braces.
_PLACEHOLDERS = {
    "version": "VERSION",
    "dotVersion": "VERSION",
    "fullDotVersion": "VERSION",
    "scalaVersion": "SCALA_VERSION",
}
_DROP_TAGS = frozenset(
    {"head", "script", "style", "noscript", "template", "link", "meta", "iframe", "svg", "canvas", "object",
     "embed", "form", "button", "input", "select", "textarea", "nav", "aside", "footer"}
)  # fmt: skip
_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "search", "complementary"})
# Words in a class or id that mark chrome, whole between "-", "_" or spaces ("sub-nav-sticky", "b-nav__x").
_CHROME = re.compile(
    r"(?:^|[\s_-])(?:nav|navbar|navigation|sidebar|side-bar|footer|breadcrumbs?|menus?|cookies?|banner|"
    r"comments?|pagination|table-of-contents|toc-handle)(?=$|[\s_-])",
    re.I,
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_HEADING_TAGS = list(_HEADINGS)
_CODE = frozenset({"code", "tt", "kbd", "samp"})
_INLINE = frozenset(
    {"a", "abbr", "b", "bdi", "bdo", "big", "cite", "data", "del", "dfn", "em", "font", "i", "img", "ins",
     "label", "mark", "nobr", "q", "s", "small", "span", "strike", "strong", "sub", "sup", "time", "u",
     "var", "wbr"}
)  # fmt: skip
_BR = "\x00"  # a <br> inside a paragraph, kept through whitespace squashing


def parse_html(raw: str, fallback_title: str) -> tuple[str, list[Section]]:
    """Title and sections of one HTML page, in document order; headings nest by level (h2 › h3 › h4)."""
    title, sections, _ = _parse(raw, fallback_title)
    return title, sections


def include_sites(raw: str, fallback_title: str) -> list[tuple[str, tuple[str, ...]]]:
    """(included path as written, the page's title and heading path where it is included) for each server-side
    include directive (`<!--#include virtual="generated/kafka_config.html" -->` under "3.1 Broker Configs"):
    the place on the published page of a file that is only a fragment of it."""
    title, _, sites = _parse(raw, fallback_title)
    return [(target, (title, *headings)) for target, headings in sites]


_INCLUDE = re.compile(r"#include\s+(?:virtual|file)\s*=\s*[\"']([^\"']+)[\"']")


@dataclass(frozen=True)
class _Include:
    target: str


def _parse(raw: str, fallback_title: str) -> tuple[str, list[Section], list[tuple[str, tuple[str, ...]]]]:
    soup = BeautifulSoup(_expand_templates(raw), "lxml")
    page_title = _squash(soup.title.get_text()) if soup.title else ""
    _strip_chrome(soup)
    flow = _Flow(split_headings=True)
    flow.walk(soup)
    flow.flush()

    title, sections, sites = "", [], []
    path: list[tuple[int, str]] = []
    anchor, blocks = "", []
    for event in flow.events:
        if isinstance(event, str):
            blocks.append(event)
            continue
        if isinstance(event, _Include):
            sites.append((event.target, tuple(text for _, text in path)))
            continue
        if blocks:
            sections.append(Section(tuple(text for _, text in path), "\n\n".join(blocks), anchor))
            blocks = []
        level, text, anchor = event
        if level == 1 and not title:
            title, path = text, []
        else:
            path = [*(entry for entry in path if entry[0] < level), (level, text)]
    if blocks:
        sections.append(Section(tuple(text for _, text in path), "\n\n".join(blocks), anchor))
    return title or page_title or fallback_title, sections, sites


def _expand_templates(raw: str) -> str:
    """Put Handlebars template bodies back into the page as plain HTML, expressions made readable."""
    return _TEMPLATE.sub(lambda m: "<div>" + _HANDLEBARS.sub(_placeholder, m.group(1)) + "</div>", raw)


def _placeholder(match: re.Match[str]) -> str:
    expr = match.group(1)
    if not expr or expr[0] in "#/!^>" or expr == "else":  # block helpers and comments carry no words
        return ""
    return _PLACEHOLDERS.get(expr, expr)


def _strip_chrome(node: Tag) -> None:
    for child in list(node.children):
        # A sibling decomposed below has left `node`. (Not `child.decomposed`: bs4 reads it through a
        # getattr that, on a tag never decomposed, searches the whole subtree for a `<_decomposed>` tag.)
        if not isinstance(child, Tag) or child.parent is not node:
            continue
        if "topic-title" in child.get_attribute_list("class"):  # Sphinx "Table of Contents" and its list
            following = child.find_next_sibling()
            if following is not None and following.name in ("ul", "ol"):
                following.decompose()
            child.decompose()
        elif _is_chrome(child):
            child.decompose()
        elif child.name not in ("pre", "code"):  # highlighters mark code spans "comment": never chrome
            _strip_chrome(child)


def _is_chrome(tag: Tag) -> bool:
    if tag.name in _DROP_TAGS or tag.has_attr("hidden") or tag.get("role") in _CHROME_ROLES:
        return True
    if tag.name == "header":  # a page's header is chrome; an article's header holds its title
        return tag.find_parent(["article", "main"]) is None
    if tag.name in ("html", "body", "main", "article"):
        return False
    classes = tag.get_attribute_list("class")
    if "contents" in classes and "topic" in classes:  # Sphinx in-page table of contents
        return True
    marks = " ".join(str(mark) for mark in [tag.get("id"), *classes] if mark)
    # A wrapper named "has-sidebar" that holds the page's h1 is the page, not chrome.
    return bool(_CHROME.search(marks)) and tag.find(["h1", "main", "article"]) is None


class _Flow:
    """Turns flow content into text blocks; with split_headings, headings become (level, text, anchor)."""

    def __init__(self, split_headings: bool) -> None:
        self.split_headings = split_headings
        self.events: list[str | tuple[int, str, str] | _Include] = []
        self.inline: list[str] = []

    def walk(self, node: Tag) -> None:
        for child in node.children:
            self.visit(child)

    def visit(self, node: PageElement) -> None:
        if not isinstance(node, Tag):
            if type(node) in (NavigableString, CData):  # comments, doctypes and SSI directives are not text
                self.inline.append(str(node))
            elif isinstance(node, Comment) and (include := _INCLUDE.match(str(node).strip())):
                self.flush()
                self.events.append(_Include(include.group(1)))
            return
        name = node.name
        if name in _HEADINGS:
            text = _squash(node.get_text().replace("¶", ""))
            if not self.split_headings:
                self.block(text)
            elif text:
                self.flush()
                self.events.append((_HEADINGS[name], text, _anchor(node)))
        elif name == "pre":
            self.block(_fence(node))
        elif name in ("ul", "ol", "menu", "dl", "table") and self.split_headings and node.find(_HEADING_TAGS):
            self.sectioned_container(node)
        elif name in ("ul", "ol", "menu"):
            self.block(_list(node))
        elif name == "dl":
            self.block(_definitions(node))
        elif name == "table":
            self.block(_table(node))
        elif name == "br":
            self.inline.append(_BR)
        elif name in _CODE:
            code = _squash(node.get_text())
            if code:
                self.inline.append(f"`{code}`")
        elif name in _INLINE:
            self.walk(node)
        else:
            self.flush()
            self.walk(node)
            self.flush()

    def sectioned_container(self, node: Tag) -> None:
        """A list or table holding headings (security.html nests whole sections in <ol><li><h4>).

        Its headings still open sections; the items without one stay "- item" lines.
        """
        self.flush()
        for child in node.children:
            if isinstance(child, Tag) and child.name == "li" and not child.find(_HEADING_TAGS):
                self.block(_item(_render(child.children)))
            elif isinstance(child, Tag) and child.name in ("li", "dt", "dd", "tr", "td", "th"):
                self.flush()
                self.walk(child)
                self.flush()
            else:
                self.visit(child)
        self.flush()

    def block(self, text: str) -> None:
        self.flush()
        if text:
            self.events.append(text)

    def flush(self) -> None:
        lines = (_squash(line) for line in "".join(self.inline).split(_BR))
        self.inline = []
        text = "\n".join(line for line in lines if line)
        if text:
            self.events.append(text)


def _render(nodes: Iterable[PageElement]) -> list[str]:
    """Blocks of a fragment (list item, table cell), headings kept as plain paragraphs."""
    flow = _Flow(split_headings=False)
    for node in nodes:
        flow.visit(node)
    flow.flush()
    return [event for event in flow.events if isinstance(event, str)]


def _anchor(heading: Tag) -> str:
    """The id a link to this heading uses: Kafka's <a id> inside it, Sphinx's section id, or its own."""
    if heading.get("id"):
        return str(heading["id"])
    inner = heading.find(id=True)
    if inner is not None:
        return str(inner["id"])
    permalink = heading.find("a", class_="headerlink", href=re.compile(r"^#."))
    if permalink is not None:
        return str(permalink["href"])[1:]
    parent = heading.parent
    if parent is not None and parent.get("id") and parent.find(_HEADING_TAGS) is heading:
        return str(parent["id"])
    link = heading.find("a", href=re.compile(r"^#."), class_=lambda c: c != "toc-backref")
    return str(link["href"])[1:] if link is not None else ""


def _fence(pre: Tag) -> str:
    """A <pre> block kept whole as a fenced block, its indentation relative to its least-indented line."""
    for br in pre.find_all("br"):
        br.replace_with("\n")
    lines = [line.rstrip() for line in pre.get_text().replace("\r\n", "\n").replace("\xa0", " ").split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "```\n" + textwrap.dedent("\n".join(lines)) + "\n```" if lines else ""


def _list(lst: Tag) -> str:
    items = []
    for child in lst.children:
        if isinstance(child, Tag) and child.name == "li":
            items.append(_item(_render(child.children)))
        elif isinstance(child, Tag) or (type(child) in (NavigableString, CData) and str(child).strip()):
            items.append(_item(_render([child])))  # stray content between items, e.g. a bare nested <ul>
    return "\n".join(item for item in items if item)


def _definitions(dl: Tag) -> str:
    """A definition list as list items "- term: definition"; a definition that is a list follows its term, which
    leads it in on a line of its own ("Prerequisites:")."""
    items, terms = [], []
    for child in dl.find_all(["dt", "dd"]):
        if child.find_parent("dl") is not dl:
            continue
        if child.name == "dt":
            terms.append(" ".join(_render(child.children)))
            continue
        blocks, lead = _render(child.children), ", ".join(term for term in terms if term)
        terms = []
        if lead and blocks and blocks[0].startswith("- "):
            # A term over a list introduces it, as a line of its own: "- Prerequisites: - All instances …" read
            # as one item, and the list before the definition list took it for one of its own items.
            items.append("\n".join([lead if lead.endswith(":") else f"{lead}:", *blocks]))
            continue
        if lead and blocks and not blocks[0].startswith("```"):
            blocks[0] = f"{lead} {blocks[0]}" if lead.endswith(":") else f"{lead}: {blocks[0]}"
        elif lead:
            blocks.insert(0, lead)
        items.append(_item(blocks))
    items.extend(_item([term]) for term in terms if term)
    return "\n".join(item for item in items if item)


def _item(blocks: list[str]) -> str:
    """One list item: "- " before its first line, the rest indented beneath it (fences stay at column 0)."""
    body = _indent("\n".join(blocks))
    if not body:
        return ""
    return "- " + body[2:] if body.startswith("  ") else "-\n" + body


def _indent(text: str) -> str:
    lines, in_fence = [], False
    for line in text.split("\n"):
        fence = line.startswith("```")
        lines.append(line if fence or in_fence or not line else "  " + line)
        in_fence = in_fence != fence
    return "\n".join(lines)


def _table(table: Tag) -> str:
    """One line per row, cells joined by " | "; rows of nested tables stay in their own cells."""
    rows = []
    for part in table.find_all(["caption", "tr"]):
        if part.find_parent("table") is not table:
            continue
        rows.append(_row([part] if part.name == "caption" else part.find_all(["td", "th"], recursive=False)))
    return "\n".join(row for row in rows if row.strip("| "))


def _row(cells: list[Tag]) -> str:
    """A table row on one line, except that a code block in a cell stays whole, fenced on its own lines."""
    out: list[str] = []
    line: list[str] = []
    for number, cell in enumerate(cells):
        if number:
            line.append("|")
        for block in _render(cell.children):
            if block.startswith("```") or "\n```" in block:  # a code block, or a list holding one
                out.extend([" ".join(line)] if line else [])
                out.append(block)
                line = []
            else:
                line.append(_squash(block))
    out.extend([" ".join(line)] if line else [])
    return "\n".join(out)


def _squash(text: str) -> str:
    return " ".join(text.split())
