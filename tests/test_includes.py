"""Server-side includes: a fragment takes its place on the page that includes it."""

from __future__ import annotations

from rag.documents import Document, Section, load_document
from rag.includes import include_places, placed
from tests.conftest import KAFKA_DOCS

CONFIGURATION = b"""<html><body>
<h3><a id="brokerconfigs"></a>3.1 Broker Configs</h3>
<p>The essential configurations are the following.</p>
<!--#include virtual="generated/kafka_config.html" -->
<h3>3.3 Producer Configs</h3>
<!--#include virtual="generated/producer_config.html" -->
<!--#include virtual="../includes/_footer.htm" -->
<!--//#include virtual="generated/commented_out.html" -->
</body></html>"""
BROKER_FRAGMENT = (
    b"<h4><a id='log.retention.ms'></a>log.retention.ms</h4><p>The number of milliseconds to keep a log file.</p>"
)


def _places(files: dict[str, bytes]) -> dict[str, tuple[str, ...]]:
    return include_places(files, files.__getitem__)


def test_a_fragment_takes_the_heading_path_it_is_included_under():
    places = _places(
        {
            "configuration.html": CONFIGURATION,
            "generated/kafka_config.html": BROKER_FRAGMENT,
            "generated/producer_config.html": b"<h4>acks</h4><p>x</p>",
            "generated/commented_out.html": b"<p>x</p>",
        }
    )
    assert places == {
        "generated/kafka_config.html": ("Configuration", "3.1 Broker Configs"),
        "generated/producer_config.html": ("Configuration", "3.3 Producer Configs"),
    }  # the site's footer is no file of the corpus; a commented-out directive includes nothing


def test_a_frame_that_assembles_pages_which_include_others_places_nothing():
    files = {
        "docs/documentation.html": b"<h2>3. Configuration</h2><!--#include virtual='configuration.html' -->"
        b"<h2>4. Design</h2><!--#include virtual='design.html' -->",
        "docs/configuration.html": CONFIGURATION,
        "docs/design.html": b"<h3>4.1 Motivation</h3><p>x</p>",
        "docs/generated/kafka_config.html": BROKER_FRAGMENT,
    }
    assert _places(files) == {"docs/generated/kafka_config.html": ("Configuration", "3.1 Broker Configs")}


def test_an_include_cycle_places_nothing():
    files = {
        "a.html": b"<h2>In A</h2><!--#include virtual='b.html' -->",
        "b.html": b"<h2>In B</h2><!--#include virtual='a.html' -->",
    }
    assert _places(files) == {}


def test_a_page_that_cannot_be_read_places_nothing():
    files = {"configuration.html": CONFIGURATION, "generated/kafka_config.html": BROKER_FRAGMENT}

    def read(path: str) -> bytes:
        raise PermissionError(13, "Permission denied", path)

    assert include_places(files, read) == {}


def test_files_are_read_only_when_they_are_html_pages():
    read: list[str] = []
    files = {"a.html": CONFIGURATION, "notes.txt": b"<!--#include virtual='a.html' -->", "b.md": b"# B"}
    include_places(files, lambda path: read.append(path) or files[path])
    assert read == ["a.html"]


def test_a_placed_document_is_titled_by_its_page_and_headed_by_the_include():
    document = load_document(BROKER_FRAGMENT, "generated/kafka_config.html")
    assert document.title == "Kafka config"  # named from its file, as the fragment has no title
    moved = placed(document, ("Configuration", "3.1 Broker Configs"))
    assert moved.title == "Configuration"
    assert [s.headings for s in moved.sections] == [("3.1 Broker Configs", "log.retention.ms")]
    assert moved.sections[0].text == document.sections[0].text and moved.sections[0].anchor == "log.retention.ms"
    assert moved.source_path == document.source_path and moved.doc_id == document.doc_id


def test_placing_keeps_every_section():
    document = Document("id", "f.html", "F", (Section((), "intro"), Section(("A",), "a")), "html")
    assert [s.headings for s in placed(document, ("Page",)).sections] == [(), ("A",)]


def test_every_generated_reference_page_of_the_kafka_docs_has_its_place():
    files = {p.relative_to(KAFKA_DOCS).as_posix(): p for p in KAFKA_DOCS.rglob("*.html")}
    places = include_places(files, lambda path: files[path].read_bytes())
    generated = sorted(path for path in files if path.startswith("generated/"))
    assert generated and all(path in places for path in generated)
    assert places["generated/kafka_config.html"] == ("Configuration", "3.1 Broker Configs")
    assert "design.html" not in places and "configuration.html" not in places  # chapters of the frame
    assert places["generated/mirror_source_config.html"][-1] == "3.8.2 MirrorMaker Source Configs"
    assert places["generated/protocol_errors.html"] == ("Kafka protocol guide", "Constants", "Error Codes")
