"""Answer → chat Markdown: untrusted text stays text, markers and highlights are the only markup.

The Markdown is rendered with markdown-it (CommonMark, raw HTML allowed, as in the chat's renderer)
and the resulting HTML is parsed, so these tests check what a browser would build, not strings.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import gradio as gr
import pytest
from markdown_it import MarkdownIt

from rag import Answer, Citation, IndexStatus, Passage
from ui import render, web
from ui.web import answer_messages, conversation, flatten_history

NASTY = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "[click me](javascript:alert(1))",
    "![pixel](http://evil.example/x.png)",
    '<a href="javascript:alert(1)">link</a>',
    "<https://evil.example/autolink>",
    "# not a heading",
    "    not a code block",
    "*not* _emphasis_ **nor bold**",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "&amp; &lt;b&gt; stay as typed",
    "1. not a list\n- nor this",
    "> not a quote",
    "$x^2$ and $$y$$",
    "C:\\path\\to\\file and a trailing backslash \\",
    "`tick` and ```fence```",
    "---",
    "Title\n=====",
    "\"quotes\" and 'apostrophes'",
    "<!-- comment --> <?php echo 1; ?> <![CDATA[x]]>",
]


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.tags.append(("!comment", {}))

    def handle_pi(self, data: str) -> None:
        self.tags.append(("?pi", {}))


def to_html(markdown: str) -> _Collector:
    html = MarkdownIt("commonmark", {"html": True}).render(markdown)
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return collector


def visible(collector: _Collector) -> str:
    return " ".join("".join(collector.text).replace("\xa0", " ").split())


def squash(text: str) -> str:
    return " ".join(text.split())


def passage(text: str = "The broker rejects the request.", **changes: object) -> Passage:
    values: dict[str, object] = {
        "chunk_id": "c1",
        "doc_id": "d1",
        "title": "Kafka Error INVALID_RECORD_STATE",
        "section_path": ("Kafka Error INVALID_RECORD_STATE", "Common Causes"),
        "source_path": "000_0424dccc37dbf1fb.txt",
        "text": text,
        "score": 0.03125,
    }
    values.update(changes)
    return Passage(**values)  # type: ignore[arg-type]


def answer(text: str, citations: tuple[Citation, ...] = (), **changes: object) -> Answer:
    values: dict[str, object] = {
        "question": "q",
        "text": text,
        "citations": citations,
        "abstained": False,
        "query": "q",
    }
    values.update(changes)
    return Answer(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", NASTY)
def test_escaped_text_renders_exactly_as_written_and_builds_no_markup(text: str) -> None:
    rendered = to_html(render.escape_markdown(text))
    assert {tag for tag, _ in rendered.tags} <= {"p", "br"}
    assert visible(rendered) == squash(text)


def test_leading_indentation_is_kept_without_becoming_a_code_block() -> None:
    rendered = to_html(render.escape_markdown("line\n        deeply indented <b>"))
    assert {tag for tag, _ in rendered.tags} <= {"p", "br"}
    assert "\xa0" * 8 + "deeply indented <b>" in "".join(rendered.text)


def test_answer_markers_become_citation_spans_naming_their_passage() -> None:
    cited = Citation(1, passage(title="<b>T</b>", section_path=("<b>T</b>", 'S "x"')), ("The broker rejects",))
    rendered = to_html(render.render_answer(answer("The broker rejects the request. [1]", (cited,))))
    spans = [attrs for tag, attrs in rendered.tags if tag == "span"]
    assert spans == [{"class": "cite", "title": '<b>T</b> › S "x"'}]
    assert visible(rendered) == "The broker rejects the request. [1]"


def test_markers_without_a_citation_stay_literal_text() -> None:
    rendered = to_html(render.render_answer(answer("See [2] and [x](javascript:alert(1)).")))
    assert [tag for tag, _ in rendered.tags] == ["p"]
    assert visible(rendered) == "See [2] and [x](javascript:alert(1))."


@pytest.mark.parametrize("text", NASTY)
def test_answer_text_from_documents_is_inert(text: str) -> None:
    cited = Citation(1, passage(), ())
    rendered = to_html(render.render_answer(answer(f"{text} [1]", (cited,))))
    for tag, attrs in rendered.tags:
        assert tag in {"p", "br", "span", "code", "strong", "ul", "li", "pre"}, tag
        assert not any(name.startswith("on") or name in {"href", "src"} for name in attrs)


def test_answer_keeps_code_spans_fences_bold_and_bullets_of_its_own_markdown() -> None:
    text = "Set `acks=all` **first**.\n- retry <b>\n```\nbin/kafka-topics.sh --describe <topic>\n```"
    rendered = to_html(render.render_answer(answer(text)))
    tags = [tag for tag, _ in rendered.tags]
    assert tags.count("code") == 2 and "strong" in tags and "li" in tags and "pre" in tags
    assert "<topic>" in "".join(rendered.text) and "retry <b>" in "".join(rendered.text)


def test_an_unclosed_fence_while_streaming_is_closed() -> None:
    markdown = render.render_answer_text("Run:\n```sh\n<partial", {})
    assert markdown.endswith("```") and "sh" not in markdown.split("\n")[1]
    assert "<partial" in "".join(to_html(markdown).text)


def test_an_evidence_code_unit_renders_as_one_code_block_with_its_marker_outside() -> None:
    code = "# describe\nbin/kafka-topics.sh --describe <topic> \\\n    --exclude-internal\nuses ``` inside"
    text = f"**How to check**\n- Describe the topic: [1]\n````\n{code}\n````\n[2]\n- After it. [1]"
    cited = (Citation(1, passage(), ()), Citation(2, passage(), ()))
    markdown = render.render_answer(answer(text, cited))
    html = MarkdownIt("commonmark", {"html": True}).render(markdown)
    assert html.count("<pre>") == 1
    block = html[html.index("<pre>") : html.index("</pre>")]
    assert "&lt;topic&gt;" in block and "    --exclude-internal" in block and "uses ``` inside" in block
    assert "cite" not in block and "[2]" not in block  # the marker after the fence is a citation span
    assert html.count('class="cite"') == 3


def test_a_fence_under_a_list_item_cannot_leak_its_content_as_markup() -> None:
    text = "- Run this: [1]\n  ```\n<script>alert(1)</script>\n  ```\n- Then <b>check</b>."
    rendered = to_html(render.render_answer(answer(text, (Citation(1, passage(), ()),))))
    assert {tag for tag, _ in rendered.tags} <= {"p", "span", "code", "ul", "li", "pre"}
    assert "<script>alert(1)</script>" in "".join(rendered.text) and "<b>check</b>" in "".join(rendered.text)


def test_a_longer_fence_is_closed_only_by_a_run_as_long() -> None:
    markdown = render.render_answer_text("````\n```\n<x>\n````\nAfter <b>", {})
    html = MarkdownIt("commonmark", {"html": True}).render(markdown)
    assert html.count("<pre>") == 1 and "```\n&lt;x&gt;" in html and "&lt;b&gt;" in html.split("</pre>")[1]


def test_notes_are_shown_under_the_answer() -> None:
    rendered = to_html(render.render_answer(answer("Done.", notes=("Input trimmed to its error <lines>",))))
    assert visible(rendered).endswith("Input trimmed to its error <lines>")
    assert "em" in [tag for tag, _ in rendered.tags]


def test_highlight_marks_the_cited_sentence_across_line_breaks_and_escapes_the_rest() -> None:
    text = "Intro <script>x</script>.\nThe broker rejects\n  the request. Then retry."
    rendered = to_html(render.highlight(text, ("The broker rejects the request.", "not in the passage")))
    marks = [tag for tag, _ in rendered.tags if tag == "mark"]
    assert len(marks) == 2  # one per line the sentence spans
    assert "<script>x</script>" in "".join(rendered.text)
    html = MarkdownIt("commonmark", {"html": True}).render(render.highlight(text, ("The broker rejects the request.",)))
    assert re.search(r"<mark>The broker rejects</mark>", html)
    assert re.search(r"<mark>the request\.</mark> Then retry", html)


def test_sources_list_heading_file_score_and_text_in_marker_order() -> None:
    first = Citation(1, passage("Alpha text. Cited one.", chunk_id="a"), ("Cited one.",))
    second = Citation(
        2,
        passage("Beta <img src=x onerror=alert(1)>", chunk_id="b", source_path="dir/b.md", score=0.5),
        (),
    )
    markdown = render.render_sources((first, second))
    rendered = to_html(markdown)
    text = visible(rendered)
    assert text.index("[1] Kafka Error INVALID_RECORD_STATE › Common Causes") < text.index("[2]")
    assert "000_0424dccc37dbf1fb.txt · score 0.031" in text
    assert "dir/b.md · score 0.500" in text
    assert "Beta <img src=x onerror=alert(1)>" in text
    assert [tag for tag, _ in rendered.tags].count("mark") == 1
    assert not any(tag == "img" for tag, _ in rendered.tags)


def test_sources_link_only_http_urls() -> None:
    safe = Citation(1, passage(url="https://kafka.apache.org/documentation/#producerconfigs"), ())
    unsafe = Citation(2, passage(url="javascript:alert(1)"), ())
    rendered = to_html(render.render_sources((safe, unsafe)))
    links = [attrs["href"] for tag, attrs in rendered.tags if tag == "a"]
    assert links == ["https://kafka.apache.org/documentation/#producerconfigs"]
    assert "document: kafka.apache.org/documentation/#producerconfigs" in visible(rendered)


def test_no_label_needs_an_emoji_font() -> None:
    """Emoji render as empty boxes where no emoji font is installed: every label the UI writes is plain text."""
    emoji = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f]")
    cited = answer("Yes [1].", (Citation(1, passage(url="https://kafka.apache.org/"), ("Yes.",)),), notes=("n",))
    labels = [
        render.SOURCES_TITLE,
        render.RELATED_TITLE,
        render.render_answer(cited),
        render.render_sources(cited.citations),
        render.render_related((passage(),)),
        render.render_error("boom"),
        web.INTRO,
        web.SEARCHING_TITLE,
        web.EMPTY_HINT,
        web.THANKS_TEXT,
        web.ERROR_TEXT,
    ]
    assert [label for label in labels if emoji.search(label)] == []


def test_abstention_shows_the_answer_plainly_and_related_passages_apart() -> None:
    long_text = "word " * 200
    abstained = answer(
        "I could not find this in the indexed documents.",
        abstained=True,
        related=(passage(long_text, chunk_id="r1"), passage("Short <i>one</i>", chunk_id="r2")),
    )
    messages = answer_messages(abstained)
    assert [m.get("metadata", {}).get("title") for m in messages] == [None, render.related_title(abstained)]
    assert "Possibly related" in messages[1]["metadata"]["title"] and "(2)" in messages[1]["metadata"]["title"]
    related = visible(to_html(messages[1]["content"]))
    assert "[1]" not in related and "Short <i>one</i>" in related
    assert len(related) < len(long_text)  # excerpts, not whole chunks
    assert visible(to_html(messages[0]["content"])) == "I could not find this in the indexed documents."


def test_an_answer_with_citations_gets_a_collapsed_sources_message() -> None:
    cited = answer("Yes [1].", (Citation(1, passage(), ("The broker rejects the request.",)),))
    messages = answer_messages(cited)
    assert messages[1]["metadata"] == {"title": "Sources (1)", "status": "done"}
    assert len(messages) == 2


def test_status_footer_names_documents_chunks_model_and_build_time() -> None:
    status = IndexStatus("20250101-abc", 5, 123, "sentence-transformers/all-MiniLM-L6-v2", "2025-01-01T00:00Z", "flat")
    text = visible(to_html(render.render_status(status, retrieval="hybrid", answerer="extractive")))
    assert text == (
        "Index 20250101-abc · 5 documents · 123 chunks · model all-MiniLM-L6-v2 · built 2025-01-01T00:00Z"
        " · hybrid retrieval · extractive answerer"
    )


def test_gradio_history_is_flattened_to_role_and_text() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Why?"}], "metadata": None},
        {"role": "assistant", "content": "Because [1]."},
        {"role": "assistant", "content": "sources…", "metadata": {"title": "Sources (1)"}},
    ]
    assert flatten_history(messages) == [
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "Because [1]."},
    ]
    with pytest.raises(gr.Error, match=r"history\[1\]: role must be"):
        flatten_history([{"role": "system", "content": "x"}])


def test_follow_ups_are_asked_with_the_clean_conversation() -> None:
    from ui.web import Turn

    first = Turn("What is <x>?", (), answer("It is `x` [1]."), 1, 2, "hybrid", 5)
    assert conversation([first]) == [
        {"role": "user", "content": "What is <x>?"},
        {"role": "assistant", "content": "It is `x` [1]."},
    ]
