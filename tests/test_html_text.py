"""HTML to sections: the real Kafka documentation pages, and small pages that pin each rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from rag.documents import Section
from rag.html_text import parse_html

KAFKA_DOCS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "kafka-docs"


def _fallback(path: Path) -> str:
    return path.stem.replace("-", " ").title()


@pytest.fixture(scope="module")
def kafka_docs() -> dict[str, tuple[str, list[Section]]]:
    if not KAFKA_DOCS.is_dir():
        pytest.skip(f"Kafka docs corpus not found at {KAFKA_DOCS}")
    return {
        path.relative_to(KAFKA_DOCS).as_posix(): parse_html(path.read_text(encoding="utf-8"), _fallback(path))
        for path in sorted(KAFKA_DOCS.rglob("*.html"))
    }


def _page(kafka_docs, name: str) -> tuple[str, list[Section]]:
    return kafka_docs[name]


def _text(sections: list[Section]) -> str:
    return "\n\n".join(section.text for section in sections)


def _uncommented(name: str) -> str:
    return re.sub(r"<!--.*?-->", "", (KAFKA_DOCS / name).read_text(encoding="utf-8"), flags=re.S)


def _visible_text(raw: str) -> str:
    """What a browser shows, measured independently: template script bodies parsed as HTML, scripts gone."""
    soup = BeautifulSoup(raw, "lxml")
    parts = []
    for script in soup.find_all("script"):
        if script.get("type") == "text/x-handlebars-template":
            parts.append(BeautifulSoup(script.string or "", "lxml").get_text(" "))
        script.decompose()
    for style in soup.find_all("style"):
        style.decompose()
    parts.append(soup.get_text(" "))
    return " ".join(" ".join(parts).split())


# --- the real Kafka documentation -------------------------------------------------------------------


def test_every_kafka_page_yields_a_title_and_sections(kafka_docs):
    assert len(kafka_docs) >= 37
    for name, (title, sections) in kafka_docs.items():
        assert title.strip(), name
        assert sections, name
        for section in sections:
            assert section.text.strip() == section.text and section.text, (name, section.headings)
            assert all(heading.strip() for heading in section.headings), (name, section.headings)
        if re.search(r"<h[2-6]\b", _uncommented(name)):
            assert any(section.headings for section in sections), f"{name} has headings but no heading paths"


def test_design_page_keeps_its_heading_path_and_text(kafka_docs):
    title, sections = _page(kafka_docs, "design.html")
    assert title == "Design"  # the page has no <h1> and no <title>: the caller's name is the title
    motivation = [s for s in sections if any("Motivation" in heading for heading in s.headings)]
    assert motivation and "high-throughput" in motivation[0].text
    assert motivation[0].headings == ("4.1 Motivation",) and motivation[0].anchor == "majordesignelements"
    filesystem = next(s for s in sections if s.headings[-1:] == ("Don't fear the filesystem!",))
    assert filesystem.headings == ("4.2 Persistence", "Don't fear the filesystem!")
    assert filesystem.anchor == "design_filesystem"
    assert "pagecache" in filesystem.text
    assert "- The memory overhead of objects is very high" in filesystem.text


def test_ops_page_yields_many_real_sections(kafka_docs):
    _, sections = _page(kafka_docs, "ops.html")
    assert len(sections) > 100  # 123 headings in the source; parents with no own body fold into paths
    text = _text(sections)
    assert len(text) > 190_000
    assert "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions" in text
    add_topic = next(s for s in sections if s.anchor == "basic_ops_add_topic")
    assert add_topic.headings == ("6.1 Basic Kafka Operations", "Adding and removing topics")
    assert (
        "```\n$ bin/kafka-topics.sh --bootstrap-server localhost:9092 --create --topic my_topic_name \\\n"
        "    --partitions 20 --replication-factor 3 --config x=y\n```"
    ) in add_topic.text
    row = "Message in rate | kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=([-.\\w]+) | "
    assert row in text  # a table row, cells joined by " | "


def test_sections_nested_in_list_items_keep_their_headings(kafka_docs):
    _, sections = _page(kafka_docs, "security.html")  # 7.4 is written as <ol><li><h4>...</h4>...</li>
    plain = next(s for s in sections if s.anchor == "security_sasl_plain_brokerconfig")
    assert plain.headings == (
        "7.4 Authentication using SASL",
        "Authentication using SASL/PLAIN",
        "Configuring Kafka Brokers",
    )
    assert (
        "```\nKafkaServer {" in plain.text and "org.apache.kafka.common.security.plain.PlainLoginModule" in plain.text
    )
    assert len(sections) > 50
    assert max(len(s.text) for s in sections) < 12_000


def test_kafka_corpus_text_is_nearly_all_of_the_visible_text(kafka_docs):
    extracted = visible = 0
    for name, (_, sections) in kafka_docs.items():
        extracted += sum(len(" ".join(section.text.split())) for section in sections)
        visible += len(_visible_text((KAFKA_DOCS / name).read_text(encoding="utf-8")))
    # Measured: 1,174,000 of 1,182,000 visible characters (the rest is headings, kept in paths, and chrome).
    assert extracted > 1_000_000
    assert extracted > 0.9 * visible


def test_no_template_syntax_license_or_ssi_directive_is_left(kafka_docs):
    for name, (title, sections) in kafka_docs.items():
        for piece in [title, *(h for s in sections for h in s.headings), *(s.text for s in sections)]:
            assert "{{" not in piece and "}}" not in piece, name
            assert "#include" not in piece and "include virtual" not in piece, name
            assert "Licensed to the Apache Software Foundation" not in piece, name
    quickstart = _text(_page(kafka_docs, "quickstart.html")[1])
    assert "$ tar -xzf kafka_SCALA_VERSION-VERSION.tgz" in quickstart
    configuration = _text(_page(kafka_docs, "configuration.html")[1])
    assert "- `broker.id`" in configuration and "property file format" in configuration


def test_every_pre_block_is_one_fenced_block(kafka_docs):
    for name, (_, sections) in kafka_docs.items():
        blocks = len(re.findall(r"<pre\b", _uncommented(name)))
        fences = [line for s in sections for line in s.text.split("\n") if line.startswith("```")]
        for section in sections:
            section_fences = [line for line in section.text.split("\n") if line.startswith("```")]
            assert len(section_fences) % 2 == 0, (name, section.headings)
        assert len(fences) // 2 == blocks, name  # every non-empty <pre> on these pages, none split


def test_streams_pages_lose_their_navigation_and_keep_content(kafka_docs):
    title, sections = _page(kafka_docs, "streams/developer-guide/manage-topics.html")
    assert title == "Managing Streams Application Topics"
    text = _text(sections)
    for chrome in ("Previous", "Next", "Run Demo App", "Tutorial: Write App", "Documentation Kafka Streams"):
        assert chrome not in text
    user_topics = next(s for s in sections if s.headings == ("User topics",))
    assert user_topics.anchor == "user-topics"
    assert "- Input topics: Topics that are specified via source processors" in user_topics.text
    assert "`StreamsBuilder#stream()`" in user_topics.text
    testing = _text(_page(kafka_docs, "streams/developer-guide/testing.html")[1])
    assert "Table of Contents" not in testing and "TopologyTestDriver" in testing
    config = _page(kafka_docs, "streams/developer-guide/config-streams.html")[1]
    acks = next(s for s in config if s.headings[-1:] == ("acks",))
    assert acks.anchor == "acks"  # Sphinx's headerlink, not the toc-backref back to the contents list
    assert acks.headings == (
        "Configuration parameter reference",
        "Recommended configuration parameters for resiliency",
        "acks",
    )


# --- small pages, one rule each -----------------------------------------------------------------------


def _parse(body: str, title: str = "Fallback") -> tuple[str, list[Section]]:
    return parse_html(f"<html><body>{body}</body></html>", title)


def test_a_definition_list_on_a_real_page_leads_its_list_with_its_term(kafka_docs):
    """The reset tool's prerequisites (a <dl> whose definition is a list) read as "Prerequisites:" and its items,
    apart from the list of what the tool does not do above them."""
    _, sections = _page(kafka_docs, "streams/developer-guide/app-reset-tool.html")
    text = _text(sections)
    assert "\n\nPrerequisites:\n- All instances of your application must be stopped." in text


def test_heading_paths_nest_by_level_and_empty_sections_are_dropped():
    _, sections = _parse(
        "<p>lead</p><h2 id='a'>A</h2><p>a</p><h3>B</h3><h4 id='c'>C</h4><p>c</p>"
        "<h3>D</h3><p>d</p><h2>E</h2><h4>F</h4><p>f</p><h2>Empty</h2>"
    )
    assert [(s.headings, s.text, s.anchor) for s in sections] == [
        ((), "lead", ""),
        (("A",), "a", "a"),
        (("A", "B", "C"), "c", "c"),
        (("A", "D"), "d", ""),
        (("E", "F"), "f", ""),
    ]


def test_heading_anchors_come_from_kafka_sphinx_or_the_heading():
    _, sections = _parse(
        '<h3 class="anchor-heading"><a id="kafka" class="anchor-link"></a><a href="#kafka">Kafka</a></h3>'
        "<p>1</p>"
        '<div class="section" id="sphinx"><h2><a class="toc-backref" href="#id7">Sphinx</a>'
        '<a class="headerlink" href="#sphinx">¶</a></h2><p>2</p></div>'
        '<section id="sec"><h2>Section</h2><p>3</p></section>'
        "<h2><a href='#link'>Link</a></h2><p>4</p>"
    )
    assert [(s.headings[-1], s.anchor) for s in sections] == [
        ("Kafka", "kafka"),
        ("Sphinx", "sphinx"),
        ("Section", "sec"),
        ("Link", "link"),
    ]


def test_title_is_first_h1_then_title_element_then_fallback():
    page = "<html><head><title>Page | Site</title></head><body>{}</body></html>"
    title, sections = parse_html(page.format("<h1 id='t'>Heading One</h1><p>x</p><h2>Sub</h2><p>y</p>"), "fb")
    assert title == "Heading One"
    assert [(s.headings, s.anchor) for s in sections] == [((), "t"), (("Sub",), "")]
    assert parse_html(page.format("<h2>Sub</h2><p>y</p>"), "fb")[0] == "Page | Site"
    assert parse_html("<p>just text</p>", "fb")[0] == "fb"


def test_paragraphs_and_whitespace_are_normalised():
    _, [section] = _parse("<p>one\n   two&nbsp; three</p>loose <b>bold</b> text<p>line<br>break</p><div></div>")
    assert section.text == "one two three\n\nloose bold text\n\nline\nbreak"


def test_lists_nest_under_their_items():
    _, [section] = _parse(
        "<ul><li>one<ul><li>one.a</li><li>one.b</li></ul><li>two</ul><ol><li><p>first</p><p>more</p></ol>"
    )
    assert section.text == "- one\n  - one.a\n  - one.b\n- two\n\n- first\n  more"


@pytest.mark.parametrize(
    ("definition", "text"),
    [
        ("<dd>All instances must be stopped.</dd>", "- Prerequisites: All instances must be stopped."),
        # A list under its term is led in by it, not an item of the list before the definition list.
        ("<dd><ul><li>Stop every instance.</li><li>Check the parameters.</li></ul></dd>",
         "Prerequisites:\n- Stop every instance.\n- Check the parameters."),
    ],
)  # fmt: skip
def test_a_definition_follows_its_term_and_a_list_goes_under_it(definition, text):
    _, [section] = _parse(
        f"<ul><li>The tool does not reset offsets.</li></ul><dl><dt>Prerequisites</dt>{definition}</dl>"
    )
    assert section.text == f"- The tool does not reset offsets.\n\n{text}"


def test_headings_inside_lists_still_open_sections():
    _, sections = _parse(
        "<h2>Top</h2><p>intro</p><ol><li><h3 id='one'>One</h3><p>first</p><ul><li>a</li></ul></li>"
        "<li>loose item</li><li><h3>Two</h3>second</li></ol>"
    )
    assert [(s.headings, s.text, s.anchor) for s in sections] == [
        (("Top",), "intro", ""),
        (("Top", "One"), "first\n\n- a\n\n- loose item", "one"),
        (("Top", "Two"), "second", ""),
    ]


def test_tables_are_one_line_per_row():
    _, [section] = _parse(
        "<table><caption>Configs</caption><thead><tr><th>Name</th><th>Default</th></tr></thead>"
        "<tbody><tr><td><code>acks</code></td><td>all</td></tr><tr><td></td><td></td></tr>"
        "<tr><td>nested</td><td><table><tr><td>x</td><td>y</td></tr></table></td></tr></tbody></table>"
    )
    assert section.text == "Configs\nName | Default\n`acks` | all\nnested | x | y"


def test_code_blocks_stay_whole_and_inline_code_gets_backticks():
    _, [section] = _parse(
        "<p>Set <code>log.retention.ms</code> then run:</p>"
        "<pre><code class='language-bash'>\n    $ bin/kafka-configs.sh \\\n        --alter\n\n"
        "    done\n</code></pre>"
        "<pre>a<br>b</pre>"
        "<table><tr><td>Map</td><td><p>Example:</p><pre>x = 1\n  y = 2</pre><p>After.</p></td></tr></table>"
    )
    assert section.text == (
        "Set `log.retention.ms` then run:\n\n"
        "```\n$ bin/kafka-configs.sh \\\n    --alter\n\ndone\n```\n\n"
        "```\na\nb\n```\n\n"
        "Map | Example:\n```\nx = 1\n  y = 2\n```\nAfter."
    )


def test_page_chrome_is_dropped_and_content_kept():
    page = """<html><head><title>T</title><style>p { color: red }</style><script>var t = 1;</script></head>
    <body class="layout with-sidebar">
      <header><a href="/">Site logo</a><nav><a href="/a">Menu link</a></nav></header>
      <div class="cookie-banner">We use cookies</div>
      <ul class="breadcrumbs"><li>Docs</li><li>Page</li></ul>
      <div id="sidebar">Sidebar text</div>
      <aside>Aside text</aside>
      <article>
        <header><h1>Article Title</h1></header>
        <p>Real content.</p>
        <form><input value="q"><button>Search</button></form>
        <div class="comments"><p>Great post!!</p></div>
        <div class="pagination"><a href="/prev">Previous</a><a href="/next">Next</a></div>
        <pre><span class="token comment"># a comment in code stays</span></pre>
      </article>
      <footer>Copyright 2024</footer>
    </body></html>"""
    title, sections = parse_html(page, "fb")
    assert title == "Article Title"
    assert [s.text for s in sections] == ["Real content.\n\n```\n# a comment in code stays\n```"]


def test_scripts_never_become_text_but_escaped_markup_does():
    _, [section] = _parse(
        "<p>Before<script>alert(1)</script> after "
        '<img src=x onerror="alert(2)">&lt;script&gt;alert(3)&lt;/script&gt;</p>'
    )
    assert section.text == "Before after <script>alert(3)</script>"


def test_handlebars_templates_are_parsed_as_html():
    page = """<!-- license, not content -->
    <script><!--#include virtual="js/templateData.js" --></script>
    <script id="x-template" type="text/x-handlebars-template">
      <h3><a id="s" class="anchor-link"></a>Section</h3>
      <p>Get kafka_{{scalaVersion}}-{{fullDotVersion}}.tgz from /{{version}}/.{{#if x}} Maybe.{{/if}}</p>
      <!--#include virtual="generated/kafka_config.html" -->
    </script>
    <div class="p-x"></div>
    <p>Outside {{literal}} braces stay.</p>"""
    title, sections = parse_html(page, "Templated")
    assert title == "Templated"
    assert [(s.headings, s.anchor, s.text) for s in sections] == [
        (
            ("Section",),
            "s",
            "Get kafka_SCALA_VERSION-VERSION.tgz from /VERSION/. Maybe.\n\nOutside {{literal}} braces stay.",
        )
    ]
