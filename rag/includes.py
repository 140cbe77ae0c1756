"""Server-side includes: a fragment file is read where the page that includes it puts it.

The Kafka site assembles its pages with `<!--#include virtual="generated/kafka_config.html" -->`: the
generated reference pages are fragments with no title of their own, so named from their file they read
"Kafka config", where the published page shows them under "Configuration › 3.1 Broker Configs". A user
asks about a "broker setting" or a "MirrorMaker property"; the heading path is what names it, and it heads
every chunk's embedded and indexed text. `include_places` finds each included file's place; `placed` gives a
loaded document that place.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Callable, Collection

from rag.documents import Document, Section, title_from_path

_DIRECTIVE = b"<!--#include"
_PAGE_SUFFIXES = (".html", ".htm")


def include_places(source_paths: Collection[str], read: Callable[[str], bytes]) -> dict[str, tuple[str, ...]]:
    """{included source path: (page title, *heading path) where it is included} over a corpus's files, `read`
    giving a file's bytes (only HTML pages are read). Only files of the corpus count (not the site's own header
    and footer); a file included from several places takes the first, in source path order.

    A page that includes pages which include others (the site's frame, documentation.html, which assembles
    configuration.html, design.html, ...) places nothing: what it includes are chapters that keep their own
    names. Measured on the docs tuning questions, chapters renamed "Documentation › 4. Design" ranked worse
    (hit@1 −4 questions) where fragments placed in their chapter ranked better (+3)."""
    from rag.html_text import include_sites

    files = set(source_paths)
    includes: dict[str, list[tuple[str, tuple[str, ...]]]] = {}  # page -> (included file, place) in page order
    for source_path in sorted(files):
        if not source_path.lower().endswith(_PAGE_SUFFIXES):
            continue
        try:
            data = read(source_path)
        except OSError:  # gone or unreadable since the scan: the engine's read reports it
            continue
        if _DIRECTIVE not in data:
            continue
        raw = data.decode("utf-8", errors="replace")
        for target, place in include_sites(raw, title_from_path(source_path)):
            path = posixpath.normpath(posixpath.join(posixpath.dirname(source_path), target))
            if path in files and path != source_path:
                includes.setdefault(source_path, []).append((path, place))
    places: dict[str, tuple[str, ...]] = {}
    for included in includes.values():
        if not any(path in includes for path, _ in included):  # a frame's chapters keep their names
            for path, place in included:
                places.setdefault(path, place)
    return places


def placed(document: Document, place: tuple[str, ...]) -> Document:
    """`document` as the part of its including page at `place`: the page's title is its title, and the
    heading path of the include heads each of its sections' heading paths."""
    title, *headings = place
    return dataclasses.replace(
        document,
        title=title,
        sections=tuple(Section((*headings, *s.headings), s.text, s.anchor) for s in document.sections),
    )
